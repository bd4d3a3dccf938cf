"""What the plan tool carries into a conversation's next run when it continues as new.

A long conversation's history grows with every model round and every plan; past Temporal's
limits (51,200 events, 50 MB) the server terminates it. A conversation workflow therefore
continues as new, and its next run starts with empty workflow state: without this, the plan
tool would forget which steps earlier plans ran (a repair would run them again, a
``prior.<step>`` read would be refused) and number plans from 1 again. The agent's messages
are the workflow's own to carry (``TemporalAgent(messages=...)``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from durable_plan.run.reuse import Remembered

__all__ = ["MAX_CARRIED_MESSAGE_BYTES", "PlanToolState", "recent_turns"]

MAX_CARRIED_MESSAGE_BYTES = 1024 * 1024
"""What a continue-as-new carries of the agent's messages, at most. Temporal refuses a
payload over 2 MB (the blob size limit), and the continue-as-new argument also carries the
plan tool's memory (256 KiB by default): a conversation whose carried input were refused would
fail its workflow task on every retry instead of continuing."""


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


def recent_turns(
    messages: Sequence[Mapping[str, Any]], max_bytes: int = MAX_CARRIED_MESSAGE_BYTES
) -> list[dict[str, Any]]:
    """The newest whole turns of ``messages`` that fit in ``max_bytes`` of JSON.

    A turn starts at a user message that is not a tool result and runs to the next one, so a
    tool call is never carried without its result (a model refuses such a conversation).
    Older turns go first; when even the newest turn does not fit, nothing is carried (the
    conversation loses its context, not its life)."""
    starts = [i for i, message in enumerate(messages) if _starts_a_turn(message)]
    if not starts or starts[0] != 0:
        starts.insert(0, 0)
    kept: list[dict[str, Any]] = []
    size = 0
    for begin, end in reversed(list(zip(starts, [*starts[1:], len(messages)], strict=True))):
        turn = [dict(message) for message in messages[begin:end]]
        turn_size = len(json.dumps(turn, separators=(",", ":"), default=str))
        if size + turn_size > max_bytes:
            break
        kept[:0] = turn
        size += turn_size
    return kept


def _starts_a_turn(message: Mapping[str, Any]) -> bool:
    content = message.get("content") or []
    return message.get("role") == "user" and not any(
        isinstance(block, Mapping) and "toolResult" in block for block in content
    )
