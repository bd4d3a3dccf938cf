"""A workflow that paced its commands completes only after its pacer timer fired.

The pacer is the 1 ms timer ``Admission`` starts to open the next workflow task when a
command waits for room in it. If what the command waited for comes from elsewhere first
(a hook reply, a stop), the plan may finish while the timer is pending; a timer firing
during the completing task makes the server reject the completion (``UnhandledCommand``,
a failed workflow task in the plan's history). Seen in CI under load on the large-plans
conversation test, and a pending pacer at a plan's end was caught twice in 24 plans with
three such runs side by side on two busy cores. ``Admission.settle`` waits for the timer
first; these tests make the state on a real server, deterministically.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass
from typing import Any

from temporalio import workflow
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.worker import Worker

from durable_plan.temporal.workflows.admission import Admission, Wanted


@dataclass
class PacedInput:
    settle: bool
    cancel_during_settle: bool | None = None
    """Settle in a task of its own with ``absorb_cancel`` set to this, and cancel that task
    while it waits (None: settle in the run itself)."""


@workflow.defn(sandboxed=False)
class PacedWorkflow:
    """Sends one message, queues a second past the task's byte budget (the pacer starts),
    then stops as a plan does on ``fail_fast``: the waiting command is withdrawn."""

    @workflow.run
    async def run(self, request: PacedInput) -> dict[str, Any]:
        admission = Admission(
            max_task_bytes=1_000, max_history_bytes=10_000_000, max_result_bytes=1_000
        )
        first = await admission.enter(600, starts=False)
        stopped = False
        waiter = asyncio.create_task(
            admission.enter(600, starts=False, wanted=Wanted(lambda: not stopped))
        )
        await asyncio.sleep(0)  # the second command queues: no room left in this task
        stopped = True
        waiter.cancel()
        result: dict[str, Any] = {"first": first}
        if request.cancel_during_settle is not None:
            settling = asyncio.create_task(
                admission.settle(absorb_cancel=request.cancel_during_settle)
            )
            await asyncio.sleep(0)  # it waits for the pacer now
            settling.cancel()
            try:
                await settling
                result["cancel"] = "absorbed"
            except asyncio.CancelledError:
                result["cancel"] = "raised"
            await admission.settle()  # the pacer fires before the run completes
        elif request.settle:
            await admission.settle()
        return {**result, "waiter_cancelled": waiter.cancelled()}


async def _run(
    client: Client, task_queue: str, request: PacedInput
) -> tuple[dict[str, Any], list[str]]:
    async with Worker(client, task_queue=task_queue, workflows=[PacedWorkflow]):
        handle = await client.start_workflow(
            PacedWorkflow.run, request, id=f"paced-{uuid.uuid4().hex[:8]}", task_queue=task_queue
        )
        result = await handle.result()
        history = await handle.fetch_history()
    kinds = [EventType.Name(e.event_type).removeprefix("EVENT_TYPE_") for e in history.events]
    return result, kinds


def _timers(kinds: list[str]) -> list[str]:
    return [k for k in kinds if k.startswith("TIMER_") or k == "WORKFLOW_EXECUTION_COMPLETED"]


async def test_a_pending_pacer_fires_before_the_workflow_completes(
    client: Client, task_queue: str
) -> None:
    result, kinds = await _run(client, task_queue, PacedInput(settle=True))
    assert result == {"first": "go", "waiter_cancelled": True}
    assert _timers(kinds) == ["TIMER_STARTED", "TIMER_FIRED", "WORKFLOW_EXECUTION_COMPLETED"]
    assert "WORKFLOW_TASK_FAILED" not in kinds


async def test_without_settling_the_timer_is_left_pending_at_completion(
    client: Client, task_queue: str
) -> None:
    """The state the fix removes: the completion goes out with the timer still pending
    (the server may fire it during that task)."""
    result, kinds = await _run(client, task_queue, PacedInput(settle=False))
    assert result["first"] == "go"
    assert _timers(kinds) == ["TIMER_STARTED", "WORKFLOW_EXECUTION_COMPLETED"]


async def test_a_cancel_during_the_wait_reaches_a_caller_that_goes_on(
    client: Client, task_queue: str
) -> None:
    """A plan about to complete keeps its outcome (the cancel is absorbed); a conversation's
    hook relay, which settles mid-conversation, must not lose the conversation's cancel."""
    for absorb, expected in ((True, "absorbed"), (False, "raised")):
        result, kinds = await _run(
            client, task_queue, PacedInput(settle=True, cancel_during_settle=absorb)
        )
        assert result["cancel"] == expected, absorb
        assert _timers(kinds) == ["TIMER_STARTED", "TIMER_FIRED", "WORKFLOW_EXECUTION_COMPLETED"]
        assert "WORKFLOW_TASK_FAILED" not in kinds


async def test_settle_waits_for_nothing_without_a_pacer() -> None:
    """Every plan calls ``settle`` at its end: without a pending timer it adds no workflow
    task (and, outside a workflow, touches no workflow API)."""
    admission = Admission(max_task_bytes=1, max_history_bytes=1, max_result_bytes=1)
    await admission.settle()
