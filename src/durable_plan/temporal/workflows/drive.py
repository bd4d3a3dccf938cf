"""The one loop of a durable plan: start a coroutine per call handed out, take each outcome
back in a fixed order, repeat; for a plan's steps and for a map's or reduce's items."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from durable_plan.run.calls import StepCall
    from durable_plan.run.engine import PlanRun
    from durable_plan.temporal.workflows.outcomes import Outcome


async def drive(
    next_calls: Callable[[], list[StepCall]],
    run_call: Callable[[StepCall], Coroutine[Any, Any, Outcome | None]],
    rank: Callable[[StepCall], int],
    record: Callable[[StepCall, Outcome], None],
) -> None:
    """Start every call handed out, take each outcome back in a fixed order, repeat.

    The one loop of the workflow, for a plan's steps and for a map's or reduce's items:
    outcomes of one workflow task are recorded in plan (item) order, so every worker
    decides the same (which failure stops a ``fail_fast`` plan, say).
    """
    tasks: dict[asyncio.Task[Outcome | None], StepCall] = {}

    def start(calls: list[StepCall]) -> None:
        for call in calls:
            tasks[asyncio.create_task(run_call(call))] = call

    try:
        start(next_calls())
        while tasks:
            done, _ = await workflow.wait(list(tasks), return_when=asyncio.FIRST_COMPLETED)
            for task in sorted(done, key=lambda t: rank(tasks[t])):
                call = tasks.pop(task)
                outcome = task.result()
                if outcome is not None:  # None: withdrawn, already recorded as skipped
                    record(call, outcome)
            start(next_calls())
    except asyncio.CancelledError:
        for task in tasks:
            task.cancel()
        raise


def record(run: PlanRun, call: StepCall, outcome: Outcome) -> None:
    ok, value, duration_ms, attempts = outcome
    if ok:
        run.record_result(call.step_id, value, duration_ms=duration_ms, attempts=attempts)
    else:
        run.record_failure(call.step_id, value, duration_ms=duration_ms, attempts=attempts)
