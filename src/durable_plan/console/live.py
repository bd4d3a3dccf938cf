"""A plan's events to the browser as Server-Sent Events, as they happen.

The events come from the plan's Workflow Stream through ``plan_events`` (the reader
`PlanHandle.events` uses: a poll *query*, so watching costs the plan no history), agent
steps' rounds and tool calls merged in. Each plan event goes out with its offset as the
SSE ``id``: a browser that lost the connection reconnects with ``Last-Event-ID`` and
resumes after it, missing nothing and seeing nothing twice. Events are small and bounded
by construction (``run.events``: no arguments or results, texts cut).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

from temporalio.client import Client

from durable_plan.temporal.client.subscribe import POLL_COOLDOWN, plan_events

POLL = POLL_COOLDOWN
"""Between stream reads while caught up (the default of every reader): a node changes colour
about half of it, plus a network round trip, after its step ended."""


def _frame(kind: str, data: object, event_id: int | None = None) -> bytes:
    head = f"id: {event_id}\n" if event_id is not None else ""
    text = json.dumps(data, separators=(",", ":"), default=str)
    return f"{head}event: {kind}\ndata: {text}\n\n".encode()


async def event_frames(
    client: Client, workflow_id: str, from_offset: int = 0
) -> AsyncIterator[bytes]:
    """SSE frames: ``plan`` events, then ``end`` (the stream ended) or ``fault`` (it
    cannot be read: the plan is sealed and the console has no keys, or no worker answers
    for a closed one); the page then falls back to reading the plan's state."""
    handle = client.get_workflow_handle(workflow_id)
    yield b": connected\n\n"  # the browser's EventSource opens now, not at the first event
    try:
        async for event in plan_events(handle, from_offset, poll_cooldown=POLL):
            wire = event.to_wire()
            yield _frame("plan", wire, event.offset)
    except Exception as exc:
        yield _frame("fault", {"error": f"{type(exc).__name__}: {exc}"[:500]})
        return
    yield _frame("end", {})
