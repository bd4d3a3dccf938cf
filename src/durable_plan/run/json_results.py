"""What a tool's result must be to enter a plan: plain, bounded JSON, and the one wording
of the failure when it is not.

Apart from the engine because the durable activity wrapper applies the same check to a
result before it lands in history, and needs it without a plan in flight.
"""

from __future__ import annotations

from typing import Any

from durable_plan.language.errors import StepError
from durable_plan.language.plan_limits import plain_json

__all__ = ["as_json", "non_json_message"]


def non_json_message(tool: str, exc: StepError) -> str:
    """The one wording of a non-JSON result, for both runners."""
    return (
        f"tool '{tool}' returned a non-JSON value: {exc}; return dicts, lists, strings, "
        "numbers, booleans or null"
    )


def as_json(value: Any) -> Any:
    """Return ``value`` as plain JSON (tuples become lists) or raise ``StepError``.

    The same bounds as every other value in a plan (``limits.plain_json``):
    nesting, integer width, finite numbers, string keys.
    """
    return plain_json(value)
