"""Every path a call takes passes the same guards (issue 22, items 6, 8, 9, 14), on the
real dev server where it matters.

* Map and reduce items draw on the plan's one admission: its history guard, its bytes
  per workflow task, its pending activities; and a ``fail_fast`` stop withdraws the items
  it was holding back (before: a map of ten 200 KiB items ran past a 1 MiB history bound
  that ten plain steps respected, 1,000 items of 56 KiB were TERMINATED by the server at
  52.5 MB, and held items started after the stop).
* An agent step's ``output_schema`` runs its regexes on RE2: a backtracking pattern and
  the answer that would freeze Python's ``re`` leave the worker serving other plans.
* The owner's allow-list of the models an agent step may name.
* A gated tool is said to exist and to need a person, never "unknown tool".
* The plan workflow's input shows the plan first.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from strands import Agent
from temporalio.api.enums.v1 import EventType, WorkflowTaskFailedCause
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.strands_agents import StrandsPlugin

from durable_plan import ToolRegistry, check_plan, execute_plan, plan_worker, start_plan
from durable_plan.language.errors import PlanRejected
from durable_plan.strands.plugin import WorkflowPlanPlugin
from durable_plan.testing import ScriptedModel, TurnLike, call, output, say

EVIL = "a" * 40 + "!"


async def payload(n: int, kib: int) -> str:
    """A result of ``kib`` KiB."""
    return "p" * (kib * 1024)


async def take(n: int, blob: str) -> int:
    """Fails for item 0, at once; the others succeed."""
    if n == 0:
        raise RuntimeError("item 0 breaks")
    return len(blob)


async def look(name: str) -> dict[str, Any]:
    """Look something up; returns {"name": str}."""
    return {"name": name}


REGISTRY = ToolRegistry()
REGISTRY.add(payload, timeout_s=30, retries=0)
REGISTRY.add(take, timeout_s=30, retries=0)
REGISTRY.add(look, timeout_s=10)
REGISTRY.add(lambda x: x, name="needs_approval", requires_approval=True)


def failed_tasks(history: Any) -> list[Any]:
    """Workflow tasks that failed, but for the server's own flush of buffered events."""
    return [
        e
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED
        and e.workflow_task_failed_event_attributes.cause
        != WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_FORCE_CLOSE_COMMAND
    ]


async def run_durable(
    client: Client, task_queue: str, plan: dict[str, Any], **options: Any
) -> tuple[Any, Any, Any]:
    async with plan_worker(client, task_queue=task_queue, registry=REGISTRY):
        handle = await start_plan(client, plan, task_queue=task_queue, registry=REGISTRY, **options)
        result = await asyncio.wait_for(handle.result(), 240)
        description = await handle.handle.describe()
        history = await handle.handle.fetch_history()
    assert description.status == WorkflowExecutionStatus.COMPLETED
    assert not failed_tasks(history)
    return result, history, description


def history_size(description: Any) -> int:
    return int(description.raw_description.workflow_execution_info.history_size_bytes)


# -- 8: map items pass the plan's guards -------------------------------------------------------


def payload_map(items: int, kib: int, concurrency: int = 4) -> dict[str, Any]:
    return {
        "steps": [
            {
                "id": "m",
                "tool": "map",
                "args": {
                    "over": list(range(items)),
                    "concurrency": concurrency,
                    "do": {"tool": "payload", "args": {"kib": kib}, "bind": {"n": "item"}},
                },
            }
        ],
        "returns": [],
    }


async def test_a_maps_items_stop_at_the_plans_history_bound_as_steps_do(
    client: Client, task_queue: str
) -> None:
    bound = 1024 * 1024
    result, _, description = await run_durable(
        client, task_queue, payload_map(10, 200), max_history_bytes=bound
    )
    outcome = result.outcome("m")
    assert outcome.status == "failed"
    assert "near Temporal's limit per workflow" in (outcome.error or ""), outcome.error
    assert history_size(description) < bound + 300 * 1024, "items stopped near the bound"


async def test_a_thousand_item_map_of_large_results_ends_cleanly_at_the_default_bounds(
    client: Client, task_queue: str
) -> None:
    """1,000 items x 56 KiB (56 MB of results) under the default 40 MiB history guard: the
    map stops before Temporal's 50 MiB, with a message, and the workflow completes."""
    result, _, description = await run_durable(
        client, task_queue, payload_map(1000, 56, concurrency=16)
    )
    outcome = result.outcome("m")
    assert outcome.status == "failed"
    assert "near Temporal's limit per workflow" in (outcome.error or "")
    assert history_size(description) < 45 * 1024 * 1024


async def test_fail_fast_withdraws_the_items_a_map_holds_back(
    client: Client, task_queue: str
) -> None:
    """Items of 20 KiB arguments with a 32 KiB budget per workflow task go out one task at
    a time; item 0 fails: no item starts after its failure is known."""
    plan = {
        "steps": [
            {
                "id": "m",
                "tool": "map",
                "args": {
                    "over": [{"n": n, "blob": "b" * 20 * 1024} for n in range(10)],
                    "concurrency": 10,
                    "do": {"tool": "take", "bind": {"n": "item.n", "blob": "item.blob"}},
                },
            }
        ]
    }
    result, history, _ = await run_durable(client, task_queue, plan, max_task_bytes=32 * 1024)
    assert result.outcome("m").status == "failed"
    assert "item 0 failed" in (result.outcome("m").error or "")
    events = list(history.events)
    failed_at = next(
        e.event_id for e in events if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED
    )
    late = [
        e.activity_task_scheduled_event_attributes.activity_id
        for e in events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED and e.event_id > failed_at
    ]
    assert late == [], f"items started after item 0's failure: {late}"
    started = sum(e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED for e in events)
    assert started < 10, "some items were held back, and then withdrawn"


# -- 6: an agent step's output schema on RE2, durably ------------------------------------------

FROZEN_SCHEMA = {
    "type": "object",
    "properties": {"word": {"type": "string", "pattern": "^(a|a)+$"}},
    "required": ["word"],
}
SCRIPTS: dict[str, list[TurnLike]] = {
    "Say the word.": [output({"word": EVIL}), output({"word": EVIL})],
}


@pytest.fixture(scope="module")
async def agent_client(temporal_target: str) -> AsyncIterator[Client]:
    model = {"scripted": lambda: ScriptedModel(scripts=SCRIPTS)}
    yield await Client.connect(temporal_target, plugins=[StrandsPlugin(models=model)])


async def test_a_backtracking_output_pattern_does_not_freeze_the_worker(
    agent_client: Client, task_queue: str
) -> None:
    """Before: Python's re pinned a core holding the interpreter lock; the plan and its
    child stayed Running and other plans on the worker stopped."""
    plan = {
        "steps": [
            {
                "id": "say",
                "tool": "agent",
                "args": {
                    "prompt": "Say the word.",
                    "output_schema": FROZEN_SCHEMA,
                    "tools": ["look"],
                    "max_iterations": 2,
                },
            }
        ],
        "final": True,
    }
    other = {"steps": [{"id": "x", "tool": "look", "args": {"name": "still served"}}]}
    async with plan_worker(agent_client, task_queue=task_queue, registry=REGISTRY):
        frozen = await start_plan(
            agent_client, plan, task_queue=task_queue, registry=REGISTRY, model="scripted"
        )
        served = await start_plan(agent_client, other, task_queue=task_queue, registry=REGISTRY)
        assert (await asyncio.wait_for(served.result(), 30)).returned["x"] == {
            "name": "still served"
        }
        result = await asyncio.wait_for(frozen.result(), 60)
    step = result.returned["say"]
    assert step["final"] is False and step["output"] == {}, "never a made-up answer"


# -- 9: the models an agent step may name ------------------------------------------------------


def agent_step(model: str | None) -> dict[str, Any]:
    args: dict[str, Any] = {"prompt": "p", "output_schema": {"type": "object"}}
    if model is not None:
        args["model"] = model
    return {"steps": [{"id": "a", "tool": "agent", "args": args}]}


async def test_start_plan_refuses_a_model_the_owner_did_not_allow(
    client: Client, task_queue: str
) -> None:
    with pytest.raises(PlanRejected) as caught:
        await start_plan(
            client, agent_step("opus"), task_queue=task_queue, registry=REGISTRY, model="haiku"
        )
    [problem] = caught.value.problems
    assert problem.field == "args.model" and problem.code == "owner_rule"
    assert "may not name model 'opus'" in problem.message
    assert "leave model out" in problem.fix


def test_the_allow_list_takes_patterns_and_the_default_model_needs_no_name() -> None:
    from durable_plan.check import ToolCatalog

    catalog = ToolCatalog({}, default_model="haiku", models=["fast-*"])
    check_plan(agent_step(None), catalog=catalog)
    check_plan(agent_step("fast-small"), catalog=catalog)
    with pytest.raises(PlanRejected, match="the tools' owner allows fast-"):
        check_plan(agent_step("slow"), catalog=catalog)


async def test_a_plain_agents_plan_may_name_only_the_models_given_to_the_plugin() -> None:
    inner = ScriptedModel(script=[say("hi")])
    for model, allowed in (("helper", True), ("other", False)):
        plan = agent_step(model)
        agent = Agent(
            model=ScriptedModel(script=[call("submit_workflow_plan", **plan), say("done")]),
            tools=[look],
            plugins=[WorkflowPlanPlugin(models={"helper": inner})],
            callback_handler=None,
        )
        await agent.invoke_async("go")
        text = json.dumps(agent.messages)
        assert ("may not name model" in text) is not allowed, text[-500:]


# -- 14: a gated tool exists and needs a person ----------------------------------------------------


async def test_a_gated_tool_is_reported_as_needing_a_person_not_as_unknown() -> None:
    for plan, fld in (
        ({"steps": [{"id": "a", "tool": "needs_approval", "args": {"x": 1}}]}, "tool"),
        (
            {
                "steps": [
                    {
                        "id": "a",
                        "tool": "map",
                        "args": {
                            "over": [1],
                            "do": {"tool": "needs_approval", "bind": {"x": "item"}},
                        },
                    }
                ]
            },
            "args.do.tool",
        ),
        (
            {
                "steps": [
                    {
                        "id": "a",
                        "tool": "agent",
                        "args": {
                            "prompt": "p",
                            "output_schema": {"type": "object"},
                            "tools": ["needs_approval"],
                            "model": "m",
                        },
                    }
                ]
            },
            "args.tools",
        ),
    ):
        with pytest.raises(PlanRejected) as caught:
            await execute_plan(plan, REGISTRY, models={"m": ScriptedModel(script=[say("x")])})
        problem = next(p for p in caught.value.problems if p.field == fld)
        assert "unknown tool" not in problem.message
        assert "exists" in problem.message and "human approval" in problem.message
        assert "call 'needs_approval' directly" in problem.fix


def test_excluded_and_gated_says_it_needs_a_person() -> None:
    catalog = REGISTRY.catalog(["*", "!needs_approval"])
    with pytest.raises(PlanRejected) as caught:
        check_plan({"steps": [{"id": "a", "tool": "needs_approval"}]}, catalog=catalog)
    assert "human approval" in caught.value.problems[0].message


# -- 12: the web UI shows the plan first -------------------------------------------------------


async def test_the_plan_workflows_input_starts_with_the_plan(
    client: Client, task_queue: str
) -> None:
    plan = {"steps": [{"id": "x", "tool": "look", "args": {"name": "first"}}]}
    _, history, _ = await run_durable(client, task_queue, plan)
    started = history.events[0].workflow_execution_started_event_attributes
    text = started.input.payloads[0].data.decode()
    assert text.startswith('{"plan":'), text[:80]
    assert list(json.loads(text)) == ["plan", "settings", "tools"]
