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

from temporalio import workflow
from temporalio.contrib.workflow_streams import WorkflowStream, WorkflowStreamState
from temporalio.exceptions import ApplicationError

from durable_plan.run.references import returned_preview
from durable_plan.run.reuse import Remembered, StepMemory

__all__ = [
    "MAX_CARRIED_INTERRUPT_BYTES",
    "MAX_CARRIED_MESSAGE_BYTES",
    "PlanToolState",
    "carried_interrupt",
    "continue_stream",
    "recent_turns",
    "stream_state",
]

MAX_CARRIED_MESSAGE_BYTES = 1024 * 1024
"""What a continue-as-new carries of the agent's messages, at most. Temporal refuses a
payload over 2 MB (the blob size limit), and the continue-as-new argument also carries the
plan tool's memory (256 KiB by default): a conversation whose carried input were refused would
fail its workflow task on every retry instead of continuing."""
MAX_CARRIED_INTERRUPT_BYTES = 256 * 1024
"""What a continue-as-new carries of a pending interrupt (``PlanToolState.interrupt``), at
most: with the messages (``MAX_CARRIED_MESSAGE_BYTES``) and the plan tool's memory (256 KiB
by default) the argument stays near 1.5 MiB, under the 2 MB a payload may have. Strands'
interrupt state holds the results of the turn's tools that already ran, whole: those are
what ``carried_interrupt`` cuts."""
CUT_RESULT = (
    "not carried whole when the conversation continued as new (too large); the tool ran "
    "and is not run again"
)
"""What a completed tool's result says in place of its value after the cut."""
CUT_TEXT_CHARS = 2_000


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


def carried_interrupt(
    state: dict[str, Any], max_bytes: int = MAX_CARRIED_INTERRUPT_BYTES
) -> dict[str, Any]:
    """A pending interrupt (``_InterruptState.to_dict()``) that fits in ``max_bytes`` of JSON.

    What the next run's agent needs to go on is kept whole: the interrupts (their ids, what
    they asked), the assistant message whose tool calls are still to run, and which of its
    calls ran already, with their status, so none of them runs again. What makes the state
    large is the results of those calls, whole: when the state is over the bound each of them
    becomes a preview (``returned_preview``; text cut to ``CUT_TEXT_CHARS``), as a result the
    conversation has no room for does. A state still over the bound then (interrupt reasons
    or tool inputs of that size) is refused with ``ValueError``, saying which part."""
    if _json_bytes(state) <= max_bytes:
        return state
    pending = state.get("pending_tool_execution")
    if isinstance(pending, Mapping):
        results = pending.get("completed_tool_results") or []
        state = {
            **state,
            "pending_tool_execution": {
                **pending,
                "completed_tool_results": [_previewed(result) for result in results],
            },
        }
    size = _json_bytes(state)
    if size <= max_bytes:
        return state
    parts = {key: _json_bytes(value) for key, value in state.items()}
    largest = max(parts, key=lambda key: parts[key])
    raise ValueError(
        f"the agent's pending interrupt is {size} bytes with its tools' results cut, over the "
        f"{max_bytes} a continue-as-new carries of it (its '{largest}' is {parts[largest]} "
        "bytes): answer the interrupt before the conversation continues as new, or keep what "
        "an interrupt's reason holds small"
    )


def _previewed(result: Any) -> Any:
    """A completed tool's result with its value cut, its id and status kept."""
    if not isinstance(result, Mapping):
        return result
    content: list[Any] = []
    for block in result.get("content") or []:
        if isinstance(block, Mapping) and "json" in block:
            value = block["json"]
            content.append({"json": returned_preview(value, _json_bytes(value), CUT_RESULT)})
        elif isinstance(block, Mapping) and isinstance(block.get("text"), str):
            text = block["text"]
            if len(text) > CUT_TEXT_CHARS:
                cut = len(text) - CUT_TEXT_CHARS
                text = f"{text[:CUT_TEXT_CHARS]} ... [{cut} characters cut: {CUT_RESULT}]"
            content.append({"text": text})
        else:  # an image, a document: nothing of it fits a preview
            kind = next(iter(block), "block") if isinstance(block, Mapping) else "block"
            content.append({"text": f"[a {kind} of {_json_bytes(block)} bytes {CUT_RESULT}]"})
    return {**result, "content": content}


def _json_bytes(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str).encode())


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


def carried_state(
    interrupt: Any, plans_run: int, memory: StepMemory, plan_stream: WorkflowStream | None
) -> PlanToolState:
    """``WorkflowPlanPlugin.carry_over``: the agent's pending interrupt bounded
    (``carried_interrupt``), the plan count, the memory and the stream's state. In a
    workflow, an interrupt that cannot be cut enough ends it with a non-retryable error: a
    continue-as-new the server refuses would fail the workflow task on every retry."""
    pending = interrupt if interrupt is not None and interrupt.activated else None
    carried: dict[str, Any] | None = None
    if pending is not None:
        try:
            carried = carried_interrupt(pending.to_dict())
        except ValueError as exc:
            if not workflow.in_workflow():
                raise
            raise ApplicationError(str(exc), non_retryable=True) from None
    return PlanToolState(
        plans_run,
        memory.entries(),
        memory.forgotten,
        stream=stream_state(plan_stream) if plan_stream is not None else None,
        interrupt=carried,
    )
