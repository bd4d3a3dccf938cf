"""What a plan in flight reports beside its result: progress lines, step counts by
status, and an agent step's model tokens.

Apart from ``engine.py`` (which decides what runs next) because these are read-outs of
the run's state for live displays, progress queries and the ``plan_finished`` event;
pure values, no I/O and no clock, so workflow code can build them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from durable_plan.language.agent_step import AGENT_TOOL
from durable_plan.language.plan import StepOutcome

Phase = Literal["pending", "running", "ok", "failed", "skipped", "not_taken"]


@dataclass(frozen=True)
class Progress:
    """One line of a live ledger, including steps not yet ended."""

    id: str
    tool: str
    phase: Phase
    level: int
    duration_ms: float
    attempts: int
    error: str | None


def agent_usage(tool: str, value: Any) -> dict[str, int] | None:
    """An agent step's model tokens, from its result (``agent_loop.run_agent_step``)."""
    if tool != AGENT_TOOL or not isinstance(value, dict):
        return None
    usage = value.get("usage")
    if not isinstance(usage, dict):
        return None
    return {k: int(v) for k, v in usage.items() if isinstance(v, int) and not isinstance(v, bool)}


def _counts(ledger: list[StepOutcome]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for outcome in ledger:
        counts[outcome.status] = counts.get(outcome.status, 0) + 1
    return counts
