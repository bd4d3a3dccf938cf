"""The bounds a plan lives within, and the one walker that enforces them on values.

A plan is written by a model, so it is untrusted input: every value it carries
or computes is bounded here, deterministically (sizes and counts, never a wall
clock, so workflow code replays identically). Each bound is a number a person
can read in an error message ("nested more than 100 levels", "integer wider
than 64 bits"), and every limit the Temporal server enforces (payload and gRPC
message sizes, workflow id length) is enforced earlier by us, with the step and
the field named, instead of by the server with a workflow that never ends.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from durable_plan.language.errors import StepError

MAX_JSON_DEPTH = 100
"""Nesting of any value: plan arguments, binding results and tool results."""

MAX_INT_BITS = 64
"""Integers wider than this are not portable JSON (and Python refuses to print
integers of over 4,300 digits): a tool should return such values as strings."""

MAX_PLAN_BYTES = 512 * 1024
"""Size of a submitted plan (its JSON text): checked before anything else, so the
check's own cost stays bounded by what the model may send."""

MAX_EXPRESSION_CHARS = 4_000
"""Length of one JSONata expression in ``bind`` or ``when``."""

MAX_PLAN_EXPRESSION_CHARS = 16_000
"""Length of all of a plan's expressions together: parsing costs up to about 13 ms
per 1,000 characters (deeply nested operators), and in a ``TemporalAgent`` the
plan is checked in workflow code, under Temporal's 2 s deadlock detector."""

MAX_ERROR_CHARS = 2_000
"""Length of one step's error text in the ledger; longer texts are cut in the middle."""


@dataclass(frozen=True)
class ExpressionLimits:
    """The deterministic budget of one plan's JSONata evaluations.

    ``max_steps`` counts evaluation steps (one per expression node evaluated, plus
    one per 64 items or characters of every value produced), so a runaway loop, a
    tail call that never ends, or a quadratic build-up of arrays all run out of
    the same budget, the same way on every worker and on every replay.
    ``max_plan_steps`` bounds the sum over the whole plan: in a workflow, all the
    bindings of the steps that become ready together are evaluated in one
    workflow task, which must end well within Temporal's 2 s deadlock timeout.
    """

    max_steps: int = 100_000
    max_plan_steps: int = 300_000
    max_string: int = 1_000_000
    max_array: int = 100_000
    max_value_bytes: int = 2 * 1024 * 1024


DEFAULT_LIMITS = ExpressionLimits()


class LimitExceeded(StepError):
    """A value or an evaluation went past one of the bounds above."""


class ValueTooLarge(LimitExceeded):
    """A value's JSON text would be over the byte limit it was walked with."""


def truncate_text(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    """Keep the head and the tail of a long message (where the cause usually is)."""
    if len(text) <= limit:
        return text
    keep = max(limit - 40, 20)
    head, tail = keep * 2 // 3, keep - keep * 2 // 3
    return f"{text[:head]} ... [{len(text) - head - tail} characters cut] ... {text[-tail:]}"


def brief(value: Any, limit: int = 60, *, quote: bool = True) -> str:
    """A short form of any value for a message: as JSON (``quote=False``: a text as it is),
    cut at ``limit`` characters ("..."). The one way a message quotes what a model sent;
    ``truncate_text`` keeps head and tail instead, for error texts."""
    if isinstance(value, str) and not quote:
        text = value
    else:
        try:
            text = json.dumps(value, default=str, ensure_ascii=False)
        except (ValueError, RecursionError):  # a huge integer, a deep value
            return "a value too large to show"
    return text if len(text) <= limit else text[: max(limit - 3, 0)] + "..."


def check_int(value: int) -> None:
    if value.bit_length() > MAX_INT_BITS:
        raise LimitExceeded(
            f"an integer of {value.bit_length()} bits is over the limit of {MAX_INT_BITS} bits "
            "for JSON numbers in plans; pass it as a string"
        )


def check_float(value: float) -> None:
    if not math.isfinite(value):
        raise LimitExceeded(f"{value} is not JSON: use a finite number")


def plain_json(
    value: Any,
    *,
    max_bytes: int | None = None,
    adapt: Callable[[Any], Any] | None = None,
) -> Any:
    """``value`` as plain JSON (dict / list / str / int / float / bool / None), or ``StepError``.

    One bounded walk: nesting deeper than ``MAX_JSON_DEPTH``, integers wider than
    ``MAX_INT_BITS``, NaN and infinities, non-string keys and non-JSON types are
    refused, and so is a value whose JSON text would exceed ``max_bytes``
    (counted as it is walked, so a list of a thousand references to one large
    string is refused after the limit is reached, not after a gigabyte is
    built). ``adapt`` maps foreign values first (JSONata's sequences and null).
    """
    walker = _Walker(max_bytes, adapt)
    return walker.walk(value, 0)


class _Walker:
    def __init__(self, max_bytes: int | None, adapt: Callable[[Any], Any] | None) -> None:
        self.max_bytes = max_bytes
        self.adapt = adapt
        self.size = 0

    def charge(self, amount: int) -> None:
        self.size += amount
        if self.max_bytes is not None and self.size > self.max_bytes:
            raise ValueTooLarge(
                f"the value is larger than the {self.max_bytes // 1024} KiB limit as JSON"
            )

    def walk(self, value: Any, depth: int) -> Any:
        if self.adapt is not None:
            value = self.adapt(value)
        # Exact JSON types first (nearly every value): no isinstance chain, no ABC check.
        kind = type(value)
        if kind is str:
            self.charge(len(value) + 2)
            return value
        if kind is int:
            check_int(value)
            self.charge(8)
            return value
        if kind is float:
            check_float(value)
            self.charge(8)
            return value
        if kind is dict:
            is_mapping = True
        elif kind is list:
            is_mapping = False
        elif value is None or isinstance(value, bool):
            self.charge(5)
            return value
        elif isinstance(value, str):
            self.charge(len(value) + 2)
            return value
        elif isinstance(value, int):
            check_int(value)
            self.charge(8)
            return value
        elif isinstance(value, float):
            check_float(value)
            self.charge(8)
            return value
        else:
            is_mapping = isinstance(value, Mapping)
            if not is_mapping and not isinstance(value, list | tuple):
                if depth >= MAX_JSON_DEPTH:
                    self._too_deep()
                name = type(value).__name__
                raise StepError(f"{'an' if name[0] in 'aeiou' else 'a'} {name} is not JSON")
        if depth >= MAX_JSON_DEPTH:
            self._too_deep()
        leaf = self._leaf_size if self.adapt is None else None
        if is_mapping:
            out: dict[str, Any] = {}
            for key, item in value.items():
                if not isinstance(key, str):
                    raise StepError(f"object key {key!r} is a {type(key).__name__}, not a string")
                self.charge(len(key) + 4)
                try:
                    if leaf is not None:
                        size = leaf(item)
                        if size:
                            self.charge(size)
                            out[key] = item
                            continue
                    out[key] = self.walk(item, depth + 1)
                except StepError as exc:
                    _prepend(exc, key)
                    raise
            return out
        self.charge(2)
        items = []
        for index, item in enumerate(value):
            try:
                if leaf is not None:
                    size = leaf(item)
                    if size:
                        self.charge(size)
                        items.append(item)
                        continue
                items.append(self.walk(item, depth + 1))
            except StepError as exc:
                _prepend(exc, index)
                raise
        return items

    @staticmethod
    def _leaf_size(value: Any) -> int:
        """What ``walk`` charges for a text, a number within bounds, a boolean or null
        that it would return as it is; 0 for anything it must look at itself (a container,
        an integer too wide, a float that is not finite, a subclass). Saves a call per leaf
        of the containers a plan and its results are made of (issue 31)."""
        kind = type(value)
        if kind is str:
            return len(value) + 2
        if kind is int:
            return 8 if value.bit_length() <= MAX_INT_BITS else 0
        if kind is float:
            return 8 if math.isfinite(value) else 0
        if value is None or kind is bool:
            return 5
        return 0

    @staticmethod
    def _too_deep() -> None:
        raise LimitExceeded(
            f"the value is nested more than {MAX_JSON_DEPTH} levels deep (the limit)"
        )


def _prepend(exc: StepError, part: str | int) -> None:
    """Record where in the value the problem is (built while the error unwinds)."""
    path: list[str | int] = getattr(exc, "path", [])
    exc.path = [part, *path]  # type: ignore[attr-defined]


def error_path(exc: StepError) -> str:
    """``steps.2.args.n`` style location of a ``plain_json`` error, or ''."""
    return ".".join(str(p) for p in getattr(exc, "path", []))
