"""What the plan tool carries into a conversation's next run when it continues as new.

A long conversation's history grows with every model round and every plan; past Temporal's
limits (51,200 events, 50 MB) the server terminates it. A conversation workflow therefore
continues as new, and its next run starts with empty workflow state: without this, the plan
tool would forget which steps earlier plans ran (a repair would run them again, a
``prior.<step>`` read would be refused) and number plans from 1 again; a person's pending
answer to an interrupt would be lost (and with it the rule that no plan runs meanwhile); and
the conversation's stream would start its offsets at 0 again, under a follower that had
read past them (``conversation_events``). The agent's messages are the workflow's own to
carry (``TemporalAgent(messages=...)``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from temporalio.contrib.workflow_streams import WorkflowStream, WorkflowStreamState

from durable_plan.run.reuse import Remembered

__all__ = [
    "MAX_CARRIED_MESSAGE_BYTES",
    "PlanToolState",
    "continue_stream",
    "recent_turns",
    "stream_state",
]

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
    stream: WorkflowStreamState | None = None
    """The conversation's stream (``plan_stream``) without its log: where the next run's
    offsets start, and its publishers' dedup state. Give it to ``WorkflowStream(prior_state=)``
    in the next run's ``__init__``."""
    interrupt: dict[str, Any] | None = None
    """The agent's interrupt state (Strands' own form) when a person's answer is pending: the
    next run's agent resumes from it, and no plan runs until the person has answered."""


def stream_state(stream: WorkflowStream) -> WorkflowStreamState:
    """What the next run's stream starts from: this run's end, without its log.

    The log stays with this run (a follower reads what it has not read yet there, by query,
    after the run has closed); carrying it would make every continue-as-new argument larger
    than the one before, past the 2 MB a payload may have. Workflow code (it reads the
    workflow's clock, to drop idle publishers' dedup state)."""
    state = stream.get_state()
    return WorkflowStreamState(
        log=[], base_offset=state.base_offset + len(state.log), publishers=state.publishers
    )


def continue_stream(stream: WorkflowStream, carried: WorkflowStreamState) -> None:
    """Make sure this run's stream goes on where the previous run's ended.

    The way to do it is ``WorkflowStream(prior_state=state.stream)`` in the workflow's
    ``__init__``. A stream made without it (as conversations were written before the state
    was carried) and not yet published to is moved to the carried start here, as
    ``prior_state`` would have done for a state without a log: otherwise its offsets would
    start at 0 again and a follower, already past them, would miss that many items. A stream
    that has moved on already cannot be mended: that is a mistake in the workflow's code."""
    base = getattr(stream, "_base_offset", None)
    log = getattr(stream, "_log", None)
    if not isinstance(base, int) or not isinstance(log, list) or base == carried.base_offset:
        return  # carried as documented (or the module's internals are not the ones we know)
    if base == 0 and not log:
        stream._base_offset = carried.base_offset
        for publisher, seen in carried.publishers.items():
            stream._publishers.setdefault(publisher, seen)
        return
    raise ValueError(
        f"this run's plan_stream starts at offset {base} with {len(log)} items, but the "
        f"previous run's ended at {carried.base_offset}: make it with "
        "WorkflowStream(prior_state=state.stream) in the workflow's __init__, and call "
        "resume() before anything is published"
    )


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
