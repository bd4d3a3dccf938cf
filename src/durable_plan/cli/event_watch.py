"""The CLI's live table from a plan's event stream, not from polling (``run``, ``show
--watch``): each event updates the ledger the table shows (``EventLedger``), and only
an approval request asks the workflow for more (the arguments a person decides on,
which events do not carry)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from durable_plan.run.events import EventLedger, PlanEvent

Lines = list[dict[str, Any]]


async def follow_events(
    events: AsyncIterator[PlanEvent],
    query: Callable[[], Awaitable[Lines | None]],
    show: Callable[[Lines], None],
) -> None:
    """Draw each event's ledger until ``plan_finished``; an exception (no stream to read)
    is the caller's cue to poll instead."""
    ledger = EventLedger()
    async for event in events:
        ledger.apply(event)
        lines = ledger.progress()
        if event.kind == "awaiting_approval":
            queried = await query()
            if queried is not None:
                lines = queried
        if lines:
            show(lines)
        if event.kind == "plan_finished":
            return
