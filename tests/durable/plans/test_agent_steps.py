"""Agent steps: a bounded tool-calling loop inside a plan step, in-process and durable.

The scripted model drives the real Strands loop (a plain ``Agent`` in-process,
a ``TemporalAgent`` with real model activities durably); scripts are keyed by
the rendered prompt, which also shows the ``{{ }}`` placeholders were filled.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHistory
from temporalio.strands_agents import StrandsPlugin
from temporalio.worker import Replayer

from durable_plan import PlanHandle, PlanWorkflow, plan_worker, start_plan
from durable_plan.language.errors import PlanRejected
from durable_plan.language.plan import PlanResult
from durable_plan.local.runner import execute_plan
from durable_plan.temporal.wire.workflow_inputs import AgentStepInput, PlanInput
from durable_plan.temporal.workflows.agent_workflow import AgentStepWorkflow
from durable_plan.testing import ScriptedModel, TurnLike, call, model_calls, say
from durable_plan.testing.script_items import ToolCall, turn
from durable_plan.testing.scripted_model import output
from durable_plan.tools.registry import ToolRegistry
from tests.support.helpers import until_progress

CALLS: list[str] = []


async def look_up_monster(name: str) -> dict[str, Any]:
    """Look up a monster.

    Args:
        name: the monster

    Returns:
        {"name": str, "hp": int, "morale": int}
    """
    CALLS.append(f"look_up_monster {name}")
    if name == "dragon":
        raise KeyError("no monster named 'dragon'")
    return {"name": name, "hp": 3, "morale": 4}


async def count_allies(name: str) -> dict[str, Any]:
    """Count a monster's allies nearby.

    Args:
        name: the monster

    Returns:
        {"allies": int}
    """
    CALLS.append(f"count_allies {name}")
    return {"allies": 0}


async def flee(name: str) -> dict[str, Any]:
    """Make a monster flee.

    Args:
        name: the monster
    """
    CALLS.append(f"flee {name}")
    return {"fled": name}


async def summon(name: str) -> dict[str, Any]:
    """Summon help (needs a person's approval).

    Args:
        name: who summons
    """
    CALLS.append(f"summon {name}")
    return {"summoned": True}


def registry() -> ToolRegistry:
    tools = ToolRegistry([look_up_monster, count_allies, flee])
    tools.add(summon, requires_approval=True)
    return tools


REGISTRY = registry()
MORALE = {
    "type": "object",
    "required": ["flees", "reason"],
    "properties": {"flees": {"type": "boolean"}, "reason": {"type": "string"}},
    "additionalProperties": False,
}


def morale_plan(**agent_args: Any) -> dict[str, Any]:
    args = {
        "prompt": "Morale check for {{ steps.goblin.name }} with {{ steps.goblin.hp }} hp: "
        "does it flee? Stats: {{ steps.goblin }}",
        "output_schema": MORALE,
        "tools": ["look_up_*", "count_allies"],
        **agent_args,
    }
    return {
        "steps": [
            {"id": "goblin", "tool": "look_up_monster", "args": {"name": "goblin"}},
            {"id": "morale", "tool": "agent", "args": args},
            {
                "id": "run",
                "tool": "flee",
                "bind": {"name": "steps.goblin.name"},
                # Gate on final first: output is {} when the loop could not answer.
                "when": "steps.morale.final ? steps.morale.output.flees : false",
            },
        ],
        "on_error": "continue",
    }


RENDERED = (
    'Morale check for goblin with 3 hp: does it flee? Stats: {"name":"goblin","hp":3,"morale":4}'
)
TWO_LOOKUPS: list[TurnLike] = [
    call("look_up_monster", name="goblin"),
    call("count_allies", name="goblin"),
    output({"flees": True, "reason": "3 hp and no allies"}),
]
SCRIPTS: dict[str, list[TurnLike]] = {
    RENDERED: TWO_LOOKUPS,
    "schema miss": [output({"flees": "yes"}), output({"flees": False, "reason": "brave"})],
    "tool error": [
        call("look_up_monster", name="dragon"),
        output({"flees": False, "reason": "no dragon here"}),
    ],
    "one round": [call("look_up_monster", name="goblin"), output({"flees": True, "reason": "x"})],
    "first of two": [call("look_up_monster", name="ogre"), output({"flees": False, "reason": "a"})],
    "second of two": [call("count_allies", name="orc"), output({"flees": True, "reason": "b"})],
    "needs help": [call("summon", name="goblin"), output({"flees": False, "reason": "helped"})],
    # A model that repeats a toolUseId in one message (the review's hole: both calls got one
    # path, so one activity id, and the server refused the workflow task forever).
    "same id twice": [
        turn(
            ToolCall("look_up_monster", {"name": "goblin"}, "dup"),
            ToolCall("look_up_monster", {"name": "ogre"}, "dup"),
        ),
        output({"flees": False, "reason": "two lookups"}),
    ],
}


def prompt_plan(prompt: str, **agent_args: Any) -> dict[str, Any]:
    args = {"prompt": prompt, "output_schema": MORALE, **agent_args}
    return {"steps": [{"id": "morale", "tool": "agent", "args": args}]}


def scripted() -> ScriptedModel:
    return ScriptedModel(scripts=SCRIPTS)


async def run_local(plan: dict[str, Any]) -> PlanResult:
    CALLS.clear()
    tools = ToolRegistry([look_up_monster, count_allies, flee])
    return await execute_plan(plan, tools, model=scripted())


# -- in-process ---------------------------------------------------------------------------


async def test_an_agent_step_calls_tools_and_answers_with_conforming_output() -> None:
    result = await run_local(morale_plan())
    morale = result.returned["morale"]
    assert morale == {
        "output": {"flees": True, "reason": "3 hp and no allies"},
        "iterations": 3,
        "tools_called": [
            {"tool": "look_up_monster", "round": 1, "path": "morale/agent.1/look_up_monster"},
            {"tool": "count_allies", "round": 2, "path": "morale/agent.2/count_allies"},
        ],
        "final": True,
        "usage": morale["usage"],
    }
    # What the step cost: the scripted model's tokens of its three rounds, in the step's
    # result, on its ledger line and as the plan's total.
    usage = morale["usage"]
    assert usage["input"] > 0 and usage["output"] > 0
    assert usage["total"] == usage["input"] + usage["output"]
    assert result.outcome("morale").usage == usage
    assert result.usage == usage
    assert result.outcome("run").status == "ok", "a later step bound the output"
    assert CALLS == [
        "look_up_monster goblin",
        "look_up_monster goblin",
        "count_allies goblin",
        "flee goblin",
    ]


async def test_one_round_cannot_call_a_tool_and_answer() -> None:
    result = await run_local(prompt_plan("one round", max_iterations=1))
    assert result.returned["morale"]["final"] is False
    assert result.returned["morale"]["output"] == {}
    assert result.returned["morale"]["iterations"] == 1


async def test_a_budget_spent_gates_the_dependent_step() -> None:
    plan = morale_plan(max_iterations=1)
    plan["steps"][1]["args"]["prompt"] = "one round"
    result = await run_local(plan)
    assert result.outcome("run").status == "not_taken"


async def test_a_schema_miss_is_repaired_in_another_round() -> None:
    result = await run_local(prompt_plan("schema miss"))
    morale = result.returned["morale"]
    assert morale["final"] is True and morale["output"] == {"flees": False, "reason": "brave"}
    assert morale["iterations"] == 2


async def test_a_tool_error_goes_back_into_the_loop() -> None:
    result = await run_local(prompt_plan("tool error"))
    assert result.outcome("morale").status == "ok"
    assert result.returned["morale"]["output"]["reason"] == "no dragon here"


# -- checks ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "field", "words"),
    [
        ({"output_schema": MORALE}, "args", "needs a prompt"),
        ({"prompt": "x"}, "args.output_schema", "needs an output_schema"),
        ({"prompt": "x", "output_schema": {"type": "array"}}, "args.output_schema", "type object"),
        (
            {"prompt": "x", "output_schema": {"type": "object", "required": "flees"}},
            "args.output_schema",
            "not a valid JSON Schema",
        ),
        ({"prompt": "x", "output_schema": MORALE, "tools": []}, "args.tools", "tools is empty"),
        (
            {"prompt": "x", "output_schema": MORALE, "tools": ["lookup_*"]},
            "args.tools",
            "matches no tool",
        ),
        (
            {"prompt": "x", "output_schema": MORALE, "max_iterations": 0},
            "args.max_iterations",
            "from 1 to 32",
        ),
        ({"prompt": "x", "output_schema": MORALE, "promt": "y"}, "args.promt", "did you mean"),
        ({"prompt": "{{ steps.ghost.x }}", "output_schema": MORALE}, "args.prompt", "ghost"),
        (
            {"prompt": "{{ steps.goblin.hp == 3 }}", "output_schema": MORALE},
            "args.prompt",
            "syntax",
        ),
    ],
)
async def test_a_bad_agent_step_is_rejected_before_anything_runs(
    args: dict[str, Any], field: str, words: str
) -> None:
    plan = {
        "steps": [
            {"id": "goblin", "tool": "look_up_monster", "args": {"name": "goblin"}},
            {"id": "morale", "tool": "agent", "args": args},
        ]
    }
    with pytest.raises(PlanRejected) as info:
        await run_local(plan)
    problems = [p for p in info.value.problems if p.step == "morale"]
    assert problems, info.value.render()
    assert any(p.field == field and words in str(p) for p in problems), info.value.render()
    assert CALLS == []


async def test_an_agent_step_without_a_model_is_rejected_when_the_runner_has_none() -> None:
    with pytest.raises(PlanRejected, match="needs a model"):
        await execute_plan(prompt_plan("x"), ToolRegistry([look_up_monster]))


def test_a_tool_cannot_be_named_agent() -> None:
    async def agent(x: int) -> int:
        """x."""
        return x

    with pytest.raises(ValueError, match="reserves it"):
        ToolRegistry([agent])


# -- durable ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
async def agent_client(temporal_target: str) -> AsyncIterator[Client]:
    plugin = StrandsPlugin(models={"scripted": scripted})
    yield await Client.connect(temporal_target, plugins=[plugin])


async def run_durable(
    client: Client, task_queue: str, plan: dict[str, Any]
) -> tuple[PlanResult, PlanHandle]:
    CALLS.clear()
    async with plan_worker(client, task_queue=task_queue, registry=REGISTRY):
        handle = await start_plan(
            client, plan, task_queue=task_queue, registry=REGISTRY, model="scripted"
        )
        result = await asyncio.wait_for(handle.result(), 60)
    return result, handle


async def test_a_durable_agent_step_runs_in_its_own_child_workflow(
    agent_client: Client, task_queue: str
) -> None:
    result, handle = await run_durable(agent_client, task_queue, morale_plan())
    assert result.returned["morale"]["output"] == {"flees": True, "reason": "3 hp and no allies"}
    assert result.returned["morale"]["iterations"] == 3
    assert result.outcome("run").status == "ok"
    child = agent_client.get_workflow_handle(f"{handle.id}/agent/morale")
    child_history = await child.fetch_history()
    assert model_calls(child_history) == 3
    summaries = [
        e.user_metadata.summary.data.decode()
        for e in child_history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and e.activity_task_scheduled_event_attributes.activity_type.name != "invoke_model"
        and e.HasField("user_metadata")
    ]
    assert any("morale/agent.1/look_up_monster" in s for s in summaries), summaries
    model_rows = [
        json.loads(e.user_metadata.summary.data)
        for e in child_history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and e.activity_task_scheduled_event_attributes.activity_type.name == "invoke_model"
    ]
    assert model_rows == ["agent step morale: model call"] * 3, "each row says whose call"
    plan_history = await handle.handle.fetch_history()
    assert model_calls(plan_history) == 0, "the conversation stays out of the plan's history"
    # Neither workflow asks a patch (``temporal.versions``): no marker in either history.
    markers = [
        e.marker_recorded_event_attributes.marker_name
        for h in (plan_history, child_history)
        for e in h.events
        if e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED
    ]
    assert "core_patch" not in markers, markers
    await _replays(plan_history, child_history)


async def test_a_repeated_tool_use_id_gets_an_activity_id_of_its_own(
    agent_client: Client, task_queue: str
) -> None:
    plan = prompt_plan("same id twice", tools=["look_up_*"])
    result, handle = await run_durable(agent_client, task_queue, plan)
    assert result.outcome("morale").status == "ok", result.ledger
    child = agent_client.get_workflow_handle(f"{handle.id}/agent/morale")
    ids = [
        e.activity_task_scheduled_event_attributes.activity_id
        for e in (await child.fetch_history()).events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and e.activity_task_scheduled_event_attributes.activity_type.name != "invoke_model"
    ]
    assert len(ids) == 2 and len(set(ids)) == 2, ids
    assert ids[0] == "morale/agent.1/look_up_monster~2", ids  # the message numbered both ~2
    assert ids[1].startswith("morale/agent.1/look_up_monster~10"), ids


def _start_input(history: WorkflowHistory) -> Any:
    event = history.events[0]
    assert event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED
    return json.loads(event.workflow_execution_started_event_attributes.input.payloads[0].data)


async def test_an_agent_step_carries_its_plans_settings_records(
    agent_client: Client, task_queue: str
) -> None:
    """The child's input is the step's own beside its plan's records, whole (the routing and
    the relay adjusted to the step): a setting added to a record reaches it unasked."""
    async with plan_worker(agent_client, task_queue=task_queue, registry=REGISTRY):
        handle = await start_plan(
            agent_client,
            morale_plan(),
            task_queue=task_queue,
            registry=REGISTRY,
            model="scripted",
            max_interruptions=3,
            retry_initial_interval_s=0.25,
            max_history_bytes=30 * 2**20,
            keep_stored_results=True,
            ui_metadata="details",
        )
        await asyncio.wait_for(handle.result(), 60)
    plan = PlanInput.from_wire(_start_input(await handle.handle.fetch_history()))
    child = agent_client.get_workflow_handle(f"{handle.id}/agent/morale")
    step = AgentStepInput.from_wire(_start_input(await child.fetch_history()))
    assert (step.bounds, step.retrying, step.storage, step.visibility) == (
        plan.bounds,
        plan.retrying,
        plan.storage,
        plan.visibility,
    )
    assert step.retrying.max_interruptions == 3 and step.storage.keep_stored_results
    assert step.routing == plan.routing and step.relay == plan.relay  # none of either here
    assert step.model == "scripted" and set(step.tools) == {"look_up_monster", "count_allies"}


async def _replays(*histories: WorkflowHistory) -> None:
    replayer = Replayer(
        workflows=[PlanWorkflow, AgentStepWorkflow],
        plugins=[StrandsPlugin(models={"scripted": scripted})],
    )
    for history in histories:
        await replayer.replay_workflow(history)


async def test_agent_steps_in_a_fan_out_run_concurrently(
    agent_client: Client, task_queue: str
) -> None:
    plan = {
        "steps": [
            {
                "id": "a",
                "tool": "agent",
                "args": {"prompt": "first of two", "output_schema": MORALE},
            },
            {
                "id": "b",
                "tool": "agent",
                "args": {"prompt": "second of two", "output_schema": MORALE},
            },
        ]
    }
    result, handle = await run_durable(agent_client, task_queue, plan)
    assert result.returned["a"]["output"]["reason"] == "a"
    assert result.returned["b"]["output"]["reason"] == "b"
    history = await handle.handle.fetch_history()
    kinds = [e.event_type for e in history.events]
    started = [
        n for n, k in enumerate(kinds) if k == EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_STARTED
    ]
    done = [
        n
        for n, k in enumerate(kinds)
        if k == EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_COMPLETED
    ]
    assert max(started) < min(done), "both loops were running at once"


async def test_an_approval_gated_tool_inside_an_agent_step_waits_for_a_person(
    agent_client: Client, task_queue: str
) -> None:
    CALLS.clear()
    plan = prompt_plan("needs help", tools=["summon"])
    async with plan_worker(agent_client, task_queue=task_queue, registry=REGISTRY):
        handle = await start_plan(
            agent_client, plan, task_queue=task_queue, registry=REGISTRY, model="scripted"
        )
        child = PlanHandle(agent_client.get_workflow_handle(f"{handle.id}/agent/morale"))
        awaiting: list[dict[str, Any]] = []
        progress = await until_progress(
            child.handle, lambda progress: bool(progress["awaiting"]), what="a call to approve"
        )
        awaiting = progress["awaiting"]
        assert awaiting and awaiting[0]["args"] == {"name": "goblin"}
        # The child's page in the web UI names the call and how to answer it (issue 46).
        details = (await child.handle.query("__temporal_workflow_metadata")).current_details
        call_id, digest = awaiting[0]["id"], awaiting[0]["args_digest"]
        assert f"durable-plan approve {child.id} {call_id} --digest {digest}" in details
        assert "`summon`" in details
        assert CALLS == []
        lines = await handle.progress()
        assert lines[0]["phase"] == "running"
        await child.decide(awaiting[0]["id"], True, args_digest=awaiting[0]["args_digest"])
        result = await asyncio.wait_for(handle.result(), 60)
    assert CALLS == ["summon goblin"]
    assert result.returned["morale"]["output"]["reason"] == "helped"


async def test_progress_shows_an_agent_steps_round(agent_client: Client, task_queue: str) -> None:
    CALLS.clear()
    plan = prompt_plan("needs help", tools=["summon"])
    async with plan_worker(agent_client, task_queue=task_queue, registry=REGISTRY):
        handle = await start_plan(
            agent_client, plan, task_queue=task_queue, registry=REGISTRY, model="scripted"
        )
        lines = await until_progress(
            handle, lambda lines: bool(lines[0].get("round")), what="an agent round"
        )
        assert lines[0]["round"] == 1
        assert "awaiting" in lines[0]
        child = PlanHandle(agent_client.get_workflow_handle(f"{handle.id}/agent/morale"))
        waiting = lines[0]["awaiting"][0]
        await child.decide(waiting["id"], False, "not now")
        result = await asyncio.wait_for(handle.result(), 60)
    assert result.returned["morale"]["final"] is True
    assert json.dumps(result.returned)


# -- through the plugin -------------------------------------------------------------------------


def test_a_plain_agents_plan_runs_an_agent_step_on_the_agents_model() -> None:
    from strands import Agent, tool

    from durable_plan.strands.plugin import WorkflowPlanPlugin

    plan = morale_plan()
    scripts = {
        **SCRIPTS,
        "Will the goblin flee?": [call("submit_workflow_plan", **plan), say("It fled.")],
    }
    CALLS.clear()
    agent = Agent(
        model=ScriptedModel(scripts=scripts),
        tools=[tool(look_up_monster), tool(count_allies), tool(flee)],
        plugins=[WorkflowPlanPlugin()],
        callback_handler=None,
    )
    answer = agent("Will the goblin flee?")
    assert str(answer).strip() == "It fled."
    assert CALLS[-1] == "flee goblin", CALLS
    [report] = [
        block["toolResult"]
        for message in agent.messages
        for block in message["content"]
        if "toolResult" in block
    ]
    assert report["status"] == "success", report


async def test_the_game_masters_morale_check_runs_an_agent_step_durably(
    temporal_target: str, task_queue: str
) -> None:
    from activities.scripts import DEMO_SCRIPTS, MORALE_PROMPT
    from worker import build_worker
    from workflows.game_master import GameMasterInput, GameMasterWorkflow

    def demo_model() -> ScriptedModel:
        return ScriptedModel(scripts=DEMO_SCRIPTS)

    client = await Client.connect(
        temporal_target, plugins=[StrandsPlugin(models={"scripted": demo_model})]
    )
    async with build_worker(client, task_queue):
        handle = await client.start_workflow(
            GameMasterWorkflow.run,
            GameMasterInput(prompt=MORALE_PROMPT),
            id=f"gm-morale-{task_queue}",
            task_queue=task_queue,
        )
        output_ = await asyncio.wait_for(handle.result(), 60)
        parent = await handle.fetch_history()
        plan = client.get_workflow_handle(f"{handle.id}/plan/tooluse_0_0")
        loop = client.get_workflow_handle(f"{handle.id}/plan/tooluse_0_0/agent/morale")
        histories = [await plan.fetch_history(), await loop.fetch_history()]
    answer = output_.answer  # a final plan's returned results, as the object they are
    assert isinstance(answer, dict)
    assert answer["morale"]["final"] is True and answer["morale"]["output"]["flees"] is True
    assert output_.model_round_trips == 1 and output_.agent_step_rounds == 3
    assert model_calls(parent) == 1 and model_calls(histories[1]) == 3
    replayer = Replayer(
        workflows=[GameMasterWorkflow, PlanWorkflow, AgentStepWorkflow],
        plugins=[StrandsPlugin(models={"scripted": demo_model})],
    )
    for history in [parent, *histories]:
        await replayer.replay_workflow(history)
