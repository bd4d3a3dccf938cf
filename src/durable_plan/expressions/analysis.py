"""JSONata expressions parsed once, and what they read: dependencies from the parsed tree.

Dependencies are read from the parsed expression, not from its text, so
``$lookup(steps, 'a')`` and ``steps.`a``` create an edge while the string literal
``'see steps.manual'`` does not. Regexes are compiled on RE2 at parse time
(``regex.py``): a pattern RE2 cannot run is a syntax error, before anything runs.
Workflow modules import this package through ``workflow.unsafe.imports_passed_through()``
(jsonata trips the sandbox).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import jsonata
from jsonata.jexception import JException

from durable_plan.expressions.regex import _re2_engine, _RegexRefused

ALWAYS_FORBIDDEN = frozenset({"eval"})
LOOP_VARIABLES = ("item", "index", "accumulator")
"""Inside a map or reduce body these are fields of the scope (``item.name``) and
variables too (``$index``, for use inside a filter: ``steps.a.results[$index]``)."""
NONDETERMINISTIC = frozenset({"now", "millis", "random", "shuffle"})
INPUTS_ROOT = "inputs"
"""Beside ``steps`` in a plan file: its input values (``inputs.<name>``), checked against
the names the file declares."""
PRIOR_ROOT = "prior"
"""Beside ``steps``: results of steps that ended ok in earlier plans of the conversation
(``prior.<id>.<field>``, see ``reuse.py``). They create no dependency."""

_SKIP_ATTRS = frozenset({"_outer_instance", "outer", "seeking_parent", "tuple", "focus", "token"})
_RELATIVE_ATTRS = frozenset({"stages", "predicate", "group"})
_LEAVES = frozenset({type(None), str, int, float, bool})
"""Attribute values the walk returns from at once: skipped without the call."""


class ExpressionSyntaxError(ValueError):
    """The expression does not parse; the message says where."""


@dataclass(frozen=True)
class PathForm:
    """A part that is a plain path from the root's ``steps`` (``steps.a.x``: ``("a",
    "x")``): its value is whatever the result holds there, or undefined."""

    path: tuple[str, ...]


@dataclass(frozen=True)
class LiteralForm:
    """A part that is one literal: a string, number, ``true``, ``false`` or ``null``."""

    value: Any


@dataclass(frozen=True)
class ListForm:
    """An array constructor. JSONata splices a part whose value is an array (one level)
    and drops a part that is undefined; a part that is itself an array constructor is
    kept whole, as one item. ``None``: a part the analysis cannot tell (any value)."""

    parts: tuple[Form | None, ...]


@dataclass(frozen=True)
class ObjectForm:
    """An object constructor with literal keys (a key whose value is undefined is left
    out). ``None``: a value the analysis cannot tell."""

    entries: tuple[tuple[str, Form | None], ...]


Form = PathForm | LiteralForm | ListForm | ObjectForm


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


_LITERAL_TYPES = frozenset({"string", "number", "value"})


def _literal(node: Any) -> tuple[Any, ...]:
    """``(value,)`` for an expression that is one literal; ``()`` otherwise."""
    if getattr(node, "type", None) not in _LITERAL_TYPES:
        return ()
    if any(getattr(node, name, None) for name in ("stages", "predicate", "group", "keep_array")):
        return ()
    value = getattr(node, "value", None)
    if value is None or isinstance(value, str | bool | int | float):
        return (value,)
    return ()


MAX_FORM_DEPTH = 8
"""Constructors nested deeper than this are parts the analysis cannot tell."""
_PARSER_ATTRS = frozenset({"_outer_instance", "id", "position", "bp", "lbp", "level"})
"""The parser's own bookkeeping on every node."""
_PLAIN = _PARSER_ATTRS | {"value", "type"}
"""The attributes a literal or a path's name may set and still be only that: anything
else (a predicate, a stage, a focus, ``[]``, a sort, a group) changes what it reads."""
_CONSTRUCTOR = _PLAIN | {"expressions", "lhs_object", "consarray"}
_PATH = _PLAIN | {"steps"}


def _constructed(node: Any) -> ListForm | ObjectForm | None:
    """The whole expression's constructor, if it is one (``[..]``, ``{..}``) and nothing
    is applied to its result (``[a, b][0]`` is not)."""
    form = _form(node, 0)
    return form if isinstance(form, ListForm | ObjectForm) else None


def _form(node: Any, depth: int) -> Form | None:
    """What one part of a constructor is; None when the analysis cannot tell."""
    if not hasattr(node, "__dict__"):
        return None
    kind = getattr(node, "type", None)
    value = getattr(node, "value", None)
    if kind in _LITERAL_TYPES and _only(node, _PLAIN):
        scalar = value is None or isinstance(value, str | bool | int | float)
        return LiteralForm(value) if scalar else None
    if kind == "path" and _only(node, _PATH):
        return _path_form(list(getattr(node, "steps", None) or []))
    if kind != "unary" or depth >= MAX_FORM_DEPTH or not _only(node, _CONSTRUCTOR):
        return None
    if value == "[" and not getattr(node, "lhs_object", None):
        parts = getattr(node, "expressions", None)
        if isinstance(parts, list):
            return ListForm(tuple(_form(part, depth + 1) for part in parts))
    if value == "{" and not getattr(node, "expressions", None):
        pairs = getattr(node, "lhs_object", None)
        if not isinstance(pairs, list):
            return None
        entries: list[tuple[str, Form | None]] = []
        keys: set[str] = set()
        for pair in pairs:
            if not (isinstance(pair, list | tuple) and len(pair) == 2):
                return None
            key = pair[0]
            if getattr(key, "type", None) != "string" or not _only(key, _PLAIN):
                return None  # a computed key: which keys the object has is unknown
            if not isinstance(key.value, str) or key.value in keys:
                return None  # (a repeated key fails at run time: JSONata's D1009)
            keys.add(key.value)
            entries.append((key.value, _form(pair[1], depth + 1)))
        return ObjectForm(tuple(entries))
    return None


def _path_form(parts: list[Any]) -> PathForm | None:
    """``steps.a.x`` (or ``$.steps.a.x``, ``$$.steps.a.x``) of names only."""
    if parts and getattr(parts[0], "type", None) == "variable" and parts[0].value in ("", "$"):
        if not _only(parts[0], _PLAIN):
            return None  # ``$[1].steps.a.x``: a predicate on the root, undefined at run time
        parts = parts[1:]  # at a constructor's top the context is the root
    if len(parts) < 2 or not _is_name(parts[0], "steps"):
        return None
    names: list[str] = []
    for part in parts:
        if getattr(part, "type", None) != "name" or not isinstance(part.value, str):
            return None
        if not _only(part, _PLAIN):
            return None
        names.append(part.value)
    return PathForm(tuple(names[1:]))


def _only(node: Any, allowed: frozenset[str]) -> bool:
    """No attribute outside ``allowed`` is set (to anything but None, False or empty)."""
    return all(
        name in allowed or value is None or value is False or value == []
        for name, value in vars(node).items()
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


class _Analysis:
    """Walks the AST once, collecting step references and function names.

    ``_relative`` counts how deep the walk is inside path steps after the first
    and inside filters, where the context is no longer the root: there, ``$``,
    ``*`` and ``**`` read the current item, not ``{"steps": ...}``. At the root
    they (and ``$$`` anywhere) read steps the checker cannot name.
    """

    def __init__(self) -> None:
        self.refs: set[str] = set()
        self.dynamic: list[str] = []
        self.paths: list[tuple[str, ...]] = []
        self.functions: set[str] = set()
        self.required: list[tuple[str, ...]] = []
        self._seen: set[int] = set()
        self._relative = 0
        self._optional = 0
        self.bare_names: list[str] = []
        self.signatures = 0
        self.prior_paths: list[tuple[str, ...]] = []
        self.prior_required: list[tuple[str, ...]] = []
        self.prior_dynamic: list[str] = []
        self.input_reads: list[str] = []
        self.shape_paths: list[tuple[str, ...]] = []
        self.guarded_paths: list[tuple[str, ...]] = []
        self._guarding = 0

    def visit(self, node: Any) -> None:
        if node is None or isinstance(node, str | int | float | bool):
            return
        if isinstance(node, list | tuple):
            for item in node:
                self.visit(item)
            return
        if not hasattr(node, "__dict__") or id(node) in self._seen:
            return
        self._seen.add(id(node))
        kind = getattr(node, "type", None)
        value = getattr(node, "value", None)
        if kind == "variable" and isinstance(value, str):
            if value == "$":
                self.dynamic.append("$$")
            elif value == "":
                if not self._relative:
                    self.dynamic.append("$")
            else:
                self.functions.add(value)
        elif kind in ("wildcard", "descendant") and not self._relative:
            self.dynamic.append(str(value))
        elif kind == "name" and value == PRIOR_ROOT and not self._relative:
            self.prior_dynamic.append(PRIOR_ROOT)  # all of prior, e.g. $lookup(prior, $x)
        elif kind == "name" and isinstance(value, str) and not self._relative:
            # A field of the root, which holds only ``steps``: never matches. A model
            # writes this for a literal ("bind": {"name": "goblin"}).
            self.bare_names.append(value)
        if kind == "lambda":
            if getattr(node, "signature", None) is not None:
                self.signatures += 1
            # A lambda's body reads whatever it is applied to, not the root.
            self._visit_relative([getattr(node, "body", None), getattr(node, "arguments", None)])
            return
        if kind == "function" and self._visit_lookup(node):
            return
        if self._tests_existence(node):
            self._optional += 1
            try:
                for name, child in vars(node).items():
                    if type(child) not in _LEAVES and name not in _SKIP_ATTRS:
                        self._visit_guard(child) if self._guards(kind, name) else self.visit(child)
            finally:
                self._optional -= 1
            return
        if kind == "path":
            if not (
                self._visit_steps_path(node)
                or self._visit_prior_path(node)
                or self._visit_inputs_path(node)
            ):
                self._visit_path(node)
            return
        for name, child in vars(node).items():
            if type(child) in _LEAVES or name in _SKIP_ATTRS:
                continue  # most of a node's ~50 attributes: None, flags, positions
            if name in _RELATIVE_ATTRS:
                self._visit_relative(child)
            else:
                self.visit(child)

    @staticmethod
    def _guards(kind: Any, name: str) -> bool:
        """The part of a conditional or ``$exists`` that tests whether a value is there."""
        return (kind == "condition" and name == "condition") or (
            kind == "function" and name == "arguments"
        )

    def _visit_guard(self, node: Any) -> None:
        self._guarding += 1
        try:
            self.visit(node)
        finally:
            self._guarding -= 1

    def _visit_relative(self, node: Any) -> None:
        self._relative += 1
        try:
            self.visit(node)
        finally:
            self._relative -= 1

    def _visit_path(self, node: Any) -> None:
        """A path not rooted at ``steps``: its head reads the current context, the rest do not."""
        parts = list(getattr(node, "steps", None) or [])
        if parts:
            self.visit(parts[0])
        self._visit_relative(parts[1:])
        for name, child in vars(node).items():
            if type(child) not in _LEAVES and name not in _SKIP_ATTRS and name != "steps":
                self._visit_relative(child)

    def _visit_steps_path(self, node: Any) -> bool:
        parts = list(getattr(node, "steps", None) or [])
        rooted = not self._relative
        if parts and self._is_root(parts[0]):
            rooted = True  # $$ reads the root anywhere, $ only where the context is the root
            parts = parts[1:]
        if not parts or not _is_name(parts[0], "steps"):
            return False
        if rooted:
            shape = _shape_path(parts[1:])
            if shape:
                self.shape_paths.append(shape)
                if self._guarding:
                    self.guarded_paths.append(shape)
        # Stages/predicates and later parts may themselves hold expressions.
        self._visit_relative(getattr(parts[0], "stages", None))
        self._visit_relative(parts[1:])
        if len(parts) == 1:
            self.dynamic.append("steps")
            return True
        second = parts[1]
        if getattr(second, "type", None) == "name" and isinstance(second.value, str):
            self.refs.add(second.value)
            names: list[str] = []
            for part in parts[1:]:
                if getattr(part, "type", None) != "name" or not isinstance(part.value, str):
                    break
                names.append(part.value)
            self.paths.append(tuple(names))
            if not self._optional:
                self.required.append(tuple(names))
        else:
            self.dynamic.append("steps." + str(getattr(second, "value", "?")))
        return True

    def _visit_prior_path(self, node: Any) -> bool:
        """``prior.<id>...``: an earlier plan's result, recorded apart from ``steps``."""
        parts = list(getattr(node, "steps", None) or [])
        if parts and self._is_root(parts[0]):
            parts = parts[1:]
        if not parts or not _is_name(parts[0], PRIOR_ROOT):
            return False
        self._visit_relative(getattr(parts[0], "stages", None))
        self._visit_relative(parts[1:])
        names: list[str] = []
        for part in parts[1:]:
            if getattr(part, "type", None) != "name" or not isinstance(part.value, str):
                break
            names.append(part.value)
        if not names:
            second = f".{getattr(parts[1], 'value', '?')}" if len(parts) > 1 else ""
            self.prior_dynamic.append(PRIOR_ROOT + second)
            return True
        self.prior_paths.append(tuple(names))
        if not self._optional:
            self.prior_required.append(tuple(names))
        return True

    def _visit_inputs_path(self, node: Any) -> bool:
        """``inputs.<name>...``: a plan file's input; the root stays readable as ``inputs``."""
        parts = list(getattr(node, "steps", None) or [])
        if parts and self._is_root(parts[0]):
            parts = parts[1:]
        if len(parts) < 2 or not _is_name(parts[0], INPUTS_ROOT):
            return False
        self.bare_names.append(INPUTS_ROOT)  # the root itself, as a bare `inputs` reads it
        self._visit_relative(getattr(parts[0], "stages", None))
        self._visit_relative(parts[1:])
        second = parts[1]
        if getattr(second, "type", None) == "name" and isinstance(second.value, str):
            self.input_reads.append(second.value)
        return True

    @staticmethod
    def _tests_existence(node: Any) -> bool:
        """Conditionals (``?:``, ``??``, ``a ? b : c``) and ``$exists`` may read absent fields."""
        kind = getattr(node, "type", None)
        if kind == "condition":
            return True
        procedure = getattr(node, "procedure", None)
        return kind == "function" and getattr(procedure, "value", None) == "exists"

    def _is_root(self, node: Any) -> bool:
        """``$$`` anywhere, or ``$`` where the context is still the root."""
        if getattr(node, "type", None) != "variable":
            return False
        value = getattr(node, "value", None)
        return value == "$" or (value == "" and not self._relative)

    def _visit_lookup(self, node: Any) -> bool:
        procedure = getattr(node, "procedure", None)
        args = list(getattr(node, "arguments", None) or [])
        if getattr(procedure, "value", None) != "lookup" or len(args) != 2:
            return False
        target = args[0]
        target_parts = list(getattr(target, "steps", None) or [])
        if target_parts and self._is_root(target_parts[0]):
            target_parts = target_parts[1:]
        if not (len(target_parts) == 1 and _is_name(target_parts[0], "steps")):
            return False
        self.functions.add("lookup")
        key = args[1]
        if getattr(key, "type", None) == "string" and isinstance(key.value, str):
            self.refs.add(key.value)
            self.paths.append((key.value,))
        else:
            self.dynamic.append("$lookup(steps, <computed>)")
            self.visit(key)
        return True


_PASSING_STAGES = frozenset({"filter", "index"})
"""Stages after which a path's next name still reads a field of the items: a filter keeps
some of them, ``#$i`` binds their positions."""


def _shape_path(parts: list[Any]) -> tuple[str, ...]:
    """The names after ``steps`` that each read a field of the value before: the first is
    the step id. Stops at anything else, and after a name whose next step reads from
    elsewhere (a focus ``@$x`` or an ancestor ``%`` keeps the previous context)."""
    names: list[str] = []
    for part in parts:
        if getattr(part, "type", None) != "name" or not isinstance(part.value, str):
            break
        names.append(part.value)
        stages = getattr(part, "stages", None) or []
        if (
            getattr(part, "focus", None) is not None
            or getattr(part, "ancestor", None) is not None
            or getattr(part, "group", None) is not None
            or any(getattr(stage, "type", None) not in _PASSING_STAGES for stage in stages)
        ):
            break
    return tuple(names)


def _is_name(node: Any, value: str) -> bool:
    return getattr(node, "type", None) == "name" and getattr(node, "value", None) == value


def _jsonata_message(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    position = getattr(exc, "location", None)
    if isinstance(position, int) and position >= 0:
        return f"{text} (at character {position})"
    return text
