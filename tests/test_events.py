"""Step events: one vocabulary from both runners; durably a Workflow Stream a caller can
resume; replay and a worker killed mid-plan publish nothing twice."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from temporalio.client import Client

from durable_plan.local import execute_plan
from durable_plan.run.events import EventQueue, PlanEvent
from durable_plan.temporal import plan_worker, start_plan
from durable_plan.tools.registry import ToolRegistry


async def add(a: int, b: int) -> dict[str, int]:
    return {"sum": a + b}


async def nap(seconds: float) -> dict[str, float]:
    await asyncio.sleep(seconds)
    return {"slept": seconds}


async def fail(reason: str) -> None:
    raise ValueError(reason)


def registry() -> ToolRegistry:
    reg = ToolRegistry()
    reg.add(add)
    reg.add(nap)
    reg.add(fail, retries=0)
    return reg


PLAN: dict[str, Any] = {
    "steps": [
        {"id": "a", "tool": "add", "args": {"a": 1, "b": 2}},
        {"id": "b", "tool": "add", "args": {"b": 10}, "bind": {"a": "steps.a.sum"}},
        {
            "id": "m",
            "tool": "map",
            "args": {
                "over": [1, 2, 3],
                "do": {"tool": "add", "args": {"b": 1}, "bind": {"a": "item"}},
            },
        },
        {"id": "c", "tool": "fail", "args": {"reason": "no"}, "after": ["b"]},
        {"id": "d", "tool": "add", "args": {"a": 0, "b": 0}, "after": ["c"]},
    ],
    "on_error": "continue",
}


def shape(events: list[PlanEvent]) -> dict[str | None, list[tuple[Any, ...]]]:
    """What must be the same in both runners: each step's events in order, with kinds and
    statuses (not times; steps that run at once may interleave differently)."""
    by_step: dict[str | None, list[tuple[Any, ...]]] = {}
    for e in events:
        by_step.setdefault(e.step, []).append((e.kind, e.tool, e.status, e.item, e.error))
    return by_step


async def test_in_process_events_through_a_queue() -> None:
    queue = EventQueue()
    events = [
        e async for e in queue.run(execute_plan(PLAN, registry(), on_event=queue, plan_id="p1"))
    ]
    result = queue.result
    assert result is not None
    kinds = [e.kind for e in events]
    assert kinds[0] == "plan_started" and kinds[-1] == "plan_finished"
    assert {e.plan for e in events} == {"p1"}
    finished = {e.step: e.status for e in events if e.kind == "step_finished"}
    assert finished == {"a": "ok", "b": "ok", "m": "ok", "c": "failed", "d": "skipped"}
    assert [e.item for e in events if e.kind == "item_finished"] == [0, 1, 2]
    assert events[-1].status == "failed" and not result.ok
    started = [e.step for e in events if e.kind == "step_started"]
    assert started == ["a", "m", "b", "c"]  # a and m have no dependencies


async def test_durable_events_match_in_process(client: Client, task_queue: str) -> None:
    local: list[PlanEvent] = []
    await execute_plan(PLAN, registry(), on_event=local.append)
    async with plan_worker(client, task_queue=task_queue, registry=registry()):
        handle = await start_plan(client, PLAN, task_queue=task_queue, registry=registry())
        durable = [e async for e in handle.events()]
        await handle.result()
        # Resuming after a "disconnect" (a closed plan's events are read by query, which
        # a worker answers): the rest, from the next offset, nothing twice.
        rest = [e async for e in handle.events(from_offset=3)]
    assert shape(durable) == shape(local)
    assert durable[0].kind == "plan_started" and durable[-1].kind == "plan_finished"
    assert [e.offset for e in durable] == list(range(len(durable)))
    assert {e.plan for e in durable} == {handle.id}
    assert [e.offset for e in rest] == list(range(3, len(durable)))
