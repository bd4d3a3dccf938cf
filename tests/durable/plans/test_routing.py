"""Per-tool task queues and limits: a tool's steps run on its own workers, a limited tool's
calls are held to its rate across plans, and the check knows where each tool runs."""

from __future__ import annotations

import asyncio
import json
import signal
import time
import uuid
import warnings
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from strands.types.tools import ToolUse
from temporalio import activity
from temporalio.api.enums.v1 import EventType, TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client
from temporalio.strands_agents import StrandsPlugin

from durable_plan import model_worker, plan_worker, run_plan, start_plan, tool_worker
from durable_plan.check import check_plan
from durable_plan.language.errors import PlanRejected
from durable_plan.language.plan import PlanResult
from durable_plan.language.routing import queue_limits
from durable_plan.local.runner import execute_plan
from durable_plan.server.devserver import TUNED_DYNAMIC_CONFIG, DevServer
from durable_plan.temporal.client.start import (
    NoWorkerError,
    NoWorkerWarning,
    plan_input,
    tool_queues,
)
from durable_plan.temporal.wire.workflow_inputs import PlanInput
from durable_plan.temporal.workflows.agent_tools import durable_tools
from durable_plan.testing import ScriptedModel, call, output
from durable_plan.tools.registry import ToolRegistry
from tests.support.crash_tools import FAST_SLEEP_S
from tests.support.helpers import ROOT, arun_cli, finish, spawn_cli
from tests.support.worker_processes import read_log, worker_processes

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
    with pytest.raises(ValueError, match="no queue of its own"):
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
        queue_limits(registry.routed_to("api"), "api")


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
    assert [t.name for t in later.routed_to("gpu")] == ["render"]
    assert later.routed_to("plans") == []


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
    checked = check_plan(PLAN, catalog=registry.catalog(durable=True), durable=True)
    assert tool_queues(checked, registry.options()) == {"gpu": ["render"]}


def test_the_queues_a_plan_needs_are_read_from_the_checked_plan() -> None:
    """Agent steps' tool patterns resolve as the workflow resolves them (no ``tools``: all);
    a ``tool`` key inside arguments names nothing; the model queue only with an agent step."""
    registry = ToolRegistry([lookup])
    registry.add(render, task_queue="gpu")
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}}
    catalog = replace(registry.catalog(durable=True), default_model="m")

    def queues(plan: dict[str, Any]) -> dict[str, list[str]]:
        checked = check_plan(plan, catalog=catalog, durable=True)
        return tool_queues(checked, registry.options(), model_task_queue="models")

    agent = {"prompt": "Draw.", "output_schema": schema}
    everything = {"steps": [{"id": "a", "tool": "agent", "args": agent}]}
    assert queues(everything) == {"gpu": ["render"], "models": ["agent steps' model calls"]}
    pattern = {"steps": [{"id": "a", "tool": "agent", "args": {**agent, "tools": ["rend*"]}}]}
    assert queues(pattern)["gpu"] == ["render"]
    looked = {"steps": [{"id": "a", "tool": "agent", "args": {**agent, "tools": ["look*"]}}]}
    assert queues(looked) == {"models": ["agent steps' model calls"]}
    mapped = {
        "steps": [
            {
                "id": "m",
                "tool": "map",
                "args": {"over": [1], "do": {"tool": "render", "args": {"name": "x", "hp": 1}}},
            }
        ]
    }
    assert queues(mapped) == {"gpu": ["render"]}
    literal = {"steps": [{"id": "l", "tool": "lookup", "args": {"name": "x"}}]}
    assert queues(literal) == {}


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


async def _run_split(
    client: Client, plan: dict[str, Any], task_queue: str, workflow_id: str
) -> PlanResult:
    """``plan`` on a plan worker and a GPU tool worker (``split_registries``)."""
    plans, gpu = split_registries(f"{task_queue}-gpu")
    async with (
        plan_worker(client, task_queue=task_queue, registry=plans),
        tool_worker(client, task_queue=f"{task_queue}-gpu", registry=gpu),
    ):
        return await run_plan(
            client, plan, task_queue=task_queue, registry=plans, workflow_id=workflow_id
        )


async def test_two_workers_on_two_queues_run_one_plan(
    client: Client, task_queue: str, workflow_id: str
) -> None:
    gpu_queue = f"{task_queue}-gpu"
    result = await _run_split(client, PLAN, task_queue, workflow_id)
    assert result.ok, result
    assert result.returned["draw"] == {"picture": "orc:12"}
    assert await _activity_queues(client, workflow_id) == {"find": task_queue, "draw": gpu_queue}


async def test_if_no_worker_raise_refuses_a_plan_whose_tool_queue_has_none(
    client: Client, task_queue: str
) -> None:
    plans, _ = split_registries(f"{task_queue}-gpu")
    async with plan_worker(client, task_queue=task_queue, registry=plans):
        with pytest.raises(NoWorkerError, match=f"no worker polls task queue '{task_queue}-gpu'"):
            await start_plan(
                client, PLAN, task_queue=task_queue, registry=plans, if_no_worker="raise"
            )
    started = [w.id async for w in client.list_workflows(f"TaskQueue = '{task_queue}'")]
    assert started == []


async def test_start_plan_names_model_worker_for_a_model_queue_without_one(
    client: Client, task_queue: str
) -> None:
    plans, _ = split_registries(f"{task_queue}-gpu")
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}}
    plan = {
        "steps": [
            {
                "id": "a",
                "tool": "agent",
                "args": {"prompt": "Look.", "output_schema": schema, "tools": ["lookup"]},
            }
        ]
    }
    async with plan_worker(client, task_queue=task_queue, registry=plans):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            handle = await start_plan(
                client,
                plan,
                task_queue=task_queue,
                registry=plans,
                model="scripted",
                model_task_queue=f"{task_queue}-models",
            )
        await handle.handle.terminate("test over")
    texts = [str(w.message) for w in caught if issubclass(w.category, NoWorkerWarning)]
    assert len(texts) == 1, texts  # the gpu queue is not needed: the agent may not render
    assert f"no worker polls task queue '{task_queue}-models'" in texts[0]
    assert "model_worker(client" in texts[0] and "tool_worker" not in texts[0]


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
    from tests.support.crash_tools import crash_registry

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


async def _until_waiting(client: Client, task_queue: str, tasks: int) -> None:
    """Until ``tasks`` activity tasks wait on the queue (the server's backlog count, which
    only grows while no worker polls it)."""
    request = DescribeTaskQueueRequest(
        namespace=client.namespace,
        task_queue=TaskQueue(name=task_queue),
        task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY,
        report_stats=True,
    )
    deadline = time.monotonic() + 30
    while True:
        described = await client.workflow_service.describe_task_queue(request)
        waiting = described.stats.approximate_backlog_count
        if waiting >= tasks:
            return
        if time.monotonic() > deadline:
            pytest.fail(f"{waiting} of {tasks} activity tasks wait on {task_queue!r}")
        await asyncio.sleep(0.05)


async def _until(predicate: Any, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail("timed out waiting")
        await asyncio.sleep(0.05)


# -- the check, the command line, maps, agent steps and fairness ------------------------------


def test_a_hand_made_tool_table_with_limits_but_no_queue_is_refused_by_the_check() -> None:
    """Registration refuses it (above); a tool table built by hand reaches the check."""
    table = ToolRegistry([lookup]).options()
    table["lookup"] = replace(table["lookup"], max_per_second=5.0)
    with pytest.raises(PlanRejected) as caught:
        plan_input({"steps": [{"id": "a", "tool": "lookup", "args": {"name": "x"}}]}, table)
    text = str(caught.value)
    assert "tool 'lookup' cannot be planned" in text
    assert "no queue of its own" in text and "step 'a'" in text


async def test_a_maps_items_run_on_their_tools_queue(
    client: Client, task_queue: str, workflow_id: str
) -> None:
    gpu_queue = f"{task_queue}-gpu"
    plan = {
        "steps": [
            {
                "id": "draws",
                "tool": "map",
                "args": {
                    "over": ["orc", "elf", "imp"],
                    "do": {"tool": "render", "args": {"hp": 1}, "bind": {"name": "item"}},
                },
            }
        ]
    }
    result = await _run_split(client, plan, task_queue, workflow_id)
    assert result.ok, result
    assert [r["picture"] for r in result.returned["draws"]["results"]] == [
        "orc:1",
        "elf:1",
        "imp:1",
    ]
    queues = await _activity_queues(client, workflow_id)
    assert sorted(queues.values()) == [gpu_queue] * 3


async def test_two_command_line_workers_each_serve_their_part_of_the_tools(
    temporal_target: str, task_queue: str, workflow_id: str
) -> None:
    # The in-process `run` below reads the module this process imported (once, with
    # whatever queue it named then): the workers take that same queue from the environment.
    from examples.routed_tools import STORY_QUEUE as story

    env = {"DURABLE_PLAN_STORY_QUEUE": story}
    tools = ("--tools", "examples.routed_tools")
    address = ("--address", temporal_target)
    plans = await spawn_cli("worker", *tools, "--task-queue", task_queue, *address, env=env)
    storyteller = await spawn_cli(
        "worker", *tools, "--tools-only", "--task-queue", story, *address, env=env
    )
    try:
        banners = []
        for proc in (plans, storyteller):
            assert proc.stdout is not None
            banners.append((await asyncio.wait_for(proc.stdout.readline(), 60)).decode())
        assert banners[0].startswith("worker: 10 tools (look_up_monster, ")
        assert f"narrate_round run on task queue '{story}'" in banners[0]
        assert banners[1].startswith(
            "worker (tools only): 1 tool (narrate_round), at most 2 calls/s, at most 4 at "
            f"once on this worker on task queue '{story}'"
        )
        ran = await arun_cli(
            "run",
            str(ROOT / "examples" / "plans" / "party_round.yaml"),
            *tools,
            "--no-worker",
            "--task-queue",
            task_queue,
            "--workflow-id",
            workflow_id,
            *address,
            env=env,
        )
        assert ran.returncode == 0, ran.stderr
        assert "narrate" in json.loads(ran.stdout)["returned"]
        for proc in (plans, storyteller):
            proc.send_signal(signal.SIGTERM)
        for proc in (plans, storyteller):
            code, _, err = await finish(proc, 60)
            assert code == 0, err
    finally:
        for proc in (plans, storyteller):
            if proc.returncode is None:
                proc.kill()
    client = await Client.connect(temporal_target)
    queues = await _activity_queues(client, workflow_id)
    assert queues.pop("narrate") == story
    assert set(queues.values()) == {task_queue}


async def test_a_tools_only_worker_for_a_queue_without_tools_says_so(
    temporal_target: str,
) -> None:
    ran = await arun_cli(
        "worker",
        "--tools",
        "examples.routed_tools",
        "--tools-only",
        "--task-queue",
        "nothing-here",
        "--address",
        temporal_target,
    )
    assert ran.returncode == 2
    assert "no tool of the registry runs on task queue 'nothing-here'" in ran.stderr
    assert "(queues routed: " in ran.stderr  # the module's own (its queue comes from env)


def _scripted_model() -> ScriptedModel:
    return ScriptedModel(
        scripts={
            "Draw the orc.": [
                call("render", name="orc", hp=3),
                output({"done": True}),
            ]
        }
    )


async def test_an_agent_steps_model_calls_and_tools_run_on_their_own_queues(
    temporal_target: str, task_queue: str, workflow_id: str
) -> None:
    """The model's credentials on one machine (model_worker), the tool's on another
    (tool_worker); the plan's worker runs the loop in workflow code only."""
    client = await Client.connect(
        temporal_target, plugins=[StrandsPlugin(models={"scripted": _scripted_model})]
    )
    gpu_queue, model_queue = f"{task_queue}-gpu", f"{task_queue}-models"
    plans, gpu = split_registries(gpu_queue)
    plan = {
        "steps": [
            {
                "id": "artist",
                "tool": "agent",
                "args": {
                    "prompt": "Draw the orc.",
                    "tools": ["render"],
                    "output_schema": {
                        "type": "object",
                        "properties": {"done": {"type": "boolean"}},
                        "required": ["done"],
                    },
                },
            }
        ]
    }
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        async with (
            plan_worker(client, task_queue=task_queue, registry=plans),
            tool_worker(client, task_queue=gpu_queue, registry=gpu),
            model_worker(client, task_queue=model_queue),
        ):
            result = await run_plan(
                client,
                plan,
                task_queue=task_queue,
                registry=plans,
                workflow_id=workflow_id,
                model="scripted",
                model_task_queue=model_queue,
            )
    assert not [w for w in caught if issubclass(w.category, NoWorkerWarning)]
    assert result.ok, result
    assert result.returned["artist"]["output"] == {"done": True}
    child = client.get_workflow_handle(f"{workflow_id}/agent/artist")
    history = await child.fetch_history()
    scheduled = [
        (
            e.activity_task_scheduled_event_attributes.activity_type.name,
            e.activity_task_scheduled_event_attributes.task_queue.name,
        )
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]
    assert scheduled == [
        ("invoke_model", model_queue),
        ("render", gpu_queue),
        ("invoke_model", model_queue),
    ]


def test_a_model_worker_needs_the_strands_plugin(client: Client) -> None:
    with pytest.raises(ValueError, match=r"StrandsPlugin\(models=...\)"):
        model_worker(client, task_queue="models")


@pytest.mark.parametrize("fairness", [True, False], ids=["fairness", "fifo"])
async def test_fairness_serves_a_second_conversation_in_turn(fairness: bool) -> None:
    """On a server with task-queue fairness on, a plan's calls to a limited tool are keyed
    by whose they are: B's 2 calls, made after A's 40 wait, start among A's first; on the
    same server without fairness they start after all of A's. (One partition per queue, so
    the order without fairness is strictly first come, first served: with the default four,
    B's calls land behind a quarter of A's each, and how late varies from run to run.)"""
    config = {
        **TUNED_DYNAMIC_CONFIG,
        "matching.enableFairness": fairness,
        "matching.numTaskqueueReadPartitions": 1,
        "matching.numTaskqueueWritePartitions": 1,
    }
    with DevServer(headless=True, dynamic_config=config) as server:
        client = await server.connect()
        registry = ToolRegistry()
        registry.add(limited_call, task_queue="api", max_per_second=10)

        def fan(n: int) -> dict[str, Any]:
            steps = [{"id": f"c{i}", "tool": "limited_call", "args": {"n": i}} for i in range(n)]
            return {"steps": steps}

        STARTS.clear()
        async with plan_worker(client, task_queue="plans", registry=registry):
            # The calls wait on the tool's queue before any tool worker polls it: the order
            # they arrived in is then exact (a history's ActivityTaskScheduled reaches the
            # queue a moment later, so "A's 40 are in A's history" is not "A's 40 wait").
            a = [  # one conversation's two plans: their calls share its key
                await start_plan(
                    client,
                    fan(20),
                    task_queue="plans",
                    registry=registry,
                    fairness_key="a",
                    if_no_worker="ignore",
                )
                for _ in range(2)
            ]
            await _until_waiting(client, "api", 40)
            b = await start_plan(
                client,
                fan(2),
                task_queue="plans",
                registry=registry,
                fairness_key="b",
                if_no_worker="ignore",
            )
            await _until_waiting(client, "api", 42)
            async with tool_worker(client, task_queue="api", registry=registry):
                results = await asyncio.gather(*(h.result() for h in (*a, b)))
            assert all(r.ok for r in results)
    order = [wf for _, wf in sorted(STARTS)]
    assert len(order) == 42
    last_b = max(i for i, wf in enumerate(order) if wf == b.id)
    if fairness:
        assert last_b < 21, order  # measured: B's last call was call 11-16 of 42
    else:
        assert min(i for i, wf in enumerate(order) if wf == b.id) >= 40, order


async def test_run_with_its_own_worker_serves_the_routed_queues_too(
    temporal_target: str, client: Client, workflow_id: str
) -> None:
    """`durable-plan run` has every tool's code: its own worker serves the tools' queues."""
    ran = await arun_cli(
        "run",
        str(ROOT / "examples" / "plans" / "party_round.yaml"),
        "--tools",
        "examples.routed_tools",
        "--workflow-id",
        workflow_id,
        "--address",
        temporal_target,
    )
    assert ran.returncode == 0, ran.stderr
    queues = await _activity_queues(client, workflow_id)
    assert queues.pop("narrate") != queues["monster"]


async def test_in_process_a_limited_tools_calls_keep_its_limits() -> None:
    """No server holds the limits in-process: the registry does, per process (one second's
    burst, then the rate; never more than max_concurrent at once)."""
    running: list[int] = [0]
    most: list[int] = [0]
    starts: list[float] = []

    async def limited(n: int) -> dict[str, Any]:
        """Returns {"n": int}."""
        starts.append(time.monotonic())
        running[0] += 1
        most[0] = max(most[0], running[0])
        await asyncio.sleep(0.05)
        running[0] -= 1
        return {"n": n}

    registry = ToolRegistry()
    registry.add(limited, task_queue="api", max_per_second=20, max_concurrent=3)
    plan = {
        "steps": [
            {
                "id": "all",
                "tool": "map",
                "args": {
                    "over": list(range(30)),
                    "concurrency": 16,
                    "do": {"tool": "limited", "bind": {"n": "item"}},
                },
            }
        ]
    }
    result = await execute_plan(plan, registry)
    assert result.ok, result
    assert most[0] == 3
    # 30 starts at 20/s with a burst of 20: the last no sooner than (30 - 20) / 20 s after.
    assert starts[-1] - starts[0] >= 0.45


class _AtOnce:
    """The most calls of the tools under test that ran at once (a counter, not timing)."""

    def __init__(self) -> None:
        self.running = 0
        self.most = 0

    async def call(self, n: int) -> dict[str, Any]:
        self.running += 1
        self.most = max(self.most, self.running)
        await asyncio.sleep(0.01)  # each call yields, so calls not held back overlap
        self.running -= 1
        return {"n": n}


def _six_steps(tool: str) -> dict[str, Any]:
    """Six independent steps of ``tool``: nothing but the queue's limits holds them back."""
    return {"steps": [{"id": f"s{n}", "tool": tool, "args": {"n": n}} for n in range(6)]}


def _limiters_of(queue: str) -> list[dict[str, Any]]:
    """The limits of every in-process limiter this event loop holds for ``queue`` (a queue
    name of the test's own: the tests share one event loop)."""
    from durable_plan.tools import queue_limiter as limits

    held = limits._LIMITERS.get(asyncio.get_running_loop(), {})
    return [limiter.limits for (name, _), limiter in held.items() if name == queue]


async def test_in_process_a_queues_limits_hold_its_tools_that_state_none(task_queue: str) -> None:
    """A tool stating no limit on a queue another tool limits to one call at once: six steps
    of it run one at a time in-process, as the queue's worker would run them."""
    at_once = _AtOnce()

    async def limited(n: int) -> dict[str, Any]:
        """Returns {"n": int}."""
        return await at_once.call(n)

    async def unstated(n: int) -> dict[str, Any]:
        """Returns {"n": int}."""
        return await at_once.call(n)

    registry = ToolRegistry()
    registry.add(limited, task_queue=task_queue, max_concurrent=1)
    registry.add(unstated, task_queue=task_queue)
    result = await execute_plan(_six_steps("unstated"), registry)
    assert result.ok, result
    assert at_once.most == 1

    # The model's direct calls of it in-process (a plain Strands agent): the same limiter.
    [direct] = [t for t in durable_tools(registry) if t.tool_name == "unstated"]

    async def call_directly(n: int) -> Any:
        use: ToolUse = {"toolUseId": f"t{n}", "name": "unstated", "input": {"n": n}}
        return [event async for event in direct.stream(use, {})]

    at_once.most = 0
    await asyncio.gather(*(call_directly(n) for n in range(6)))
    assert at_once.most == 1


@pytest.mark.parametrize("first", ["paced", "single"])
async def test_in_process_a_queue_has_one_limiter_whichever_tool_runs_first(
    first: str, task_queue: str
) -> None:
    """Two tools of one queue stating different kinds of limit (a rate, calls at once): the
    queue's limiter holds both limits for both tools, whichever is called first."""
    at_once = _AtOnce()

    async def paced(n: int) -> dict[str, Any]:
        """Returns {"n": int}."""
        return await at_once.call(n)

    async def single(n: int) -> dict[str, Any]:
        """Returns {"n": int}."""
        return await at_once.call(n)

    registry = ToolRegistry()
    registry.add(paced, task_queue=task_queue, max_per_second=1000)
    registry.add(single, task_queue=task_queue, max_concurrent=1)
    second = "single" if first == "paced" else "paced"
    for tool in (first, second):
        result = await execute_plan(_six_steps(tool), registry)
        assert result.ok, result
    assert at_once.most == 1
    merged = {"max_task_queue_activities_per_second": 1000, "max_concurrent_activities": 1}
    assert _limiters_of(task_queue) == [merged]


async def test_in_process_and_worker_limits_of_a_queue_are_one_merge(
    client: Client, task_queue: str
) -> None:
    """Parity: the limiter of a queue's in-process calls and its worker's options come from
    the registry's one merge of the queue's limits (``ToolRegistry.queue_limits``)."""
    at_once = _AtOnce()

    async def paced(n: int) -> dict[str, Any]:
        """Returns {"n": int}."""
        return await at_once.call(n)

    async def unstated(n: int) -> dict[str, Any]:
        """Returns {"n": int}."""
        return await at_once.call(n)

    registry = ToolRegistry()
    registry.add(paced, task_queue=task_queue, max_per_second=50)
    registry.add(limited_call, task_queue=task_queue, max_concurrent=2)
    registry.add(unstated, task_queue=task_queue)
    config = tool_worker(client, task_queue=task_queue, registry=registry).config()
    worker_limits = {
        key: config.get(key)
        for key in ("max_task_queue_activities_per_second", "max_concurrent_activities")
    }
    assert worker_limits == registry.queue_limits(task_queue)
    assert worker_limits == {
        "max_task_queue_activities_per_second": 50,
        "max_concurrent_activities": 2,
    }
    result = await execute_plan(_six_steps("unstated"), registry)
    assert result.ok, result
    assert at_once.most == 2
    assert _limiters_of(task_queue) == [worker_limits]


def test_in_process_limiters_of_closed_event_loops_are_let_go() -> None:
    """A semaphore that made a call wait holds its event loop strongly, so the per-loop
    table kept one entry per ``asyncio.run`` for good."""
    import asyncio

    from durable_plan.tools import queue_limiter as limits

    async def contend() -> None:
        async def one() -> None:
            async with limits.call_slot("leak-q", {"max_concurrent_activities": 1}):
                await asyncio.sleep(0)

        await asyncio.gather(one(), one())

    for _ in range(5):
        asyncio.run(contend())
    assert sum(1 for loop in list(limits._LIMITERS) if loop.is_closed()) <= 1
