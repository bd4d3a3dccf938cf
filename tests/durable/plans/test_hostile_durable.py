"""Hostile plans on the real dev server: every workflow closes, and the worker stays healthy.

One test per defect of issue 8 that only shows durably. Each runs the hostile
plan, asserts the workflow closed (completed with a failed step, or failed
with a clear message; never Running with a workflow task retried forever), and
then runs a healthy plan on the *same* worker to show nothing was left
spinning or locked.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from temporalio import activity
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.exceptions import ApplicationError
from temporalio.strands_agents import StrandsPlugin
from temporalio.worker import Worker

from durable_plan import plan_worker, run_plan, start_plan
from durable_plan.language.plan import PlanResult
from durable_plan.language.plan_limits import MAX_ERROR_CHARS
from durable_plan.testing import ScriptedModel, TurnLike, model_calls, say
from durable_plan.testing.scripted_model import ToolCall
from durable_plan.tools.registry import ToolRegistry
from worker import build_worker
from workflows.game_master import GameMasterInput, GameMasterWorkflow

RESULT_TIMEOUT_S = 60.0
EFFECTS: list[str] = []


async def echo(value: Any) -> Any:
    """Return ``value``."""
    return value


async def text(kib: int) -> dict[str, Any]:
    """A document of ``kib`` KiB."""
    return {"text": "x" * (kib * 1024)}


async def shout(kib: int) -> None:
    """Fail with an error message of ``kib`` KiB."""
    raise ValueError("y" * (kib * 1024))


async def huge_number() -> dict[str, Any]:
    """Record a side effect, then return an integer no JSON reader can take."""
    EFFECTS.append("huge_number")
    return {"n": 10**5000}


async def odd_details() -> None:
    """Fail with the tool's own ApplicationError whose details are not ours."""
    raise ApplicationError("the tool gave up", {"attempt": "n/a", "duration_ms": "?"})


@activity.defn
async def send_mail(to: str, subject: str = "(no subject)", urgent: bool = False) -> dict[str, Any]:
    """An existing activity with optional parameters."""
    return {"to": to, "subject": subject, "urgent": urgent}


def registry() -> ToolRegistry:
    tools = ToolRegistry()
    for fn in (echo, text, huge_number, odd_details):
        tools.add(fn)
    tools.add(shout, retries=0)
    tools.add(send_mail)
    return tools


REGISTRY = registry()
HEALTHY = {"steps": [{"id": "a", "tool": "echo", "args": {"value": {"ok": True}}}]}


@pytest.fixture
async def worker(client: Client, task_queue: str) -> AsyncIterator[Worker]:
    async with plan_worker(client, task_queue=task_queue, registry=REGISTRY) as running:
        yield running


async def run(client: Client, task_queue: str, plan: dict[str, Any], **kw: Any) -> PlanResult:
    return await asyncio.wait_for(
        run_plan(client, plan, task_queue=task_queue, registry=REGISTRY, **kw), RESULT_TIMEOUT_S
    )


async def still_healthy(client: Client, task_queue: str) -> None:
    result = await run(client, task_queue, HEALTHY)
    assert result.returned == {"a": {"ok": True}}


def binding_plan(source: str) -> dict[str, Any]:
    return {
        "steps": [
            {"id": "seed", "tool": "echo", "args": {"value": {"n": 1}}},
            {"id": "x", "tool": "echo", "bind": {"value": source}},
        ],
        "on_error": "continue",
    }


# -- 1, 2: hostile expressions in workflow code ---------------------------------------------


async def test_catastrophic_regex_neither_freezes_the_worker_nor_sticks(
    client: Client, task_queue: str, worker: Worker
) -> None:
    source = "$contains('" + "a" * 3000 + "!', /^(a+)+$/) and steps.seed.n = 1"
    slow_neighbour = asyncio.create_task(
        run(
            client,
            task_queue,
            {"steps": [{"id": "a", "tool": "echo", "args": {"value": 1}}]},
        )
    )
    result = await run(client, task_queue, binding_plan(source))
    assert result.outcome("x").status == "ok"
    assert result.returned["x"] is False
    assert (await slow_neighbour).outcome("a").status == "ok"
    await still_healthy(client, task_queue)


@pytest.mark.parametrize(
    "source",
    [
        "($f := function($n){$f($n+1)}; $f(steps.seed.n))",
        "$sum([steps.seed.n..10000000])",
        "$reduce([1..2000], function($a, $x){$a * $a}, steps.seed.n + 2)",
    ],
    ids=["tail-call", "big-range", "integer-explosion"],
)
async def test_runaway_jsonata_fails_the_step_and_the_workflow_completes(
    client: Client, task_queue: str, worker: Worker, source: str
) -> None:
    plan = binding_plan(source)
    handle = await start_plan(client, plan, task_queue=task_queue, registry=REGISTRY)
    result = await asyncio.wait_for(handle.result(), RESULT_TIMEOUT_S)
    outcome = result.outcome("x")
    assert outcome.status == "failed"
    assert "binding 'value'" in (outcome.error or "") and "limit" in (outcome.error or "")
    description = await handle.handle.describe()
    assert description.status == WorkflowExecutionStatus.COMPLETED
    history = await handle.handle.fetch_history()
    failed_tasks = [
        e for e in history.events if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED
    ]
    assert failed_tasks == [], "no 'Potential deadlock detected' workflow task failures"
    await still_healthy(client, task_queue)


# -- 3: the whole result is bounded ----------------------------------------------------------


async def test_many_huge_errors_make_a_bounded_result(
    client: Client, task_queue: str, worker: Worker
) -> None:
    steps = [{"id": f"s{i}", "tool": "shout", "args": {"kib": 200}} for i in range(12)]
    result = await run(client, task_queue, {"steps": steps, "on_error": "continue"})
    assert [o.status for o in result.ledger] == ["failed"] * 12
    for outcome in result.ledger:
        assert len(outcome.error or "") <= MAX_ERROR_CHARS
        assert "characters cut" in (outcome.error or "")
    assert len(json.dumps(result.model_dump(mode="json"))) < 64 * 1024
    await still_healthy(client, task_queue)


async def test_results_over_the_returned_limit_come_back_as_previews(
    client: Client, task_queue: str, worker: Worker
) -> None:
    """The plan's answer stays under the payload limit without failing the plan that did
    its work (issue 22, 4): what does not fit is a preview naming its size."""
    steps = [{"id": f"t{i}", "tool": "text", "args": {"kib": 200}} for i in range(3)]
    result = await run(client, task_queue, {"steps": steps}, max_returned_bytes=300 * 1024)
    assert [o.status for o in result.ledger] == ["ok", "ok", "ok"]
    previews = [k for k, v in result.returned.items() if isinstance(v, dict) and "$preview" in v]
    assert previews == ["t1", "t2"]
    await still_healthy(client, task_queue)


async def test_steps_stop_starting_before_the_history_limit(
    client: Client, task_queue: str, worker: Worker
) -> None:
    chain = [{"id": "t0", "tool": "text", "args": {"kib": 200}}]
    for i in range(1, 6):
        chain.append({"id": f"t{i}", "tool": "text", "args": {"kib": 200}, "after": [f"t{i - 1}"]})
    plan = {"steps": chain, "returns": ["t0"]}
    result = await run(client, task_queue, plan, max_history_bytes=1200 * 1024)
    statuses = [o.status for o in result.ledger]
    assert statuses[0] == "ok"
    assert "failed" in statuses, statuses
    failed = next(o for o in result.ledger if o.status == "failed")
    assert "near Temporal's limit per workflow" in (failed.error or "")
    await still_healthy(client, task_queue)


# -- 4: a wide fan-out of large arguments is paced over several workflow tasks ---------------


async def test_wide_fan_out_of_large_arguments_is_paced_under_the_message_limit(
    client: Client, task_queue: str, worker: Worker
) -> None:
    # Each fan-out step carries the whole 200 KiB document as an argument.
    fan = [{"id": f"f{i}", "tool": "echo", "bind": {"value": "steps.doc.text"}} for i in range(24)]
    plan = {
        "steps": [{"id": "doc", "tool": "text", "args": {"kib": 200}}, *fan],
        "returns": ["doc"],
    }
    handle = await start_plan(client, plan, task_queue=task_queue, registry=REGISTRY)
    result = await asyncio.wait_for(handle.result(), RESULT_TIMEOUT_S)
    assert all(o.status == "ok" for o in result.ledger)
    history = await handle.handle.fetch_history()
    scheduled_per_task: list[int] = []
    for event in history.events:
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
            scheduled_per_task.append(0)
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED and (
            event.activity_task_scheduled_event_attributes.activity_id.startswith("f")
        ):
            scheduled_per_task[-1] += 1
    busy = [n for n in scheduled_per_task if n]
    assert sum(busy) == 24
    assert max(busy) <= 5, f"at most ~1 MiB of arguments per workflow task: {busy}"
    await still_healthy(client, task_queue)


# -- 10, 12, 13: tool results and errors -----------------------------------------------------


async def test_a_result_with_a_huge_integer_fails_once_without_retries(
    client: Client, task_queue: str, worker: Worker
) -> None:
    EFFECTS.clear()
    result = await run(client, task_queue, {"steps": [{"id": "a", "tool": "huge_number"}]})
    outcome = result.outcome("a")
    assert outcome.status == "failed"
    assert "64 bits" in (outcome.error or "")
    assert EFFECTS == ["huge_number"], "non-retryable: the side effect ran once"
    await still_healthy(client, task_queue)


async def test_a_tools_own_application_error_with_odd_details_fails_only_its_step(
    client: Client, task_queue: str, worker: Worker
) -> None:
    plan = {
        "steps": [
            {"id": "odd", "tool": "odd_details", "retries": 0},
            {"id": "fine", "tool": "echo", "args": {"value": 2}},
        ],
        "on_error": "continue",
    }
    result = await run(client, task_queue, plan)
    assert result.outcome("odd").status == "failed"
    assert result.outcome("odd").error == "the tool gave up"
    assert result.outcome("fine").status == "ok"


async def test_an_existing_activitys_optional_parameters_get_their_defaults(
    client: Client, task_queue: str, worker: Worker
) -> None:
    plan = {
        "steps": [
            {"id": "plain", "tool": "send_mail", "args": {"to": "ann"}},
            {"id": "skip", "tool": "send_mail", "args": {"to": "bob", "urgent": True}},
        ]
    }
    result = await run(client, task_queue, plan)
    assert result.returned["plain"] == {"to": "ann", "subject": "(no subject)", "urgent": False}
    assert result.returned["skip"] == {"to": "bob", "subject": "(no subject)", "urgent": True}


# -- 5, 6: inside a TemporalAgent --------------------------------------------------------------

LONG_ID = "tooluse_" + "z" * 1500
HUGE_PLAN = {"steps": [{"id": f"s{i}", "tool": "look_up_monster"} for i in range(4000)]}
ATTACK = {
    "steps": [{"id": "lookup", "tool": "look_up_monster", "args": {"name": "goblin"}}],
    "final": True,
}
SCRIPTS: dict[str, list[TurnLike]] = {
    "long id": [ToolCall("submit_workflow_plan", ATTACK, tool_use_id=LONG_ID)],
    "huge plan": [
        ToolCall("submit_workflow_plan", HUGE_PLAN),
        say("Too many steps; I will plan less."),
    ],
}


@pytest.fixture(scope="module")
async def agent_client(temporal_target: str) -> AsyncIterator[Client]:
    model = {"scripted": lambda: ScriptedModel(scripts=SCRIPTS)}
    yield await Client.connect(temporal_target, plugins=[StrandsPlugin(models=model)])


async def converse(client: Client, task_queue: str, prompt: str) -> tuple[Any, Any, str]:
    workflow_id = f"gm-{uuid.uuid4().hex[:8]}"
    async with build_worker(client, task_queue):
        handle = await client.start_workflow(
            GameMasterWorkflow.run,
            GameMasterInput(prompt=prompt),
            id=workflow_id,
            task_queue=task_queue,
        )
        output = await asyncio.wait_for(handle.result(), RESULT_TIMEOUT_S)
        history = await handle.fetch_history()
    return output, history, workflow_id


async def test_a_very_long_tool_use_id_gets_a_bounded_child_id(
    agent_client: Client, task_queue: str
) -> None:
    output, history, workflow_id = await converse(agent_client, task_queue, "long id")
    assert output.answer["lookup"]["name"] == "goblin"
    [child] = [
        e.start_child_workflow_execution_initiated_event_attributes.workflow_id
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED
    ]
    assert len(child) <= 255
    assert child.startswith(f"{workflow_id}/plan/tooluse_zzz")


async def test_a_4000_step_plan_is_rejected_in_workflow_code_without_a_deadlock(
    agent_client: Client, task_queue: str
) -> None:
    output, history, _ = await converse(agent_client, task_queue, "huge plan")
    assert output.answer == "Too many steps; I will plan less."
    assert model_calls(history) == 2
    failed_tasks = [
        e for e in history.events if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED
    ]
    assert failed_tasks == []


async def test_a_wide_map_of_large_arguments_is_paced_too(
    client: Client, task_queue: str, worker: Worker
) -> None:
    plan = {
        "steps": [
            {"id": "doc", "tool": "text", "args": {"kib": 200}},
            {
                "id": "fan",
                "tool": "map",
                "args": {
                    "over": list(range(16)),
                    "concurrency": 16,
                    "do": {"tool": "echo", "bind": {"value": "$length(steps.doc.text) + item"}},
                },
            },
            {
                "id": "big",
                "tool": "map",
                "args": {
                    "over": list(range(16)),
                    "concurrency": 16,
                    "do": {"tool": "echo", "bind": {"value": "steps.doc.text"}},
                },
            },
        ],
        "returns": ["fan"],
    }
    handle = await start_plan(client, plan, task_queue=task_queue, registry=REGISTRY)
    result = await asyncio.wait_for(handle.result(), RESULT_TIMEOUT_S)
    assert result.outcome("big").status == "ok"
    assert result.returned["fan"]["results"][3] == 200 * 1024 + 3
    history = await handle.handle.fetch_history()
    per_task: list[int] = []
    for event in history.events:
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
            per_task.append(0)
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED and (
            event.activity_task_scheduled_event_attributes.activity_id.startswith("big/do.")
        ):
            per_task[-1] += 1
    assert sum(per_task) == 16 and max(per_task) <= 5, per_task
