"""WorkflowPlanPlugin inside a TemporalAgent: plans as child workflows, on the real dev server.

The scripted model is registered through ``StrandsPlugin(models=...)`` on the client, so the
real Strands loop and the real ``invoke_model`` activities run; only the model's words are
scripted.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle
from temporalio.strands_agents import StrandsPlugin

from activities.scripts import ATTACK_PLAN, ROUND_PLAN, ROUND_PROMPT
from durable_plan.temporal.wire.result_form import expand_result
from durable_plan.testing import ScriptedModel, TurnLike, call, model_calls, say
from durable_plan.testing.scripted_model import MODEL_ACTIVITY_NAMES
from tests.support.helpers import until_phase, until_progress
from tests.support.plan_cases import DRAGON_PLAN
from tests.support.warm_python import WarmProcess
from tests.support.worker_processes import warm_python
from worker import build_worker
from workflows.game_master import GameMasterInput, GameMasterOutput, GameMasterWorkflow

ROOT = Path(__file__).resolve().parents[3]

BAD_PLAN = {
    "steps": [
        {"id": "lookup", "tool": "look_up_monster", "args": {"name": "goblin"}},
        {"id": "attack", "tool": "roll_attack", "bind": {"armour": "steps.lookup.armor"}},
        {"id": "oops", "tool": "cast_spell"},
        {"id": "loop_a", "tool": "roll_attack", "bind": {"armour": "steps.loop_b.x"}},
        {"id": "loop_b", "tool": "roll_attack", "bind": {"armour": "steps.loop_a.x"}},
    ]
}

SKELETON_PLAN = {
    "steps": [
        {"id": "attack", "tool": "roll_attack", "args": {"armour": 13}},
        {
            "id": "damage",
            "tool": "apply_damage",
            "args": {"monster": "skeleton"},
            "bind": {"damage": "steps.attack.damage"},
        },
    ],
    "returns": ["damage"],
}

SCRIPTS: dict[str, list[TurnLike]] = {
    "final attack": [call("submit_workflow_plan", **ATTACK_PLAN)],
    "prose attack": [call("submit_workflow_plan", **ATTACK_PLAN), say("The goblin reels.")],
    "open attack": [
        call("submit_workflow_plan", **{**ATTACK_PLAN, "final": False}),
        say("The goblin has 1 hp left."),
    ],
    "attack the dragon": [
        call("submit_workflow_plan", **DRAGON_PLAN),
        say("There is no dragon in the bestiary."),
    ],
    "bad plan": [call("submit_workflow_plan", **BAD_PLAN), say("Let me fix that plan.")],
    "excluded attack": [call("submit_workflow_plan", **ATTACK_PLAN), say("I'll call it myself.")],
    "gated attack": [
        call("submit_workflow_plan", **ATTACK_PLAN),
        say("The damage was not approved."),
    ],
    "prose round": [
        call("submit_workflow_plan", **{**ROUND_PLAN, "final": False}),
        say("The ogre staggers."),
    ],
    ROUND_PROMPT: [call("submit_workflow_plan", **ROUND_PLAN)],
    "look first": [
        call("look_up_monster", name="skeleton"),
        call("submit_workflow_plan", **SKELETON_PLAN),
        say("The skeleton takes 6 and has 7 hp left."),
    ],
}


@pytest.fixture(scope="module")
async def agent_client(temporal_target: str) -> AsyncIterator[Client]:
    model = {"scripted": lambda: ScriptedModel(scripts=SCRIPTS)}
    yield await Client.connect(temporal_target, plugins=[StrandsPlugin(models=model)])


async def start(
    client: Client, task_queue: str, prompt: str, **options: Any
) -> WorkflowHandle[Any, GameMasterOutput]:
    return await client.start_workflow(
        GameMasterWorkflow.run,
        GameMasterInput(prompt=prompt, **options),
        id=f"gm-{uuid.uuid4().hex[:8]}",
        task_queue=task_queue,
    )


async def converse(
    client: Client, task_queue: str, prompt: str, **options: Any
) -> tuple[GameMasterOutput, Any, WorkflowHandle[Any, GameMasterOutput]]:
    async with build_worker(client, task_queue):
        handle = await start(client, task_queue, prompt, **options)
        output = await handle.result()
        history = await handle.fetch_history()
    return output, history, handle


def child_ids(history: Any) -> list[str]:
    return [
        e.start_child_workflow_execution_initiated_event_attributes.workflow_id
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED
    ]


def model_inputs(history: Any) -> list[str]:
    """The JSON text of every model activity's input (the conversation it was sent)."""
    return [
        e.activity_task_scheduled_event_attributes.input.payloads[0].data.decode()
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and e.activity_task_scheduled_event_attributes.activity_type.name in MODEL_ACTIVITY_NAMES
    ]


async def test_final_plan_ends_the_turn_after_one_model_call(
    agent_client: Client, task_queue: str
) -> None:
    output, history, handle = await converse(agent_client, task_queue, "final attack")
    assert model_calls(history) == 1
    assert output.model_round_trips == 1 and output.plain_loop_round_trips == 4
    assert output.answer["damage"] == {"hp_after": 1, "defeated": False}
    assert child_ids(history) == [f"{handle.id}/plan/tooluse_0_0"]
    child = agent_client.get_workflow_handle(f"{handle.id}/plan/tooluse_0_0")
    assert (await child.describe()).workflow_type == "PlanWorkflow"


async def test_direct_tool_calls_and_plans_mix(agent_client: Client, task_queue: str) -> None:
    """The model reads one result itself, then plans the mechanical rest (as live models do)."""
    output, history, _ = await converse(agent_client, task_queue, "look first")
    assert model_calls(history) == 3
    assert output.answer == "The skeleton takes 6 and has 7 hp left."
    direct = [
        e.activity_task_scheduled_event_attributes
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and e.activity_task_scheduled_event_attributes.activity_type.name == "look_up_monster"
    ]
    assert len(direct) == 1
    second = json.loads(model_inputs(history)[1])["messages"]
    [looked] = [b["toolResult"] for m in second for b in m["content"] if "toolResult" in b]
    assert looked["content"][0]["json"] == {"name": "skeleton", "hp": 13, "armour": 13}
    third = model_inputs(history)[2]
    assert '"hp_after":7' in third.replace(" ", "")


async def test_honor_final_false_asks_once_more(agent_client: Client, task_queue: str) -> None:
    output, history, _ = await converse(agent_client, task_queue, "prose attack", honor_final=False)
    assert model_calls(history) == 2
    assert output.answer == "The goblin reels."


async def test_non_final_plan_takes_two_calls(agent_client: Client, task_queue: str) -> None:
    output, history, _ = await converse(agent_client, task_queue, "open attack")
    assert model_calls(history) == 2
    assert output.answer == "The goblin has 1 hp left."


async def test_failed_step_does_not_end_the_turn(agent_client: Client, task_queue: str) -> None:
    output, history, _ = await converse(agent_client, task_queue, "attack the dragon")
    assert model_calls(history) == 2
    assert output.answer == "There is no dragon in the bestiary."
    second = model_inputs(history)[1]
    assert "step 'lookup' (look_up_monster) failed" in second
    assert "no monster named 'dragon'" in second


async def test_bad_plan_returns_every_problem_and_starts_no_child(
    agent_client: Client, task_queue: str
) -> None:
    _output, history, _ = await converse(agent_client, task_queue, "bad plan")
    assert model_calls(history) == 2
    assert child_ids(history) == []
    second = model_inputs(history)[1]
    assert "Plan rejected, nothing was executed:" in second
    for fragment in (
        "unknown tool 'cast_spell'",
        "loop_a -> loop_b -> loop_a",
    ):
        assert fragment in second
    activities = {
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    }
    assert activities <= set(MODEL_ACTIVITY_NAMES)


async def test_plannable_exclusions(agent_client: Client, task_queue: str) -> None:
    _output, history, _ = await converse(
        agent_client, task_queue, "excluded attack", plannable=["*", "!apply_damage"]
    )
    assert child_ids(history) == []
    second = model_inputs(history)[1]
    assert "tool 'apply_damage' cannot be planned" in second
    assert "call 'apply_damage' directly" in second


async def _wait_for_approval(
    client: Client, child_id: str, step_id: str
) -> WorkflowHandle[Any, Any]:
    child = client.get_workflow_handle(child_id)
    await until_phase(child, step_id, "awaiting_approval", timeout_s=20)
    return child


async def test_gated_step_pauses_then_approved(agent_client: Client, task_queue: str) -> None:
    async with build_worker(agent_client, task_queue):
        handle = await start(
            agent_client, task_queue, "final attack", approval_required=["apply_damage"]
        )
        child = await _wait_for_approval(agent_client, f"{handle.id}/plan/tooluse_0_0", "damage")
        assert await child.execute_update("decide_step", {"step_id": "damage", "approved": True})
        output = await handle.result()
        history = await handle.fetch_history()
    assert model_calls(history) == 1
    assert output.answer["damage"] == {"hp_after": 1, "defeated": False}


async def test_strands_intervention_gates_a_durable_step(
    agent_client: Client, task_queue: str
) -> None:
    """A HumanInTheLoop gate on the agent reaches inside the plan: the step waits for a person."""
    allowed = ["submit_workflow_plan", "look_up_monster", "roll_attack"]
    async with build_worker(agent_client, task_queue):
        handle = await start(
            agent_client, task_queue, "final attack", plannable=["*"], hitl_allowed_tools=allowed
        )
        child = await _wait_for_approval(agent_client, f"{handle.id}/plan/tooluse_0_0", "damage")
        lines = {line["id"]: line["phase"] for line in await child.query("progress")}
        assert lines == {"lookup": "ok", "attack": "ok", "damage": "awaiting_approval"}
        await child.execute_update("decide_step", {"step_id": "damage", "approved": True})
        output = await handle.result()
    assert output.answer["damage"] == {"hp_after": 1, "defeated": False}


async def test_gated_step_pauses_then_rejected(agent_client: Client, task_queue: str) -> None:
    async with build_worker(agent_client, task_queue):
        handle = await start(
            agent_client, task_queue, "gated attack", approval_required=["apply_damage"]
        )
        child = await _wait_for_approval(agent_client, f"{handle.id}/plan/tooluse_0_0", "damage")
        await child.execute_update(
            "decide_step", {"step_id": "damage", "approved": False, "reason": "too brutal"}
        )
        output = await handle.result()
        history = await handle.fetch_history()
    assert model_calls(history) == 2
    assert output.answer == "The damage was not approved."
    assert "rejected by a person: too brutal" in model_inputs(history)[1]


async def test_combat_round_results_stay_in_the_plan(agent_client: Client, task_queue: str) -> None:
    output, history, _handle = await converse(
        agent_client, task_queue, "prose round", honor_final=False
    )
    assert output.plain_loop_round_trips == 7
    child = agent_client.get_workflow_handle(child_ids(history)[0])
    child_result = expand_result(await child.result())  # the full form
    ledger = child_result["ledger"]
    # Three maps over the action log: the model wrote it without reading the log first.
    assert len(ledger) == 6 and {o["status"] for o in ledger} == {"ok"}
    assert [o["tool"] for o in ledger].count("map") == 3
    assert len(child_result["levels"]) == 6
    child_history = await child.fetch_history()
    items = [
        e.activity_task_scheduled_event_attributes.activity_id
        for e in child_history.events
        if e.HasField("activity_task_scheduled_event_attributes")
    ]
    assert {"chars/do.0", "chars/do.2", "rolls/do.1", "hits/do.2"} <= set(items)
    assert sorted(child_result["returned"]) == ["narrate", "tally"]
    conversation = json.loads(model_inputs(history)[1])["messages"]
    [plan_result] = [
        block["toolResult"]
        for message in conversation
        for block in message["content"]
        if "toolResult" in block
    ]
    seen_by_model = plan_result["content"][0]["json"]
    # 10 of the 12 results never reach the model: only the two it asked for.
    assert sorted(seen_by_model["returned"]) == ["narrate", "tally"]
    assert "attack_bonus" not in json.dumps(plan_result)
    assert seen_by_model["returned"]["narrate"]["text"].startswith("The ogre staggers")


async def test_worker_killed_mid_plan_conversation_completes(temporal_target: str) -> None:
    """SIGKILL the worker while the child plan runs; a new worker finishes the conversation."""
    task_queue = f"crash-gm-{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "GAME_MASTER_TOOL_DELAY": "0.7", "PYTHONPATH": str(ROOT)}
    command = [
        str(ROOT / "worker.py"),
        "--target",
        temporal_target,
        "--task-queue",
        task_queue,
    ]
    client = await Client.connect(
        temporal_target,
        plugins=[StrandsPlugin(models={"scripted": lambda: ScriptedModel(scripts=SCRIPTS)})],
    )
    launcher = await warm_python()  # each worker a forked `python worker.py`

    async def spawn() -> WarmProcess:
        return await launcher.spawn(*command, env=env, cwd=ROOT)

    first = await spawn()
    second: WarmProcess | None = None
    try:
        handle = await start(client, task_queue, ROUND_PROMPT)
        child = client.get_workflow_handle(f"{handle.id}/plan/tooluse_0_0")
        await until_progress(
            child,
            lambda lines: (
                [line["phase"] for line in lines].count("ok") >= 4
                and any(line["phase"] == "running" for line in lines)
            ),
            what="the child plan under way",
        )
        first.send_signal(signal.SIGKILL)
        await asyncio.wait_for(first.wait(), 10)
        second = await spawn()
        output = await asyncio.wait_for(handle.result(), timeout=90)
        history = await handle.fetch_history()
    finally:
        for proc in (first, second):
            if proc is not None and proc.returncode is None:
                proc.kill()
                await asyncio.wait_for(proc.wait(), 10)
    assert model_calls(history) == 1, "the model was asked again after the crash"
    assert output.answer["narrate"]["text"].startswith("The ogre staggers")
    child_result = expand_result(await child.result())  # the full form
    assert {o["status"] for o in child_result["ledger"]} == {"ok"}


async def test_replay_of_agent_with_plan(agent_client: Client, task_queue: str) -> None:
    from temporalio.worker import Replayer

    from durable_plan import PlanWorkflow

    _, history, handle = await converse(agent_client, task_queue, "open attack")
    child = agent_client.get_workflow_handle(f"{handle.id}/plan/tooluse_0_0")
    child_history = await child.fetch_history()
    model = {"scripted": lambda: ScriptedModel(scripts=SCRIPTS)}
    replayer = Replayer(
        workflows=[GameMasterWorkflow, PlanWorkflow], plugins=[StrandsPlugin(models=model)]
    )
    await replayer.replay_workflow(history)
    await replayer.replay_workflow(child_history)
