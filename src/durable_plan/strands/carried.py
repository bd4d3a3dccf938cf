"""What the plan tool carries into a conversation's next run when it continues as new.

A long conversation's history grows with every model round and every plan; past Temporal's
limits (51,200 events, 50 MB) the server terminates it. A conversation workflow therefore
continues as new, and its next run starts with empty workflow state: without this, the plan
tool would forget which steps earlier plans ran (a repair would run them again, a
``prior.<step>`` read would be refused) and number plans from 1 again. The agent's messages
are the workflow's own to carry (``TemporalAgent(messages=...)``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from durable_plan.run.reuse import Remembered

__all__ = ["PlanToolState"]


@dataclass(frozen=True)
class PlanToolState:
    """``WorkflowPlanPlugin.carry_over()`` gives it; ``WorkflowPlanPlugin.resume(state)`` in
    the next run takes it back. Plain data, so any Temporal data converter carries it in the
    ``continue_as_new`` argument."""

    plans_run: int = 0
    """Plans the conversation has run so far, over every earlier run."""
    remembered: list[Remembered] = field(default_factory=list)
    """The memory of steps that ended ok, least recent first (the plugin's bounds apply)."""
    forgotten: int = 0
    """Entries dropped so far to stay within the memory's bounds."""
