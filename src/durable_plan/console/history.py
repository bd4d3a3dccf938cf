"""What a plan's history holds about it: the plan as submitted, and each step's calls.

Read from the server's history (not from a worker), so it works for a plan that ended
and for one no worker serves. Payloads are decoded with the console's own data
converter: with the keys of ``$DURABLE_PLAN_KEYS`` a sealed value opens; without them it
stays hidden and the answer says why, never a garbled value.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from temporalio.api.common.v1 import Payload
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from durable_plan.console.bounds import cut_text, preview
from durable_plan.console.settings import MAX_HISTORY_EVENTS, MAX_ITEMS
from durable_plan.protect.encryption import is_sealed, missing_keys_message

SEALED = (
    "sealed (encrypted history): start the console with the keys in $DURABLE_PLAN_KEYS to see it"
)


@dataclass
class Decoded:
    """A payload's value (``ok``) or why it is not shown (``hidden``)."""

    value: Any = None
    hidden: str | None = None

    @property
    def ok(self) -> bool:
        return self.hidden is None


async def decode(client: Client, payloads: list[Payload]) -> Decoded:
    """The first value of ``payloads`` through the client's converter (codec included)."""
    if not payloads:
        return Decoded(None)
    try:
        values = await client.data_converter.decode(payloads)
    except Exception as exc:
        if any(is_sealed(p) for p in payloads) or missing_keys_message(exc) is not None:
            return Decoded(hidden=SEALED)
        return Decoded(hidden=cut_text(f"cannot decode: {type(exc).__name__}: {exc}", 300))
    return Decoded(values[0] if values else None)


async def plan_request(client: Client, workflow_id: str) -> Decoded:
    """The plan workflow's input (the wire form of ``PlanInput``), from its first event."""
    handle = client.get_workflow_handle(workflow_id)
    async for event in handle.fetch_history_events(page_size=1):
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
            attrs = event.workflow_execution_started_event_attributes
            return await decode(client, list(attrs.input.payloads))
        break
    return Decoded(hidden="the history has no start event")


def _belongs(activity_id: str, step_id: str) -> bool:
    """The step's own activity, or one of its map items (``step[3]``)."""
    return activity_id == step_id or activity_id.startswith(step_id + "[")


@dataclass
class Call:
    """One activity of a step: its arguments and its outcome."""

    activity_id: str
    tool: str
    args: Decoded
    attempt: int = 0
    result: Decoded | None = None
    error: str | None = None
    scheduled_at: float | None = None
    ended_at: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_wire(self) -> dict[str, Any]:
        request = self.args.value if self.args.ok else None
        args = request.get("args") if isinstance(request, dict) else None
        out: dict[str, Any] = {
            "id": self.activity_id,
            "tool": self.tool,
            "attempt": self.attempt,
            "error": cut_text(self.error),
        }
        out["args"] = preview(args) if self.args.ok else {"hidden": self.args.hidden}
        if self.result is not None:
            value = self.result.value
            if self.result.ok and isinstance(value, list) and value:
                value = value[0]  # StepResponse on the wire: [result, duration_ms, attempt?]
            out["result"] = preview(value) if self.result.ok else {"hidden": self.result.hidden}
        if self.scheduled_at is not None and self.ended_at is not None:
            out["duration_ms"] = round((self.ended_at - self.scheduled_at) * 1000, 1)
        return out


async def step_calls(client: Client, workflow_id: str, step_id: str) -> dict[str, Any]:
    """The activities of ``step_id`` (and of its map items) in the plan's history: each
    one's arguments, attempts, result or error; at most ``MAX_ITEMS`` calls, and at most
    ``MAX_HISTORY_EVENTS`` events read."""
    handle = client.get_workflow_handle(workflow_id)
    calls: dict[int, Call] = {}
    total = 0
    read = 0
    async for event in handle.fetch_history_events():
        read += 1
        if read > MAX_HISTORY_EVENTS:
            break
        kind = event.event_type
        at = event.event_time.ToDatetime().timestamp()
        if kind == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            attrs = event.activity_task_scheduled_event_attributes
            if not _belongs(attrs.activity_id, step_id):
                continue
            total += 1
            if len(calls) < MAX_ITEMS:
                args = await decode(client, list(attrs.input.payloads))
                calls[event.event_id] = Call(
                    attrs.activity_id, attrs.activity_type.name, args, scheduled_at=at
                )
        elif kind == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            started = event.activity_task_started_event_attributes
            if (found := calls.get(started.scheduled_event_id)) is not None:
                found.attempt = started.attempt
        elif kind == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            done = event.activity_task_completed_event_attributes
            if (found := calls.get(done.scheduled_event_id)) is not None:
                found.result = await decode(client, list(done.result.payloads))
                found.ended_at = at
        elif kind in (
            EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED,
            EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT,
        ):
            failed = (
                event.activity_task_failed_event_attributes
                if kind == EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED
                else event.activity_task_timed_out_event_attributes
            )
            if (found := calls.get(failed.scheduled_event_id)) is not None:
                found.error = await _failure_text(client, failed.failure)
                found.ended_at = at
    return {
        "calls": [c.to_wire() for c in calls.values()],
        "total": total,
        "events_read": min(read, MAX_HISTORY_EVENTS),
    }


async def _failure_text(client: Client, failure: Any) -> str:
    """A failure's message, opened with the keys when its attributes were sealed."""
    if failure.HasField("encoded_attributes"):
        opened = await decode(client, [failure.encoded_attributes])
        if not opened.ok:
            return f"error text {opened.hidden}"
        if isinstance(opened.value, dict) and opened.value.get("message"):
            return str(opened.value["message"])
    return str(failure.message or "failed")
