"""JSONata expressions: static analysis and safe, deterministic evaluation.

Dependencies are read from the parsed expression, not from its text, so
``$lookup(steps, 'a')`` and ``steps.`a``` create an edge while the string literal
``'see steps.manual'`` does not. Evaluation never returns a silent ``None``: a
path that matches nothing raises with the keys that do exist.

jsonata-python is not deterministic on its own (``$now``/``$millis`` read the wall
clock, ``$random``/``$shuffle`` the global RNG, ``$eval`` runs further code), so
those functions are replaced on every instance: ``$eval`` always refuses, and in
durable mode the clock and random functions refuse too (the checker rejects them
first, this is the second line of defence). Workflow modules import this one
through ``workflow.unsafe.imports_passed_through()`` (jsonata trips the sandbox).

Expressions are untrusted, so evaluation is bounded without a clock: regexes run
on RE2 (linear time; patterns RE2 cannot run, such as backreferences, are syntax
errors at check time), every evaluation meters its steps and the sizes of the
values it builds (``ExpressionLimits``), and the few natives that can build a
huge value in one call (``$pad``, ``$join``, ``$string``, ``$replace``) or take
quadratic time (``$distinct``) are guarded or replaced.
"""

from __future__ import annotations

import itertools
import json
import math
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import jsonata
import re2
from jsonata.datetimeutils import DateTimeUtils
from jsonata.jexception import JException
from jsonata.regex_engine import RegexFlags
from jsonata.utils import Utils

from durable_plan.errors import StepError
from durable_plan.limits import (
    DEFAULT_LIMITS,
    MAX_INT_BITS,
    ExpressionLimits,
    LimitExceeded,
    plain_json,
)

ALWAYS_FORBIDDEN = frozenset({"eval"})
MAX_REGEX_CHARS = 1_000
MAX_REGEX_GROUPS = 32
LOOP_VARIABLES = ("item", "index", "accumulator")
"""Inside a map or reduce body these are fields of the scope (``item.name``) and
variables too (``$index``, for use inside a filter: ``steps.a.results[$index]``)."""
NONDETERMINISTIC = frozenset({"now", "millis", "random", "shuffle"})
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
    prior_paths: tuple[tuple[str, ...], ...] = ()
    """Paths read under ``prior`` (each starts with a step id), like ``paths``."""
    prior_required: tuple[tuple[str, ...], ...] = ()
    prior_dynamic: tuple[str, ...] = ()
    """Reads of ``prior`` that name no step (``prior``, ``prior.*``): refused by the checks."""

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
                        self.visit(child)
            finally:
                self._optional -= 1
            return
        if kind == "path":
            if not self._visit_steps_path(node) and not self._visit_prior_path(node):
                self._visit_path(node)
            return
        for name, child in vars(node).items():
            if type(child) in _LEAVES or name in _SKIP_ATTRS:
                continue  # most of a node's ~50 attributes: None, flags, positions
            if name in _RELATIVE_ATTRS:
                self._visit_relative(child)
            else:
                self.visit(child)

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
        if parts and self._is_root(parts[0]):
            parts = parts[1:]
        if not parts or not _is_name(parts[0], "steps"):
            return False
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


def _is_name(node: Any, value: str) -> bool:
    return getattr(node, "type", None) == "name" and getattr(node, "value", None) == value


def _jsonata_message(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    position = getattr(exc, "location", None)
    if isinstance(position, int) and position >= 0:
        return f"{text} (at character {position})"
    return text


class _RegexRefused(ValueError):
    """A regex literal RE2 cannot run; raised while parsing, reported as a syntax error."""


def _re2_engine(pattern: str, flags: RegexFlags) -> Any:
    """JSONata regex literals on RE2: linear time, so no pattern can freeze a worker.

    Python's ``re`` backtracks while holding the GIL: one catastrophic pattern
    stops every thread of a worker, the workflow deadlock detector included.
    """
    prefix = ("i" if flags.case_insensitive else "") + ("m" if flags.multiline else "")
    options = re2.Options()
    options.log_errors = False  # the error is reported to the model, not to stderr
    if len(pattern) > MAX_REGEX_CHARS:
        raise _RegexRefused(
            f"regex /{pattern[:40]}.../ is {len(pattern)} characters; the limit is "
            f"{MAX_REGEX_CHARS}"
        )
    try:
        compiled = re2.compile(f"(?{prefix}){pattern}" if prefix else pattern, options)
    except re2.error as exc:
        reason = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else exc
        raise _RegexRefused(
            f"regex /{pattern}/ cannot be used ({reason}); plans run regexes on RE2, which has "
            "no backreferences or lookaround"
        ) from None
    if compiled.groups > MAX_REGEX_GROUPS:
        # RE2 stays linear, but each capture group multiplies the work per character.
        raise _RegexRefused(
            f"regex /{pattern[:40]}/ has {compiled.groups} capture groups; the limit is "
            f"{MAX_REGEX_GROUPS} (use (?:...) for groups you do not need)"
        )
    return compiled


def _refuse(name: str, reason: str) -> Any:
    def refuse(*_args: Any) -> Any:
        raise StepError(f"${name}() is not allowed in plans: {reason}")

    return refuse


class _Meter:
    """One evaluation's budget: steps taken and the sizes of the values built.

    Called by jsonata on entry to and exit from every node it evaluates. The
    count depends only on the expression and its input, so it is the same on
    every worker and every replay. Once exceeded it stays exceeded: a native
    that swallows the exception cannot let the evaluation run on.
    """

    def __init__(self, limits: ExpressionLimits) -> None:
        self.limits = limits
        self.reset(limits.max_steps)
        # Built once per plan (a Budget keeps its meter), not once per evaluation.
        self.bindings = self._guards()

    def reset(self, steps: int) -> None:
        """Start one evaluation allowed ``steps`` steps."""
        self.allowed = steps
        self.steps = 0
        self.exceeded: LimitExceeded | None = None

    @property
    def out_of_steps(self) -> str:
        """Which limit ran out: the plan's (what it had left) or the expression's own."""
        if self.allowed < self.limits.max_steps:
            return (
                f"the plan's expressions together took more than the plan's limit of "
                f"{self.limits.max_plan_steps} evaluation steps"
            )
        return f"the expression took more than the limit of {self.allowed} evaluation steps"

    def fail(self, message: str) -> None:
        if self.exceeded is None:
            self.exceeded = LimitExceeded(message)
        raise self.exceeded

    def charge(self, amount: int) -> None:
        self.steps += amount
        if self.steps > self.allowed or self.exceeded is not None:
            self.fail(self.out_of_steps)

    def entry(self, _expr: Any, _input: Any, _env: Any) -> None:
        self.charge(1)

    def exit(self, _expr: Any, _input: Any, _env: Any, result: Any) -> None:
        self.measure(result)

    def measure(self, value: Any) -> None:
        if isinstance(value, str | list):
            string = isinstance(value, str)
            limit = self.limits.max_string if string else self.limits.max_array
            if len(value) > limit:
                kind, unit = ("a string", "characters") if string else ("an array", "items")
                self.fail(
                    f"the expression built {kind} of {len(value)} {unit}, over the limit of {limit}"
                )
            # Building a value costs in proportion to its size; array items are often
            # built natively one by one ($zip, $map results), characters in bulk.
            self.charge(len(value) // (64 if string else 2))
        elif isinstance(value, int) and not isinstance(value, bool):
            if value.bit_length() > MAX_INT_BITS:
                self.fail(f"the expression computed an integer over the {MAX_INT_BITS}-bit limit")
        elif isinstance(value, float) and not math.isfinite(value):
            self.fail(f"the expression computed {value}, which is not a JSON number")

    def _guards(self) -> dict[str, Any]:
        """Natives that could build a huge value in one call, bounded by this meter."""
        natives = jsonata.Jsonata.static_frame
        return {
            "__evaluate_entry": self.entry,
            "__evaluate_exit": self.exit,
            "pad": _Guarded(natives.lookup("pad"), _then_proceed(self._guard_pad)),
            "join": _Guarded(natives.lookup("join"), _then_proceed(self._guard_join)),
            "string": _Guarded(natives.lookup("string"), _then_proceed(self._guard_string)),
            "replace": _Guarded(natives.lookup("replace"), _then_proceed(self._guard_replace)),
            "match": _Guarded(
                natives.lookup("match"), _then_proceed(lambda a: self._guard_matches(a, "$match"))
            ),
            "split": _Guarded(
                natives.lookup("split"), _then_proceed(lambda a: self._guard_matches(a, "$split"))
            ),
            "distinct": _Guarded(
                natives.lookup("distinct"), lambda a: _distinct(a[0] if a else None)
            ),
            "toMillis": _Guarded(natives.lookup("toMillis"), _guard_date_picture),
            "formatNumber": _Guarded(
                natives.lookup("formatNumber"), _then_proceed(_guard_number_picture)
            ),
        }

    def _guard_pad(self, args: Sequence[Any]) -> None:
        width = args[1] if len(args) > 1 else None
        if isinstance(width, int | float) and abs(width) > self.limits.max_string:
            self.fail(f"$pad to {width:g} characters is over the limit of {self.limits.max_string}")

    def _guard_join(self, args: Sequence[Any]) -> None:
        items = args[0] if args else None
        if not isinstance(items, list):
            return
        separator = args[1] if len(args) > 1 and isinstance(args[1], str) else ""
        total = len(separator) * len(items)
        for item in items:
            total += len(item) if isinstance(item, str) else 0
            if total > self.limits.max_string:
                self.fail(f"$join would build over the limit of {self.limits.max_string} chars")
        self.charge(total // 64)

    def _guard_string(self, args: Sequence[Any]) -> None:
        if args and isinstance(args[0], list | dict):
            try:
                plain_json(args[0], max_bytes=self.limits.max_string, adapt=_from_jsonata)
            except LimitExceeded:
                self.fail(f"$string would build over the limit of {self.limits.max_string} chars")
            except StepError:
                return  # not JSON (a function inside): jsonata reports it its own way

    def _guard_replace(self, args: Sequence[Any]) -> None:
        count = self._guard_matches(args, "$replace")
        if len(args) < 3 or not isinstance(args[2], str) or not isinstance(args[0], str):
            return
        if len(args[0]) + count * len(args[2]) > self.limits.max_string:
            self.fail(f"$replace would build over the limit of {self.limits.max_string} characters")

    def _guard_matches(self, args: Sequence[Any], name: str) -> int:
        """Regex functions do Python work per match: count them (at most the array
        limit, on RE2 or ``str.count``), refuse too many, and charge the rest."""
        if len(args) < 2 or not isinstance(args[0], str):
            return 0
        text, pattern = args[0], args[1]
        limit = self.limits.max_array
        if isinstance(pattern, str):
            count = text.count(pattern) if pattern else len(text) + 1
        elif hasattr(pattern, "finditer"):
            count = sum(1 for _ in itertools.islice(pattern.finditer(text), limit + 1))
        else:
            return 0
        if count > limit:
            self.fail(f"{name} would find over the limit of {limit} matches")
        groups = getattr(pattern, "groups", 0)
        self.charge(count * (1 + (groups if isinstance(groups, int) else 0)))
        return count


_PROCEED = object()
"""What a guard returns to let the native run (anything else is the call's result)."""


def _then_proceed(check: Callable[[Sequence[Any]], Any]) -> Callable[[Sequence[Any]], Any]:
    """A guard from a check that only refuses (by raising)."""

    def guard(args: Sequence[Any]) -> Any:
        check(args)
        return _PROCEED

    return guard


_SINGLE_CHARACTER_OPTIONS = (
    "decimal-separator",
    "grouping-separator",
    "exponent-separator",
    "percent",
    "per-mille",
    "zero-digit",
    "digit",
    "pattern-separator",
    "minus-sign",
)
MAX_PICTURE_CHARS = 100


def _guard_number_picture(args: Sequence[Any]) -> None:
    """``$formatNumber``'s options become regex text in jsonata-python: one character each.

    XPath defines them as single characters; a longer one (``"(a+)+b"``) would be
    a regex of the plan's choosing run by Python's backtracking engine.
    """
    picture = args[1] if len(args) > 1 else None
    if isinstance(picture, str) and len(picture) > MAX_PICTURE_CHARS:
        raise LimitExceeded(f"a $formatNumber picture is limited to {MAX_PICTURE_CHARS} characters")
    options = args[2] if len(args) > 2 else None
    if isinstance(options, Mapping):
        for name in _SINGLE_CHARACTER_OPTIONS:
            value = options.get(name)
            if value is not None and not (isinstance(value, str) and len(value) == 1):
                raise StepError(f"$formatNumber option '{name}' must be a single character")


def _guard_date_picture(args: Sequence[Any]) -> Any:
    """``$toMillis(text, picture)`` matches with a regex built from the picture, on
    Python's backtracking engine: RE2 decides first, and a text that does not match
    (where backtracking explodes) never reaches it."""
    if len(args) < 2 or not isinstance(args[0], str) or not isinstance(args[1], str):
        return _PROCEED
    text, picture = args[0], args[1]
    if len(picture) > MAX_PICTURE_CHARS or len(text) > MAX_PICTURE_CHARS:
        raise LimitExceeded(f"$toMillis text and picture are limited to {MAX_PICTURE_CHARS} chars")
    try:
        spec = DateTimeUtils._generate_regex(DateTimeUtils._analyse_datetime_picture(picture))
        regex = "^" + "".join(f"({part.regex})" for part in spec.parts) + "$"
        options = re2.Options()
        options.log_errors = False
        matched = re2.compile("(?i)" + regex, options).search(text) is not None
    except Exception:
        return _PROCEED  # jsonata reports a bad picture its own way
    return _PROCEED if matched else None


class _Guarded(jsonata.Jsonata.JFunction):  # type: ignore[misc]
    """A native with a check in front, same name and signature.

    The guard raises to refuse the call, returns ``_PROCEED`` to let the native
    run, or returns the call's result itself (a linear ``$distinct``, a date
    that RE2 already found does not match).
    """

    def __init__(self, native: Any, guard: Callable[[Sequence[Any]], Any]) -> None:
        self._native = native
        self._guard = guard
        self.function = native.function
        self.signature = native.signature
        self.function_name = native.function_name

    def call(self, input: Any, args: Any) -> Any:
        values = list(args) if isinstance(args, list) else []
        verdict = self._guard(values)
        if verdict is not _PROCEED:
            return verdict
        return self._native.call(input, args)

    def get_number_of_args(self) -> int:
        return int(self._native.get_number_of_args())


def _distinct(items: Any) -> Any:
    """``$distinct`` in linear time (jsonata-python's is quadratic), same results."""
    if not isinstance(items, list) or len(items) <= 1:
        return items
    out = Utils.create_sequence() if isinstance(items, Utils.JList) else []
    seen: set[Any] = set()
    for item in items:
        # Scalars compare as jsonata's own `in` does (==); containers by canonical text.
        key: Any = item
        if isinstance(item, dict | list):
            key = ("json", json.dumps(item, sort_keys=True, default=repr))
        try:
            if key in seen:
                continue
            seen.add(key)
        except TypeError:
            if item in out:
                continue
        out.append(item)
    return out


def _instance(expr: Expression, *, deterministic: bool) -> Any:
    """The expression's parsed instance, made current and stripped of unsafe functions.

    The instance parsed at check time is reused (parsing costs more than
    evaluating). jsonata applies lambdas through a thread-local "current
    instance" that each construction overwrites, so it is pointed back at this
    one before every evaluation; the environment is rebound per evaluation, so
    the result depends only on the expression and the scope.
    """
    if not expr._cache:
        expr._cache.append(jsonata.Jsonata(expr.source, regex_engine=_re2_engine))
    compiled = expr._cache[0]
    jsonata.Jsonata.CURRENT.jsonata = compiled
    if expr._cache[1:] == [deterministic]:
        return compiled  # already set up for this mode (the settings below persist)
    compiled.set_output_convert_nulls(False)
    # Scopes hold JSON only (tool results pass as_json, workflow results json.loads),
    # and jsonata's own input walk is recursive and costs a pass over every result.
    compiled.set_validate_input(False)
    compiled.register_lambda("eval", _refuse("eval", "plans must be readable before they run"))
    for name in sorted(NONDETERMINISTIC):
        if deterministic:
            reason = "durable plans must replay identically; pass values in args"
            compiled.register_lambda(name, _refuse(name, reason))
        else:
            compiled.register_function(name, jsonata.Jsonata.static_frame.lookup(name))
    expr._cache[1:] = [deterministic]
    return compiled


class Budget:
    """What is left of a plan's evaluation steps, shared by all its expressions.

    Deterministic like the per-evaluation meter: the plan evaluates its
    expressions in the same order on every worker, so it runs out at the same
    expression everywhere.
    """

    def __init__(self, limits: ExpressionLimits = DEFAULT_LIMITS) -> None:
        self.limits = limits
        self.remaining = limits.max_plan_steps
        self._meter: _Meter | None = None

    def meter(self, allowed: int) -> _Meter:
        """The plan's meter, reset for one evaluation of at most ``allowed`` steps.

        One per plan: evaluations of a plan never overlap (each runs to the end
        without yielding), and its guarded natives are built once, not per binding.
        """
        if self._meter is None:
            self._meter = _Meter(self.limits)
        self._meter.reset(allowed)
        return self._meter

    def allowance(self) -> int:
        if self.remaining <= 0:
            raise LimitExceeded(
                f"the plan's expressions used up the plan's limit of "
                f"{self.limits.max_plan_steps} evaluation steps"
            )
        return min(self.limits.max_steps, self.remaining)

    def spend(self, steps: int) -> None:
        self.remaining -= steps


def evaluate(
    expr: Expression,
    scope: Mapping[str, Any],
    *,
    deterministic: bool,
    budget: Budget | None = None,
) -> tuple[bool, Any]:
    """Evaluate over ``scope``; returns (matched, value) with JSON values only.

    ``deterministic=True`` (workflow code) refuses the clock and random
    functions, so replay sees identical results. ``budget`` is the plan's
    remaining evaluation steps; without one, a single evaluation's limits apply.
    Any bound exceeded raises ``LimitExceeded`` (a ``StepError``) naming it.
    """
    budget = budget if budget is not None else Budget()
    allowed = budget.allowance()
    if expr.simple_path is not None:
        read = _read_simple(expr.simple_path, scope, budget.limits)
        if read is not None and read[1] <= allowed:
            budget.spend(read[1])
            return True, to_json(read[0], max_bytes=budget.limits.max_value_bytes)
    meter = budget.meter(allowed)
    compiled = _instance(expr, deterministic=deterministic)
    bindings = meter.bindings
    if any(name in scope for name in LOOP_VARIABLES):
        bindings = dict(bindings)  # the meter's own stay as they are
        for name in LOOP_VARIABLES:  # a map or reduce body: $item, $index, $accumulator
            if name in scope:
                bindings[name] = scope[name]
    try:
        raw = compiled.evaluate(scope, bindings)
    except StepError:
        raise
    except JException as exc:
        raise StepError(_jsonata_message(exc)) from None
    except RecursionError:
        raise StepError("expression recursed too deeply") from None
    except Exception as exc:
        inner = exc.__cause__ if isinstance(exc.__cause__, StepError) else None
        if inner is not None:
            raise inner from None
        raise StepError(f"{type(exc).__name__}: {exc}") from None
    finally:
        budget.spend(meter.steps)
    if meter.exceeded is not None:
        raise meter.exceeded
    if raw is None:
        return False, None
    return True, to_json(raw, max_bytes=budget.limits.max_value_bytes)


def _read_simple(
    path: tuple[str, ...], scope: Mapping[str, Any], limits: ExpressionLimits
) -> tuple[Any, int] | None:
    """``steps.a.b`` read directly: (value, the evaluation steps JSONata's meter counts).

    Only where the result is certain to be JSONata's: every step of the way a plain
    dict holding the key, and a value the meter lets through. Anything else (a list
    on the way, a missing key, null, a value over a limit) returns None and is
    evaluated by JSONata, errors and all. The step count (the path node, one per
    name, and what ``_Meter.measure`` charges: strings once, arrays twice, as
    JSONata's path and its last step both measure them) is pinned against the
    metered evaluation by ``tests/test_expressions.py``.
    """
    current: Any = scope.get("steps")
    for name in path:
        if type(current) is not dict:
            return None
        current = current.get(name)
    steps = 2 + len(path)
    kind = type(current)
    if kind is dict or kind is bool:
        return current, steps
    if kind is str:
        if len(current) > limits.max_string:
            return None
        return current, steps + len(current) // 64
    if kind is list:
        if len(current) > limits.max_array:
            return None
        return current, steps + 2 * (len(current) // 2)
    if kind is int:
        return (current, steps) if current.bit_length() <= MAX_INT_BITS else None
    if kind is float:
        return (current, steps) if math.isfinite(current) else None
    return None  # null, a missing key (None too), or not JSON


def to_json(value: Any, *, max_bytes: int | None = None) -> Any:
    """Convert JSONata's sequences and null sentinel back to plain, bounded JSON values."""
    return plain_json(value, max_bytes=max_bytes, adapt=_from_jsonata)


def _from_jsonata(value: Any) -> Any:
    kind = type(value)
    if kind is dict or kind is str or kind is int or kind is list or kind is bool:
        return value  # what the checks below return for them, sooner (called per node)
    if isinstance(value, Utils.NullValue):
        return None
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    if isinstance(value, Mapping | list | str | int | float | bool) or value is None:
        return value
    if isinstance(value, Sequence):
        return list(value)
    if callable(value) or type(value).__module__.startswith("jsonata"):
        # A lambda (a parser Symbol) or a native function such as $string.
        raise StepError("expression produced a function, not a JSON value")
    return value


def explain_no_match(expr: Expression, scope: Mapping[str, Any]) -> str:
    """Say where the expression's first broken path stops, listing the keys that exist."""
    steps = scope.get("steps", {})
    for path in expr.paths:
        hint = _walk(steps, path)
        if hint:
            return hint
    for path in expr.prior_paths:
        hint = _walk(scope.get(PRIOR_ROOT, {}), path, PRIOR_ROOT)
        if hint:
            return hint
    present = ", ".join(sorted(steps)) or "none"
    return f"steps that have results: {present}"


def first_missing(expr: Expression, scope: Mapping[str, Any]) -> str | None:
    """Where a required path into a step that has a result stops matching, or None.

    JSONata forgives a misspelled field in many places: ``steps.t.dsk = "x"`` is
    false, ``[steps.a.damage, steps.b.dmg]`` silently drops the second item. A
    plan must not guess, so a read of a field the step's result does not have
    fails the step. Reads of steps that have no result (not taken, seen by a
    ``join: any`` step) and reads inside conditionals or ``$exists`` are allowed.
    """
    steps = scope.get("steps", {})
    for path in expr.required:
        if path and path[0] in steps:
            hint = _walk(steps, path)
            if hint:
                return hint
    if expr.prior_required:
        prior = scope.get(PRIOR_ROOT, {})
        for path in expr.prior_required:
            if path and path[0] in prior:
                hint = _walk(prior, path, PRIOR_ROOT)
                if hint:
                    return hint
    return None


def _walk(steps: Mapping[str, Any], path: tuple[str, ...], root: str = "steps") -> str | None:
    current: Any = steps
    walked = [root]
    for name in path:
        if isinstance(current, Mapping):
            if name not in current:
                keys = ", ".join(str(k) for k in current) or "no keys"
                return f"{'.'.join(walked)} has keys {keys}"
            current = current[name]
        elif isinstance(current, list):
            items = [item for item in current if isinstance(item, Mapping)]
            if not any(name in item for item in items):
                item_keys = sorted({str(k) for item in items for k in item})
                listed = ", ".join(item_keys) if item_keys else "no keys"
                return f"{'.'.join(walked)} is a list whose items have keys {listed}"
            return None
        else:
            kind = "null" if current is None else type(current).__name__
            article = "an" if kind[0] in "aeiou" else "a"
            return f"{'.'.join(walked)} is {article} {kind}, not an object"
        walked.append(name)
    return None


def iter_sources(step_bind: Mapping[str, str], when: str | None) -> Iterator[tuple[str, str]]:
    """(field, source) pairs of a step's expressions, for checks and error messages."""
    for name, source in step_bind.items():
        yield f"bind.{name}", source
    if when is not None:
        yield "when", when
