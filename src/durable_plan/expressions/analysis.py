"""JSONata expressions parsed once, and what they read: dependencies from the parsed tree.

Dependencies are read from the parsed expression, not from its text, so
``$lookup(steps, 'a')`` and ``steps.`a``` create an edge while the string literal
``'see steps.manual'`` does not. Regexes are compiled on RE2 at parse time
(``regex.py``): a pattern RE2 cannot run is a syntax error, before anything runs.
Workflow modules import this package through ``workflow.unsafe.imports_passed_through()``
(jsonata trips the sandbox). The walk that finds what an expression reads is
``reads.py``; what each part of a constructor is, ``forms.py``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import jsonata
from jsonata.jexception import JException

from durable_plan.expressions.forms import ListForm, ObjectForm, PathForm, _constructed, _literal
from durable_plan.expressions.reads import _Analysis
from durable_plan.expressions.regex import _re2_engine, _RegexRefused

ALWAYS_FORBIDDEN = frozenset({"eval"})
LOOP_VARIABLES = ("item", "index", "accumulator")
"""Inside a map or reduce body these are fields of the scope (``item.name``) and
variables too (``$index``, for use inside a filter: ``steps.a.results[$index]``)."""
NONDETERMINISTIC = frozenset({"now", "millis", "random", "shuffle"})


class ExpressionSyntaxError(ValueError):
    """The expression does not parse; the message says where."""


@dataclass(frozen=True)
class Expression:
    """A parsed JSONata expression and what it reads from ``steps``."""

    source: str
    refs: frozenset[str]
    dynamic: tuple[str, ...]
    paths: tuple[tuple[str, ...], ...]
    functions: frozenset[str]
    required: tuple[tuple[str, ...], ...] = ()
    bare_names: tuple[str, ...] = ()
    _cache: list[Any] = field(default_factory=list, compare=False, repr=False)
    simple_path: tuple[str, ...] | None = field(default=None, compare=False, repr=False)
    """For ``steps.a.b``: ``("a", "b")``, read without JSONata when the values allow
    (``_read_simple``); None for every other expression."""
    simple_array: tuple[tuple[str, ...], ...] | None = field(
        default=None, compare=False, repr=False
    )
    """For ``[steps.a.b, steps.c]``: each element's path, read without JSONata when the
    values allow (``_read_array``); None for every other expression."""
    prior_paths: tuple[tuple[str, ...], ...] = ()
    """Paths read under ``prior`` (each starts with a step id), like ``paths``."""
    prior_required: tuple[tuple[str, ...], ...] = ()
    prior_dynamic: tuple[str, ...] = ()
    """Reads of ``prior`` that name no step (``prior``, ``prior.*``): refused by the checks."""
    input_reads: tuple[str, ...] = ()
    """Names read as ``inputs.<name>`` (a plan file's inputs), in order of appearance."""
    shape_paths: tuple[tuple[str, ...], ...] = ()
    """Paths read from the root's ``steps`` whose every name reads a field of the value
    before it (each starts with a step id), cut where that stops holding (a focus ``@``,
    an ancestor ``%``, a sort, a block, a function call): what the return-shape check
    walks. Paths inside filters and lambdas, where ``steps`` is a field of the current
    item, are left out."""
    guarded_paths: tuple[tuple[str, ...], ...] = ()
    """``shape_paths`` read where their absence is tested, not assumed: the condition of a
    ``? :`` (and of ``?:`` / ``??``, which JSONata writes as one) and ``$exists``'s
    argument. A field named there may be absent, and the expression still has a value."""
    literal: tuple[Any, ...] = ()
    """``(value,)`` when the whole expression is one literal (``'goblin'``, ``15``,
    ``true``, ``null``); empty otherwise."""
    constructed: ListForm | ObjectForm | None = None
    """For a whole expression that is an array constructor (``[steps.a.x, 1]``) or an
    object constructor (``{"total": steps.o.total}``): what each part is, as far as the
    analysis can tell (``ListForm``), so the checks can type the parts against the
    argument's schema. None for every other expression."""

    @property
    def prior_refs(self) -> frozenset[str]:
        """Step ids read as ``prior.<id>``."""
        return frozenset(path[0] for path in self.prior_paths)

    @property
    def is_dynamic(self) -> bool:
        """True when the expression reads steps the checker cannot name statically."""
        return bool(self.dynamic)


def parse(source: str) -> Expression:
    """Parse and analyse; raises ExpressionSyntaxError with JSONata's own message."""
    simple = _simple_path(source)
    if simple is not None:
        # What the parse and the walk below find for this shape, without either (most
        # bindings are plain paths, and parsing costs more than evaluating); JSONata
        # parses the text only if an evaluation ever needs it (``_instance``).
        return Expression(
            source=source,
            refs=frozenset(simple[:1]),
            dynamic=(),
            paths=(simple,),
            functions=frozenset(),
            required=(simple,),
            simple_path=simple,
            shape_paths=(simple,),
        )
    elements = _simple_array(source)
    if elements is not None:
        # A list of plain paths (a join's inputs, the commonest binding after a path):
        # the same as the walk finds, every element a required path.
        return Expression(
            source=source,
            refs=frozenset(path[0] for path in elements),
            dynamic=(),
            paths=elements,
            functions=frozenset(),
            required=elements,
            simple_array=elements,
            shape_paths=tuple(dict.fromkeys(elements)),
            constructed=ListForm(tuple(PathForm(path) for path in elements)),
        )
    return parse_with_jsonata(source)


def parse_with_jsonata(source: str) -> Expression:
    """``parse`` without the plain-path shortcut (the reference the shortcut is tested against)."""
    try:
        compiled = jsonata.Jsonata(source, regex_engine=_re2_engine)
    except JException as exc:
        raise ExpressionSyntaxError(_jsonata_message(exc)) from None
    except KeyError as exc:
        # jsonata-python's parser has no entry for operators JSONata lacks, such as '!'.
        raise ExpressionSyntaxError(f"JSONata has no operator {exc.args[0]!r}") from None
    except _RegexRefused as exc:
        raise ExpressionSyntaxError(str(exc)) from None
    except RecursionError:
        raise ExpressionSyntaxError("the expression is nested too deeply") from None
    except Exception as exc:  # the parser's own bugs must not escape the checks
        raise ExpressionSyntaxError(f"cannot parse: {type(exc).__name__}: {exc}") from None
    analysis = _Analysis()
    analysis.visit(compiled.ast)
    if analysis.signatures:
        # jsonata-python checks a lambda's signature with a regex on Python's
        # backtracking engine, and a plan may write any signature: refuse them.
        raise ExpressionSyntaxError(
            "function signatures (function($x)<n:n>{...}) cannot be used in plans; "
            "leave the <...> out"
        )
    return Expression(
        source=source,
        refs=frozenset(analysis.refs),
        dynamic=tuple(analysis.dynamic),
        paths=tuple(analysis.paths),
        functions=frozenset(analysis.functions),
        required=tuple(analysis.required),
        bare_names=tuple(analysis.bare_names),
        _cache=[compiled],
        prior_paths=tuple(analysis.prior_paths),
        prior_required=tuple(analysis.prior_required),
        prior_dynamic=tuple(analysis.prior_dynamic),
        input_reads=tuple(dict.fromkeys(analysis.input_reads)),
        shape_paths=tuple(dict.fromkeys(analysis.shape_paths)),
        guarded_paths=tuple(dict.fromkeys(analysis.guarded_paths)),
        literal=_literal(compiled.ast),
        constructed=_constructed(compiled.ast),
    )


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_KEYWORDS = frozenset({"and", "or", "in", "true", "false", "null", "function"})
"""Names JSONata's parser reads as operators or literals, never as field names."""


def _simple_path(source: str) -> tuple[str, ...] | None:
    """``steps.a.b`` (plain ASCII names, no spaces) as ``("a", "b")``; None otherwise."""
    if not source.startswith("steps."):
        return None
    names = source.split(".")[1:]
    for name in names:
        if name in _KEYWORDS or _NAME.fullmatch(name) is None:
            return None
    return tuple(names)


def _simple_array(source: str) -> tuple[tuple[str, ...], ...] | None:
    """``[steps.a.b, steps.c]`` (plain paths, spaces only between them) as their paths."""
    if not (source.startswith("[") and source.endswith("]")):
        return None
    paths = []
    for part in source[1:-1].split(","):
        path = _simple_path(part.strip(" "))
        if path is None:
            return None
        paths.append(path)
    return tuple(paths)


def _jsonata_message(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    position = getattr(exc, "location", None)
    if isinstance(position, int) and position >= 0:
        return f"{text} (at character {position})"
    return text
