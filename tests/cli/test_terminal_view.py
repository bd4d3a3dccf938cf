"""What a person sees in a terminal while a plan waits (issue 46): the live table draws its
waiting state at once, not at the next event, which a waiting plan never sends."""

from __future__ import annotations

import asyncio
import io
import time
from collections.abc import AsyncIterator
from typing import Any

from rich.console import Console

from durable_plan.cli.progress_view import AWAITING, LiveView

WAITING = [
    {"id": "ticket", "tool": "read_ticket", "phase": "ok", "level": 0},
    {"id": "refund", "tool": "refund_payment", "phase": AWAITING, "level": 1},
]


def _terminal() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, force_terminal=True, width=120), out


def test_lines_that_came_before_the_table_may_appear_are_drawn_on_the_next_tick() -> None:
    console, out = _terminal()
    view = LiveView(console, title="triage", appear_after=0.05)
    view.update(WAITING)  # the plan reached its gate at once: the table may not appear yet
    assert "refund" not in out.getvalue()
    time.sleep(0.06)
    view.tick()  # no event comes while the plan waits; the caller's loop ticks
    assert "refund" in out.getvalue() and "awaiting approval" in out.getvalue()
    assert view.close() is True


def test_tick_before_any_lines_draws_nothing() -> None:
    console, out = _terminal()
    view = LiveView(console, appear_after=0)
    view.tick()
    assert out.getvalue() == ""
    assert view.close() is False


async def test_run_display_draws_a_waiting_plan_without_another_event() -> None:
    """The display of `durable-plan run`: one event stream update early, then silence while the
    plan waits; the table with the awaiting step appears within a second all the same."""
    from durable_plan.check.plan_file.reading import load_plan_file
    from durable_plan.cli.commands.run_display import Display

    console, out = _terminal()
    display = Display(load_plan_file("examples/plans/triage.yaml"), False, None)
    display._console = console
    display._view = LiveView(console, title="triage")
    waiting = asyncio.Event()

    async def lines() -> list[dict[str, Any]] | None:
        return WAITING

    async def events() -> AsyncIterator[Any]:
        from durable_plan.run.events import PlanEvent

        yield PlanEvent(
            kind="awaiting_approval", plan="p", at=0.0, step="refund", tool="refund_payment"
        )
        await asyncio.Event().wait()  # the plan now waits for a person: nothing more comes

    async def work() -> Any:
        await waiting.wait()
        raise asyncio.CancelledError

    follow = asyncio.ensure_future(display.follow(work(), lines, events()))
    try:
        for _ in range(40):
            await asyncio.sleep(0.1)
            if "refund" in out.getvalue():
                break
        assert "refund" in out.getvalue()
    finally:
        follow.cancel()
        await asyncio.gather(follow, return_exceptions=True)
