"""Control steps: map and reduce over lists known only at run time, and exit.

In-process and on the real dev server, with the same plans: sizes 0, 1 and 50,
order kept, the concurrency cap measured (not slept), fail_fast and continue,
``when`` inside a body, reduce, exit with success and error, agent bodies,
every check, a 500-item durable map within history limits, and replay.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.strands_agents import StrandsPlugin
from temporalio.worker import Replayer

from durable_plan import PlanWorkflow, plan_worker, start_plan
from durable_plan.language.errors import PlanRejected
from durable_plan.language.plan import PlanResult
from durable_plan.local.runner import execute_plan
from durable_plan.temporal.workflows.agent_workflow import AgentStepWorkflow
from durable_plan.testing import ScriptedModel, call
from durable_plan.testing.scripted_model import output
from durable_plan.tools.registry import ToolRegistry
from tests.support.helpers import until_progress

LIVE = {"now": 0, "peak": 0}


async def numbers(n: int) -> dict[str, Any]:
    """The numbers 0..n-1.

    Args:
        n: how many
    """
    return {"values": list(range(n))}


async def square(x: int, delay: float = 0.0, fail_on: int = -1, meet: int = 0) -> dict[str, Any]:
    """Square a number, after an optional delay (to measure overlap).

    Args:
        x: the number
        delay: seconds to wait
        fail_on: the number that fails
        meet: hold until this many squares have run at once (at most 30 s), so that a test
            sees the map's concurrency however slowly the worker starts its activities
    """
    LIVE["now"] += 1
    LIVE["peak"] = max(LIVE["peak"], LIVE["now"])
    try:
        deadline = time.monotonic() + 30
        while LIVE["peak"] < meet and time.monotonic() < deadline:
            await asyncio.sleep(0.005)
        if delay:
            await asyncio.sleep(delay)
        if x == fail_on:
            raise ValueError("13 is unlucky")
        return {"x": x, "sq": x * x}
    finally:
        LIVE["now"] -= 1


async def add(a: int, b: int) -> int:
    """a + b.

    Args:
        a: first
        b: second
    """
    return a + b


REGISTRY = ToolRegistry([numbers, square, add])


def map_plan(
    n: int,
    *,
    concurrency: int = 4,
    delay: float = 0.0,
    fail_on: int = -1,
    meet: int = 0,
    **plan: Any,
) -> dict[str, Any]:
    return {
        "steps": [
            {"id": "nums", "tool": "numbers", "args": {"n": n}},
            {
                "id": "squares",
                "tool": "map",
                "bind": {"over": "steps.nums.values"},
                "args": {
                    "concurrency": concurrency,
                    "do": {
                        "tool": "square",
                        "args": {"delay": delay, "fail_on": fail_on}
                        | ({"meet": meet} if meet else {}),
                        "bind": {"x": "item"},
                    },
                },
            },
        ],
        **plan,
    }


async def run_local(plan: dict[str, Any]) -> PlanResult:
    LIVE.update(now=0, peak=0)
    return await execute_plan(plan, REGISTRY, model=ScriptedModel(scripts=SCRIPTS))


SCRIPTS = {
    "Judge 2": [output({"even": True})],
    "Judge 3": [call("square", x=3), output({"even": False})],
}


# -- in-process ------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [0, 1, 50])
async def test_a_map_keeps_input_order(n: int) -> None:
    result = await run_local(map_plan(n))
    squares = result.returned["squares"]
    assert squares["count"] == n and squares["failed"] == 0
    assert [s["x"] for s in squares["results"]] == list(range(n))


async def test_the_concurrency_cap_holds() -> None:
    await run_local(map_plan(12, concurrency=3, delay=0.05))
    assert LIVE["peak"] == 3


async def test_fail_fast_drains_running_items_and_skips_the_rest() -> None:
    result = await run_local(map_plan(20, concurrency=2, fail_on=13))
    outcome = result.outcome("squares")
    assert outcome.status == "failed"
    assert outcome.error is not None and outcome.error.startswith("item 13 failed: ValueError")


async def test_continue_records_each_failed_item_in_its_slot() -> None:
    result = await run_local(map_plan(20, fail_on=13, on_error="continue"))
    squares = result.returned["squares"]
    assert squares["failed"] == 1
    assert squares["results"][13] == {"error": "ValueError: 13 is unlucky"}
    assert squares["results"][14] == {"x": 14, "sq": 196}


async def test_when_inside_the_body_filters_items() -> None:
    plan = map_plan(6)
    plan["steps"][1]["args"]["do"]["when"] = "item % 2 = 0"
    squares = (await run_local(plan)).returned["squares"]
    assert squares["not_taken"] == 3
    assert squares["results"][1] == {"not_taken": "when was false"}
    assert squares["results"][4] == {"x": 4, "sq": 16}


async def test_reduce_folds_items_one_after_another() -> None:
    plan = {
        "steps": [
            {"id": "nums", "tool": "numbers", "args": {"n": 5}},
            {
                "id": "total",
                "tool": "reduce",
                "bind": {"over": "steps.nums.values"},
                "args": {
                    "initial": 100,
                    "do": {"tool": "add", "bind": {"a": "accumulator", "b": "item * index"}},
                },
            },
        ]
    }
    result = await run_local(plan)
    assert result.returned["total"] == {"count": 5, "result": 100 + 0 + 1 + 4 + 9 + 16}


def exit_plan(status: str) -> dict[str, Any]:
    return {
        "steps": [
            {"id": "nums", "tool": "numbers", "args": {"n": 3}},
            {
                "id": "stop",
                "tool": "exit",
                "when": "$count(steps.nums.values) < 5",
                "args": {"status": status, "message": "too few numbers"},
                "bind": {"output": "steps.nums.values"},
            },
            {"id": "later", "tool": "add", "args": {"a": 1, "b": 2}, "after": ["stop"]},
        ],
        "final": True,
    }


@pytest.mark.parametrize("status", ["success", "error"])
async def test_exit_ends_the_plan_and_says_why(status: str) -> None:
    result = await run_local(exit_plan(status))
    assert result.exited == {
        "step": "stop",
        "status": status,
        "message": "too few numbers",
        "output": [0, 1, 2],
    }
    later = result.outcome("later")
    assert later.status == "skipped"
    assert later.error == f"plan exited at step 'stop' ({status}): too few numbers"
    assert result.final is (status == "success")
    assert result.ok is (status == "success")


async def test_a_map_over_agent_steps() -> None:
    plan = {
        "steps": [
            {"id": "nums", "tool": "numbers", "args": {"n": 4}},
            {
                "id": "judge",
                "tool": "map",
                "bind": {"over": "steps.nums.values[$ > 1]"},
                "args": {
                    "do": {
                        "tool": "agent",
                        "args": {
                            "prompt": "Judge {{ item }}",
                            "output_schema": {
                                "type": "object",
                                "properties": {"even": {"type": "boolean"}},
                            },
                        },
                    }
                },
            },
        ]
    }
    judged = (await run_local(plan)).returned["judge"]
    assert [r["output"] for r in judged["results"]] == [{"even": True}, {"even": False}]


# -- checks ------------------------------------------------------------------------------------


def loop(**fields: Any) -> dict[str, Any]:
    return {"steps": [{"id": "nums", "tool": "numbers", "args": {"n": 3}}, {"id": "m", **fields}]}


@pytest.mark.parametrize(
    ("plan", "field", "words"),
    [
        (
            loop(tool="map", args={"do": {"tool": "square", "bind": {"x": "item"}}}),
            "bind.over",
            "needs 'over'",
        ),
        (
            loop(tool="map", bind={"over": "steps.nums.values["}, args={"do": {"tool": "square"}}),
            "bind.over",
            "syntax",
        ),
        (loop(tool="map", bind={"over": "steps.nums.values"}), "args.do", "needs 'do'"),
        (
            loop(tool="map", bind={"over": "steps.nums.values"}, args={"do": {"tool": "map"}}),
            "args.do.tool",
            "second plan",
        ),
        (
            loop(tool="map", bind={"over": "steps.nums.values"}, args={"do": {"tool": "sqare"}}),
            "args.do.tool",
            "did you mean 'square'",
        ),
        (
            loop(
                tool="map",
                bind={"over": "steps.nums.values"},
                args={"concurrency": 99, "do": {"tool": "square", "bind": {"x": "item"}}},
            ),
            "args.concurrency",
            "from 1 to 16",
        ),
        (
            loop(
                tool="map",
                bind={"over": "steps.nums.values"},
                args={"do": {"tool": "square", "args": {"x": "three"}}},
            ),
            "args.do.args.x",
            "not of type 'integer'",
        ),
        (loop(tool="add", bind={"a": "item", "b": "index"}), "bind.a", "only inside the 'do'"),
        (
            loop(
                tool="map",
                bind={"over": "steps.nums.values"},
                args={"do": {"tool": "square", "bind": {"x": "accumulator"}}},
            ),
            "args.do.bind.x",
            "reduce only",
        ),
        (
            loop(tool="exit", args={"status": "maybe", "message": "x"}),
            "args.status",
            "'success' or 'error'",
        ),
    ],
)
async def test_a_bad_control_step_is_rejected_before_anything_runs(
    plan: dict[str, Any], field: str, words: str
) -> None:
    with pytest.raises(PlanRejected) as info:
        await run_local(plan)
    assert any(p.field == field and words in str(p) for p in info.value.problems), (
        info.value.render()
    )


async def test_over_that_is_not_a_list_fails_the_step() -> None:
    plan = loop(
        tool="map",
        bind={"over": "steps.nums"},
        args={"do": {"tool": "square", "bind": {"x": "item"}}},
    )
    result = await run_local(plan)
    assert result.outcome("m").status == "failed"
    assert "'over' must give a list" in (result.outcome("m").error or "")


# -- durable ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
async def agent_client(temporal_target: str) -> AsyncIterator[Client]:
    plugin = StrandsPlugin(models={"scripted": lambda: ScriptedModel(scripts=SCRIPTS)})
    yield await Client.connect(temporal_target, plugins=[plugin])


async def run_durable(
    client: Client, task_queue: str, plan: dict[str, Any]
) -> tuple[PlanResult, Any]:
    LIVE.update(now=0, peak=0)
    async with plan_worker(client, task_queue=task_queue, registry=REGISTRY):
        handle = await start_plan(
            client, plan, task_queue=task_queue, registry=REGISTRY, model="scripted"
        )
        result = await asyncio.wait_for(handle.result(), 120)
        history = await handle.handle.fetch_history()
    return result, history


async def test_a_durable_map_runs_each_item_as_an_activity(
    agent_client: Client, task_queue: str
) -> None:
    result, history = await run_durable(
        agent_client, task_queue, map_plan(50, concurrency=5, delay=0.02, meet=5)
    )
    squares = result.returned["squares"]
    assert [s["x"] for s in squares["results"]] == list(range(50))
    assert LIVE["peak"] == 5
    ids = [
        e.activity_task_scheduled_event_attributes.activity_id
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]
    assert ids[1:4] == ["squares/do.0", "squares/do.1", "squares/do.2"]
    await Replayer(workflows=[PlanWorkflow, AgentStepWorkflow]).replay_workflow(history)


async def test_durable_exit_reduce_and_agent_bodies(agent_client: Client, task_queue: str) -> None:
    result, _ = await run_durable(agent_client, task_queue, exit_plan("error"))
    assert result.exited is not None and result.exited["status"] == "error"
    assert result.outcome("later").status == "skipped"
    plan = {
        "steps": [
            {"id": "nums", "tool": "numbers", "args": {"n": 4}},
            {
                "id": "judge",
                "tool": "map",
                "bind": {"over": "steps.nums.values[$ > 1]"},
                "args": {
                    "do": {
                        "tool": "agent",
                        "args": {
                            "prompt": "Judge {{ item }}",
                            "output_schema": {"type": "object"},
                        },
                    }
                },
            },
            {
                "id": "total",
                "tool": "reduce",
                "bind": {"over": "steps.nums.values"},
                "args": {
                    "initial": 0,
                    "do": {"tool": "add", "bind": {"a": "accumulator", "b": "item"}},
                },
            },
        ]
    }
    result, _ = await run_durable(agent_client, task_queue, plan)
    assert [r["output"] for r in result.returned["judge"]["results"]] == [
        {"even": True},
        {"even": False},
    ]
    assert result.returned["total"]["result"] == 6


async def test_a_500_item_durable_map_stays_within_history_limits(
    agent_client: Client, task_queue: str
) -> None:
    result, history = await run_durable(agent_client, task_queue, map_plan(500, concurrency=8))
    squares = result.returned["squares"]
    assert squares["count"] == 500 and squares["failed"] == 0
    assert squares["results"][499] == {"x": 499, "sq": 499 * 499}
    assert len(history.events) < 40_000


async def test_progress_shows_a_running_maps_items(agent_client: Client, task_queue: str) -> None:
    async with plan_worker(agent_client, task_queue=task_queue, registry=REGISTRY):
        handle = await start_plan(
            agent_client,
            map_plan(8, concurrency=2, delay=0.3),
            task_queue=task_queue,
            registry=REGISTRY,
        )
        lines = await until_progress(
            handle,
            lambda lines: any(
                line["id"] == "squares" and line.get("items", {}).get("done", 0) >= 2
                for line in lines
            ),
            what="two items done",
        )
        seen: dict[str, Any] = next(line for line in lines if line["id"] == "squares")["items"]
        await asyncio.wait_for(handle.result(), 60)
    assert seen["items"] == 8 and seen["running"] <= 2 and seen["failed"] == 0


async def test_durable_fail_fast_continue_and_when(agent_client: Client, task_queue: str) -> None:
    result, _ = await run_durable(agent_client, task_queue, map_plan(20, concurrency=2, fail_on=13))
    assert (result.outcome("squares").error or "").startswith("item 13 failed: ValueError")
    kept = map_plan(20, fail_on=13, on_error="continue")
    kept["steps"][1]["args"]["do"]["when"] = "item != 2"
    result, _ = await run_durable(agent_client, task_queue, kept)
    squares = result.returned["squares"]
    assert squares["failed"] == 1 and squares["not_taken"] == 1
    assert squares["results"][13] == {"error": "ValueError: 13 is unlucky"}
    assert squares["results"][2] == {"not_taken": "when was false"}
