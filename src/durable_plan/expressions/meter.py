"""The deterministic budget every evaluation runs under, and the natives it guards.

Expressions are untrusted, so evaluation is bounded without a clock: every evaluation
meters its steps and the sizes of the values it builds (``ExpressionLimits``), and the
few natives that can build a huge value in one call (``$pad``, ``$join``, ``$string``,
``$replace``) or take quadratic time (``$distinct``) are guarded or replaced. Counts,
never time, so a durable plan replays the same verdict on every worker.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jsonata
import re2
from jsonata.datetimeutils import DateTimeUtils
from jsonata.utils import Utils

from durable_plan.language.errors import StepError
from durable_plan.language.plan_limits import (
    MAX_INT_BITS,
    ExpressionLimits,
    LimitExceeded,
    plain_json,
)


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
