"""Return shapes durably, on the real dev server: a plan that reads a field its tool's shape
rules out starts no activity, whichever way it comes in (the client's check, the plan
workflow's own re-check, a ``TemporalAgent``'s plan tool), and a conversation recorded
before its tools declared their shapes replays unchanged (``versions.RETURN_SHAPES``)."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowFailureError, WorkflowHistory
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError
from temporalio.strands_agents import StrandsPlugin
from temporalio.worker import Replayer
from temporalio.workflow import NondeterminismError

from durable_plan import plan_worker, start_plan
from durable_plan.check.catalog import ToolCatalog
from durable_plan.language.errors import PlanRejected
from durable_plan.temporal.wire.messages import PLAN_WORKFLOW_NAME
from durable_plan.temporal.wire.plan_settings import Routing
from durable_plan.temporal.wire.workflow_inputs import PlanInput
from durable_plan.temporal.workflows.versions import RETURN_SHAPES
from durable_plan.testing import ScriptedModel
from tests.support.shape_tools import (
    CALL_LOG_ENV,
    MISSPELLED_PLAN,
    SHAPES,
    WITH_SHAPES,
    WITHOUT_SHAPES,
    calls,
)
from tests.support.shape_workflows import ATTACK_PROMPT, SCRIPTS, ShapeConversationWorkflow

RESULT_TIMEOUT_S = 60
GOOD_PLAN = {
    "steps": [
        MISSPELLED_PLAN["steps"][0],
        {"id": "attack", "tool": "roll_attack", "bind": {"armour": "steps.lookup.armour"}},
    ]
}


@pytest.fixture
def call_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "calls.jsonl"
    monkeypatch.setenv(CALL_LOG_ENV, str(path))
    return path


@pytest.fixture
def declared() -> Any:
    yield SHAPES
    SHAPES["declared"] = True


def events(history: WorkflowHistory, kind: EventType.ValueType) -> list[Any]:
    return [e for e in history.events if e.event_type == kind]


def patches(history: WorkflowHistory) -> list[str]:
    """The patch ids a workflow recorded (its MarkerRecorded events)."""
    found = []
    for event in events(history, EventType.EVENT_TYPE_MARKER_RECORDED):
        details = event.marker_recorded_event_attributes.details
        if "patch-data" in details:
            found.append(json.loads(details["patch-data"].payloads[0].data)["id"])
    return found


async def test_the_client_refuses_before_starting_anything(
    client: Client, task_queue: str, workflow_id: str, call_log: Path
) -> None:
    async with plan_worker(client, task_queue=task_queue, registry=WITH_SHAPES):
        with pytest.raises(PlanRejected) as caught:
            await start_plan(
                client,
                MISSPELLED_PLAN,
                task_queue=task_queue,
                registry=WITH_SHAPES,
                workflow_id=workflow_id,
            )
    assert caught.value.codes == ["no_field"]
    assert "steps.lookup has no field 'ac': look_up_monster returns name, hp, armour" in str(
        caught.value
    )
    with pytest.raises(RPCError):  # no workflow was started
        await client.get_workflow_handle(workflow_id).describe()
    assert calls(call_log) == []


async def test_the_plan_workflow_rechecks_a_plan_that_skipped_the_client(
    client: Client, task_queue: str, workflow_id: str, call_log: Path
) -> None:
    """A ``PlanInput`` built by hand (no client check): the workflow's own check refuses it
    in its first task, and no activity is ever scheduled."""
    request = PlanInput(
        plan=MISSPELLED_PLAN, tools=WITH_SHAPES.options(), routing=Routing(task_queue=task_queue)
    )
    async with plan_worker(client, task_queue=task_queue, registry=WITH_SHAPES):
        handle = await client.start_workflow(
            PLAN_WORKFLOW_NAME, request.to_wire(), id=workflow_id, task_queue=task_queue
        )
        with pytest.raises(WorkflowFailureError) as caught:
            await asyncio.wait_for(handle.result(), RESULT_TIMEOUT_S)
    cause = caught.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "PlanRejected"
    assert "steps.lookup has no field 'ac'" in cause.message
    history = await handle.fetch_history()
    assert events(history, EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED) == []
    # The tool table, shapes and all, is in the recorded input: nothing to record.
    assert patches(history) == []
    assert calls(call_log) == []


async def test_a_plan_with_shapes_runs_and_carries_them(
    client: Client, task_queue: str, workflow_id: str, call_log: Path
) -> None:
    async with plan_worker(client, task_queue=task_queue, registry=WITH_SHAPES):
        handle = await start_plan(
            client, GOOD_PLAN, task_queue=task_queue, registry=WITH_SHAPES, workflow_id=workflow_id
        )
        result = await asyncio.wait_for(handle.result(), RESULT_TIMEOUT_S)
    assert result.ok and result.returned["attack"]["hits"] is True
    assert calls(call_log) == ["look_up_monster", "roll_attack"]
    history = await handle.handle.fetch_history()
    table = _started_input(history)["tools"]
    assert table["look_up_monster"]["output_schema"]["properties"]["armour"] == {"type": "integer"}
    # The patch is asked only by a plan the shapes refuse: one they pass records nothing new.
    assert RETURN_SHAPES not in patches(history)


async def test_a_tool_table_without_shapes_records_nothing_new(
    client: Client, task_queue: str, workflow_id: str, call_log: Path
) -> None:
    """Tools without shapes: the input has no ``output_schema`` key and the history no marker,
    as before this check existed; the misspelled plan fails at run time, as it did."""
    async with plan_worker(client, task_queue=task_queue, registry=WITHOUT_SHAPES):
        handle = await start_plan(
            client,
            MISSPELLED_PLAN,
            task_queue=task_queue,
            registry=WITHOUT_SHAPES,
            workflow_id=workflow_id,
        )
        result = await asyncio.wait_for(handle.result(), RESULT_TIMEOUT_S)
    assert result.outcome("attack").status == "failed"
    assert "binding 'armour' matched no value" in (result.outcome("attack").error or "")
    history = await handle.handle.fetch_history()
    assert all("output_schema" not in o for o in _started_input(history)["tools"].values())
    assert RETURN_SHAPES not in patches(history)
    assert calls(call_log) == ["look_up_monster"]


def _started_input(history: WorkflowHistory) -> dict[str, Any]:
    [started] = events(history, EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED)
    payload = started.workflow_execution_started_event_attributes.input.payloads[0]
    data: dict[str, Any] = json.loads(payload.data)
    return data


# -- a TemporalAgent's plan tool ---------------------------------------------------------------


@pytest.fixture
async def agent_client(temporal_target: str) -> AsyncIterator[Client]:
    models = {"scripted": lambda: ScriptedModel(scripts=SCRIPTS)}
    yield await Client.connect(temporal_target, plugins=[StrandsPlugin(models=models)])


async def converse(client: Client, task_queue: str) -> tuple[list[str], WorkflowHistory, str]:
    workflow_id = f"shapes-{uuid.uuid4().hex[:8]}"
    async with plan_worker(
        client, task_queue=task_queue, registry=WITH_SHAPES, workflows=[ShapeConversationWorkflow]
    ):
        handle = await client.start_workflow(
            ShapeConversationWorkflow.run, ATTACK_PROMPT, id=workflow_id, task_queue=task_queue
        )
        texts = await asyncio.wait_for(handle.result(), RESULT_TIMEOUT_S)
        history = await handle.fetch_history()
    return texts, history, workflow_id


async def test_a_conversation_refuses_the_plan_before_any_child(
    agent_client: Client, task_queue: str, call_log: Path, declared: dict[str, bool]
) -> None:
    texts, history, workflow_id = await converse(agent_client, task_queue)
    assert texts[0].startswith("Plan rejected, nothing was executed:")
    assert "steps.lookup has no field 'ac'" in texts[0]
    assert events(history, EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED) == []
    assert RETURN_SHAPES in patches(history)
    with pytest.raises(RPCError):
        await agent_client.get_workflow_handle(f"{workflow_id}/plan/tooluse_0_0").describe()
    assert calls(call_log) == []


async def test_a_conversation_recorded_before_shapes_replays_with_them(
    agent_client: Client,
    task_queue: str,
    call_log: Path,
    declared: dict[str, bool],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Recorded while the tools declared no shape: the plan ran (the lookup too) and failed
    at run time. Replayed by code whose tools declare shapes, the check must not refuse
    what it accepted then: the patch marker is absent, so it checks without them."""
    declared["declared"] = False
    texts, history, _ = await converse(agent_client, task_queue)
    assert "binding 'armour' matched no value" in texts[0]
    assert calls(call_log) == ["look_up_monster"]
    assert RETURN_SHAPES not in patches(history)
    declared["declared"] = True
    models = {"scripted": lambda: ScriptedModel(scripts=SCRIPTS)}
    replayer = Replayer(
        workflows=[ShapeConversationWorkflow], plugins=[StrandsPlugin(models=models)]
    )
    await replayer.replay_workflow(history)  # raises on any non-determinism
    # The control: without the patch the check would refuse the plan it started then.
    monkeypatch.setattr(ToolCatalog, "without_shapes", lambda self: self)
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    # (The first divergence the SDK sees is the child's set-up, which a refused plan skips.)
    assert isinstance(result.replay_failure, NondeterminismError), result.replay_failure


async def test_the_demos_misspelled_plan_is_refused_and_the_corrected_one_runs(
    temporal_target: str, task_queue: str
) -> None:
    """``client.py --demo``'s last conversation: the first plan misspells roll_attack's
    field in its last step; the check refuses it (no dice rolled for nothing), and the
    corrected plan is the only one that runs."""
    from activities.scripts import DEMO_SCRIPTS, REPAIR_PROMPT
    from worker import build_worker
    from workflows.game_master import GameMasterInput, GameMasterWorkflow

    models = {"scripted": lambda: ScriptedModel(scripts=DEMO_SCRIPTS)}
    client = await Client.connect(temporal_target, plugins=[StrandsPlugin(models=models)])
    workflow_id = f"gm-repair-{task_queue}"
    async with build_worker(client, task_queue):
        handle = await client.start_workflow(
            GameMasterWorkflow.run,
            GameMasterInput(prompt=REPAIR_PROMPT),
            id=workflow_id,
            task_queue=task_queue,
        )
        output = await asyncio.wait_for(handle.result(), RESULT_TIMEOUT_S)
        plan = await client.get_workflow_handle(f"{workflow_id}/plan/tooluse_1_0").fetch_history()
    assert output.answer["damage"] == {"hp_after": 7, "defeated": False}
    assert output.plans_rejected == 1
    assert (output.plans, output.steps_run, output.steps_reused) == (1, 3, 0)
    assert output.model_round_trips == 2 and output.plain_loop_round_trips == 4
    with pytest.raises(RPCError):  # the misspelled plan never became a workflow
        await client.get_workflow_handle(f"{workflow_id}/plan/tooluse_0_0").describe()
    scheduled = events(plan, EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED)
    ids = [e.activity_task_scheduled_event_attributes.activity_id for e in scheduled]
    assert ids == ["lookup", "attack", "damage"]
