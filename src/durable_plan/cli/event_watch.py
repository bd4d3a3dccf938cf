"""The CLI's live table from a plan's event stream, not from polling (``run``, ``show
--watch``): each event updates the ledger the table shows (``EventLedger``); while a
step or an agent step's tool call awaits a person, each event asks the workflow for the
lines too (the arguments and digest a person decides on, which events do not carry)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from durable_plan.run.events import EventLedger, PlanEvent

Lines = list[dict[str, Any]]
QUIET_S = 1.0
"""No event this long after the watch began: no stream to read (a plan started with
stream_events=False, a worker from before streams); the caller polls instead."""


class Watch:
    """What the caller's polling fallback needs to know about the stream."""

    def __init__(self) -> None:
        self.began = time.monotonic()
        self.events = 0

    def quiet(self) -> bool:
        return self.events == 0 and time.monotonic() - self.began > QUIET_S


async def follow_events(
    events: AsyncIterator[PlanEvent],
    query: Callable[[], Awaitable[Lines | None]],
    show: Callable[[Lines], None],
    watch: Watch | None = None,
) -> None:
    """Draw each event's ledger until ``plan_finished``; an exception (no stream to read)
    is the caller's cue to poll instead."""
    ledger = EventLedger()
    awaiting: set[str] = set()
    async for event in events:
        if watch is not None:
            watch.events += 1
        ledger.apply(event)
        if event.kind == "awaiting_approval" and event.step:
            awaiting.add(event.step)
        elif event.kind == "approval_decided" and event.step:
            awaiting.discard(event.step)
        lines = ledger.progress()
        if awaiting:
            queried = await query()
            if queried is not None:
                lines = queried
        if lines:
            show(lines)
        if event.kind == "plan_finished":
            return
