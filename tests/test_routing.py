"""Per-tool task queues and limits: a tool's steps run on its own workers, a limited tool's
calls are held to its rate across plans, and the check knows where each tool runs."""

from __future__ import annotations

import asyncio
import time
import uuid
import warnings
from pathlib import Path
from typing import Any

import pytest
from temporalio import activity
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from durable_plan.check import check_plan
from durable_plan.language.errors import PlanRejected
from durable_plan.local.runner import execute_plan
from durable_plan.temporal import plan_worker, run_plan, start_plan, tool_worker
from durable_plan.temporal.client import NoWorkerWarning, tool_queues
from durable_plan.temporal.messages import PlanInput
from durable_plan.tools.registry import ToolRegistry
from durable_plan.tools.routing import queue_limits
from tests.crash_tools import FAST_SLEEP_S
from tests.worker_processes import read_log, worker_processes

STARTS: list[tuple[float, str]] = []


def lookup(name: str) -> dict[str, Any]:
    """Find a monster. Returns {"name": str, "hp": int}."""
    return {"name": name, "hp": 12}


def render(name: str, hp: int) -> dict[str, Any]:
    """Draw a monster (on the GPU machine). Returns {"picture": str}."""
    return {"picture": f"{name}:{hp}"}


def limited_call(n: int) -> dict[str, Any]:
    """A call to a rate-limited API. Returns {"n": int}."""
    STARTS.append((time.monotonic(), str(activity.info().workflow_id)))
    return {"n": n}


PLAN = {
    "steps": [
        {"id": "find", "tool": "lookup", "args": {"name": "orc"}},
        {
            "id": "draw",
            "tool": "render",
            "bind": {"name": "steps.find.name", "hp": "steps.find.hp"},
        },
    ]
}


def split_registries(gpu_queue: str) -> tuple[ToolRegistry, ToolRegistry]:
    """The plan worker's registry (render declared, its code elsewhere) and the GPU
    worker's (render's code, routed to ``gpu_queue``)."""
    plans = ToolRegistry([lookup])
    plans.declare(
        "render",
        task_queue=gpu_queue,
        description="Draw a monster.",
        input_schema={
            "type": "object",
            "properties": {"name": {"type": "string"}, "hp": {"type": "integer"}},
            "required": ["name", "hp"],
        },
    )
    gpu = ToolRegistry()
    gpu.add(render, task_queue=gpu_queue)
    return plans, gpu


# -- the owner's routing, refused where it cannot have been meant ----------------------------


def test_limits_need_a_queue_of_their_own() -> None:
    with pytest.raises(ValueError, match="give the tool a queue of its own"):
        ToolRegistry().add(lookup, max_per_second=5)
    with pytest.raises(ValueError, match="cannot run as a local activity"):
        ToolRegistry().add(lookup, task_queue="gpu", allow_local=True)
    with pytest.raises(ValueError, match="max_per_second must be more than 0"):
        ToolRegistry().add(lookup, task_queue="gpu", max_per_second=0)


def test_tools_sharing_a_queue_state_one_limit() -> None:
    registry = ToolRegistry()
    registry.add(lookup, task_queue="api", max_per_second=5)
    registry.add(render, task_queue="api", max_per_second=2)
    with pytest.raises(ValueError, match="share task queue 'api' but state different limits"):
        queue_limits(registry.on_queue("api", plan_queue=False), "api")


def test_routes_by_pattern_apply_before_and_after_and_lose_to_the_entry() -> None:
    registry = ToolRegistry([lookup])
    registry.route("look*", "reads")
    registry.add(render)
    registry.add(limited_call, task_queue="api")
    registry.route(["*", "!lookup"], "gpu")
    assert registry.get("lookup").options.task_queue == "reads"
    assert registry.get("render").options.task_queue == "gpu"
    assert registry.get("limited_call").options.task_queue == "api"
    later = ToolRegistry()
    later.route("rend*", "gpu")
    later.add(render)
    assert later.get("render").options.task_queue == "gpu"
    assert [t.name for t in later.on_queue("gpu", plan_queue=False)] == ["render"]
    assert later.on_queue("plans", plan_queue=True) == []


def test_a_routed_tool_may_not_run_local() -> None:
    registry = ToolRegistry()
    registry.add(render, task_queue="gpu")
    plan = {"steps": [{"id": "d", "tool": "render", "args": {"name": "x", "hp": 1}, "local": True}]}
    with pytest.raises(PlanRejected, match="may not run as a local activity"):
        check_plan(plan, catalog=registry.catalog(durable=True), durable=True)


async def test_a_declared_tool_is_refused_in_process_before_anything_runs() -> None:
    plans, _ = split_registries("gpu")
    calls: list[str] = []

    async def invoke(name: str, args: dict[str, Any], *_: Any) -> Any:
        calls.append(name)
        return await plans.invoke(name, args)

    with pytest.raises(PlanRejected, match="runs only on the workers of task queue 'gpu'"):
        await execute_plan(PLAN, invoke, catalog=plans.catalog())
    assert calls == []


def test_the_tool_table_carries_routing_only_when_set() -> None:
    registry = ToolRegistry([lookup])
    registry.add(render, task_queue="gpu", max_per_second=2.5, max_concurrent=3)
    wire = PlanInput(plan=PLAN, tools=registry.options()).to_wire()
    assert "task_queue" not in wire["tools"]["lookup"]
    assert wire["tools"]["render"]["task_queue"] == "gpu"
    back = PlanInput.from_wire(wire).tools["render"]
    assert (back.task_queue, back.max_per_second, back.max_concurrent) == ("gpu", 2.5, 3)
    assert tool_queues(PLAN, registry.options()) == {"gpu": ["render"]}


def test_a_tool_worker_takes_its_queues_limits(client: Client) -> None:
    registry = ToolRegistry()
    registry.add(limited_call, task_queue="api", max_per_second=5, max_concurrent=4)
    worker = tool_worker(client, task_queue="api", registry=registry, max_concurrent_activities=9)
    config = worker.config()
    assert config.get("max_task_queue_activities_per_second") == 5
    assert config.get("max_concurrent_activities") == 4  # asked for more: the owner's bound
    assert config.get("workflows") in (None, [])
    with pytest.raises(ValueError, match="no tool of the registry runs on task queue 'gpu'"):
        tool_worker(client, task_queue="gpu", registry=registry)
    with pytest.raises(ValueError, match="the plan's own queue"):
        plan_worker(client, task_queue="api", registry=registry)


# -- durably ---------------------------------------------------------------------------------


async def _activity_queues(client: Client, workflow_id: str) -> dict[str, str]:
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    return {
        e.activity_task_scheduled_event_attributes.activity_id: (
            e.activity_task_scheduled_event_attributes.task_queue.name
        )
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    }


async def test_two_workers_on_two_queues_run_one_plan(
    client: Client, task_queue: str, workflow_id: str
) -> None:
    gpu_queue = f"{task_queue}-gpu"
    plans, gpu = split_registries(gpu_queue)
    async with (
        plan_worker(client, task_queue=task_queue, registry=plans),
        tool_worker(client, task_queue=gpu_queue, registry=gpu),
    ):
        result = await run_plan(
            client, PLAN, task_queue=task_queue, registry=plans, workflow_id=workflow_id
        )
    assert result.ok, result
    assert result.returned["draw"] == {"picture": "orc:12"}
    assert await _activity_queues(client, workflow_id) == {"find": task_queue, "draw": gpu_queue}


async def test_start_plan_warns_per_tool_queue_without_a_worker(
    client: Client, task_queue: str
) -> None:
    plans, _ = split_registries(f"{task_queue}-gpu")
    async with plan_worker(client, task_queue=task_queue, registry=plans):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            handle = await start_plan(client, PLAN, task_queue=task_queue, registry=plans)
        await handle.handle.terminate("test over")
    texts = [str(w.message) for w in caught if issubclass(w.category, NoWorkerWarning)]
    assert len(texts) == 1, texts
    assert f"{task_queue}-gpu" in texts[0] and "render" in texts[0]
    assert "tool_worker" in texts[0]


async def test_killing_a_tool_worker_stalls_only_its_tools_steps(
    temporal_target: str, client: Client, task_queue: str, tmp_path: Path
) -> None:
    """The tool worker dies in its step: the plan's other branch runs to its end on the plan
    worker meanwhile; the tool's step resumes on a replacement tool worker."""
    tool_queue = f"{task_queue}-tools"
    log = tmp_path / "effects.log"
    plan = {
        "steps": [
            {"id": "g1", "tool": "crash_combine", "args": {"values": [1, 2], "sleep_s": 3.0}},
            {"id": "p1", "tool": "crash_work", "args": {"value": 0, "sleep_s": 1.0}},
            {
                "id": "p2",
                "tool": "crash_work",
                "bind": {"value": "steps.p1.value"},
                "args": {"sleep_s": FAST_SLEEP_S},
            },
            {
                "id": "g2",
                "tool": "crash_combine",
                "bind": {"values": "[steps.g1.value, steps.p2.value]"},
                "args": {"sleep_s": FAST_SLEEP_S},
            },
        ]
    }
    from tests.crash_tools import crash_registry

    registry = crash_registry(route=tool_queue)
    (tmp_path / "t").mkdir()
    route = ("--route", tool_queue)
    async with (
        worker_processes(temporal_target, task_queue, log, tmp_path, *route) as spawn_plans,
        worker_processes(
            temporal_target, task_queue, log, tmp_path / "t", *route, "--tools-only"
        ) as spawn_tools,
    ):
        plan_proc = await spawn_plans()
        first_tools = await spawn_tools()
        handle = await start_plan(client, plan, task_queue=task_queue, registry=registry)
        await _until(lambda: any(e["step"] == "g1" for e in read_log(log)))
        first_tools.kill()
        await first_tools.proc.wait()
        # The plan's own branch finishes with no tool worker alive.
        await _until(lambda: any(e["step"] == "p2" and e["event"] == "done" for e in read_log(log)))
        assert not any(e["step"] == "g1" and e["event"] == "done" for e in read_log(log))
        second_tools = await spawn_tools()
        result = await asyncio.wait_for(handle.result(), 60)
    assert result.ok, result
    assert result.returned["g2"] == {"value": 5}  # g1 3, p2 2
    entries = read_log(log)
    pids = {e["step"]: {x["pid"] for x in entries if x["step"] == e["step"]} for e in entries}
    assert pids["p1"] == pids["p2"] == {plan_proc.proc.pid}
    assert pids["g1"] == {first_tools.proc.pid, second_tools.proc.pid}
    assert pids["g2"] <= {second_tools.proc.pid}
    queues = await _activity_queues(client, handle.id)
    assert queues == {"g1": tool_queue, "g2": tool_queue, "p1": task_queue, "p2": task_queue}


async def test_a_rate_limited_tool_holds_its_rate_across_plans(
    client: Client, task_queue: str
) -> None:
    """Eight plans at once, five calls each, on a tool limited to 10 calls a second: the
    server spaces the starts (a token bucket, so a short burst first), every plan ends ok."""
    api = f"{task_queue}-api"
    registry = ToolRegistry()
    registry.add(limited_call, task_queue=api, max_per_second=10)
    plan = {"steps": [{"id": f"c{n}", "tool": "limited_call", "args": {"n": n}} for n in range(5)]}
    STARTS.clear()
    async with (
        plan_worker(client, task_queue=task_queue, registry=registry),
        tool_worker(client, task_queue=api, registry=registry),
    ):
        results = await asyncio.gather(
            *(
                run_plan(
                    client,
                    plan,
                    task_queue=task_queue,
                    registry=registry,
                    workflow_id=f"{task_queue}-{uuid.uuid4().hex[:6]}",
                )
                for _ in range(8)
            )
        )
    assert all(r.ok for r in results)
    starts = sorted(t for t, _ in STARTS)
    assert len(starts) == 40
    # 40 calls at 10/s: the last starts no sooner than (40 - burst) / 10 s after the first.
    assert starts[-1] - starts[0] >= 2.0


async def _until(predicate: Any, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail("timed out waiting")
        await asyncio.sleep(0.05)
