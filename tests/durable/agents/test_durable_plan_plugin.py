"""``DurablePlanPlugin`` in an existing Temporal app: the user's own client and worker, one
plugin added, on the dev server (issue 48).

A user's worker with the plugin runs a conversation whose plans and agent steps complete; the
same with encryption and External Storage on, history holding no plaintext; a tool-only
worker serves only its queue's tools; a client built with the plugin reads a plan's stored
results; the plugin composes with ``StrandsPlugin`` in either order; a user's own setting is
kept or refused with a clear message, never silently replaced.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Callable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from temporalio import activity
from temporalio.api.common.v1 import Payload
from temporalio.client import Client, WorkflowFailureError
from temporalio.contrib.pydantic import PydanticPayloadConverter
from temporalio.converter import DataConverter, PayloadCodec
from temporalio.strands_agents import StrandsPlugin
from temporalio.worker import Worker

from durable_plan.protect.converter import codec_of
from durable_plan.protect.encryption import EncryptionPlugin, Keyring, new_key
from durable_plan.protect.payload_storage import (
    FileStorageDriver,
    external_storage,
    unconfigured_storage,
)
from durable_plan.temporal.client.start import start_plan
from durable_plan.temporal.worker.plugin import (
    GRACEFUL_SHUTDOWN,
    STICKY_TIMEOUT,
    DurablePlanPlugin,
)
from durable_plan.temporal.workflows.plan_workflow import PlanWorkflow
from durable_plan.testing import ScriptedModel, call, output
from tests.support.plugin_app_tools import (
    APP_TOOLS,
    SECRET,
    note_answer,
    routed_tools,
)
from tests.support.plugin_app_workflows import AppConversation, FailingConversation

ROOT = Path(__file__).resolve().parents[3]
VERDICT = {
    "type": "object",
    "required": ["verdict"],
    "properties": {"verdict": {"type": "string"}},
    "additionalProperties": False,
}
PLAN: dict[str, Any] = {
    "steps": [
        {"id": "lookup", "tool": "look_up_monster", "args": {"name": "goblin"}},
        {
            "id": "assess",
            "tool": "agent",
            "args": {
                "prompt": "Assess {{ steps.lookup.name }} with {{ steps.lookup.hp }} hp",
                "output_schema": VERDICT,
            },
        },
    ],
    "returns": ["lookup", "assess"],
    "final": True,
}
SCRIPTS = {
    # A direct call of a registry tool (the plan tool plugin gave it), then a plan.
    "ATTACK": [call("look_up_monster", name="goblin"), call("submit_workflow_plan", **PLAN)],
    "Assess goblin with 3 hp": [output({"verdict": "weak"})],
}


def models() -> dict[str, Callable[[], Any]]:
    return {"scripted": lambda: ScriptedModel(scripts=SCRIPTS)}


def with_plugins(client: Client, plugins: Sequence[Any], **config: Any) -> Client:
    """The user's own client: the session's connection, their plugins (and converter)."""
    return Client(**{**client.config(), "plugins": list(plugins), **config})


def keyring(key_id: str = "app-1") -> Keyring:
    return Keyring((new_key(key_id),))


def raw_bytes(history: Any) -> bytes:
    return b"".join(event.SerializeToString() for event in history.events)


async def converse(client: Client, task_queue: str, prompt: str = "ATTACK") -> dict[str, Any]:
    workflow_id = f"app-{uuid.uuid4().hex[:8]}"
    result: dict[str, Any] = await asyncio.wait_for(
        client.execute_workflow(AppConversation.run, prompt, id=workflow_id, task_queue=task_queue),
        90,
    )
    result["id"] = workflow_id
    return result


def assert_completed(result: dict[str, Any]) -> None:
    """The direct call, then the plan (its tool step and its agent step) ran, and the app's
    own activity after them."""
    assert result["tools_used"] == ["look_up_monster", "submit_workflow_plan"], result
    assert result["statuses"] == ["success", "success"], "the direct call ran, as the plan did"
    answer = json.loads(result["answer"])
    assert answer["assess"]["output"] == {"verdict": "weak"}, answer
    assert answer["lookup"]["name"] == "goblin", answer
    assert result["noted"].startswith("noted "), result


async def test_a_users_own_worker_with_the_plugin_runs_plans_and_agent_steps(
    client: Client, task_queue: str
) -> None:
    """Their client (StrandsPlugin for the models), their worker (their workflow, their
    activity, their queue): the plugin on the worker is all durable-plan adds."""
    app = with_plugins(client, [StrandsPlugin(models=models())])
    worker = Worker(
        app,
        task_queue=task_queue,
        workflows=[AppConversation],
        activities=[note_answer],
        plugins=[DurablePlanPlugin(APP_TOOLS)],
    )
    async with worker:
        result = await converse(app, task_queue)
    assert_completed(result)
    history = await app.get_workflow_handle(result["id"]).fetch_history()
    children = [
        e.start_child_workflow_execution_initiated_event_attributes.workflow_type.name
        for e in history.events
        if e.HasField("start_child_workflow_execution_initiated_event_attributes")
    ]
    assert children == ["PlanWorkflow"], children


async def test_an_agent_error_ends_the_workflow_with_its_root_cause(
    client: Client, task_queue: str
) -> None:
    app = with_plugins(client, [StrandsPlugin(models=models()), DurablePlanPlugin(APP_TOOLS)])
    async with Worker(app, task_queue=task_queue, workflows=[FailingConversation]):
        with pytest.raises(WorkflowFailureError) as failed:
            await asyncio.wait_for(
                app.execute_workflow(
                    FailingConversation.run,
                    "hello",
                    id=f"fail-{uuid.uuid4().hex[:8]}",
                    task_queue=task_queue,
                ),
                60,
            )
    cause = failed.value.cause
    assert "no-such-model" in str(cause), cause
    assert getattr(cause, "non_retryable", False), "ended, not a workflow task retried forever"


@pytest.mark.parametrize("strands_first", [True, False], ids=["strands-first", "plugin-first"])
async def test_encryption_and_external_storage_leave_no_plaintext_in_history(
    client: Client, task_queue: str, tmp_path: Path, strands_first: bool
) -> None:
    """The plugin on the client (so the worker built from it agrees), with StrandsPlugin in
    either order: a 300 KiB prompt goes to External Storage, every payload is sealed."""
    keys = keyring()
    plugin = DurablePlanPlugin(APP_TOOLS, encryption=keys, payload_storage=str(tmp_path))
    plugins: list[Any] = [StrandsPlugin(models=models()), plugin]
    if not strands_first:
        plugins.reverse()
    app = with_plugins(client, plugins)
    converter = app.config(active_config=True)["data_converter"]
    assert converter.payload_converter_class is PydanticPayloadConverter  # Strands' kept
    assert codec_of(converter) is not None and converter.external_storage is not None
    prompt = "ATTACK " + (SECRET + " ") * (300 * 1024 // len(SECRET))
    async with Worker(
        app, task_queue=task_queue, workflows=[AppConversation], activities=[note_answer]
    ):
        result = await converse(app, task_queue, prompt)
    assert_completed(result)
    assert SECRET in result["answer"], "the plugin's client reads it all back"

    ids = [result["id"]]
    history = await client.get_workflow_handle(result["id"]).fetch_history()
    for event in history.events:
        attrs = event.start_child_workflow_execution_initiated_event_attributes
        if attrs.workflow_id:
            ids.append(attrs.workflow_id)
    assert len(ids) == 2, ids
    plan_history = await client.get_workflow_handle(ids[1]).fetch_history()
    for event in plan_history.events:
        attrs = event.start_child_workflow_execution_initiated_event_attributes
        if attrs.workflow_id:
            ids.append(attrs.workflow_id)
    assert len(ids) == 3, "conversation, plan, agent step"
    for workflow_id in ids:  # read with the session's client: no codec, no storage
        raw = raw_bytes(await client.get_workflow_handle(workflow_id).fetch_history())
        assert SECRET.encode() not in raw, workflow_id
    stored = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert stored, "the large payloads went to External Storage"
    assert all(SECRET.encode() not in p.read_bytes() for p in stored), "stored sealed"


async def test_the_plugin_on_a_worker_alone_seals_what_that_worker_writes(
    client: Client, task_queue: str
) -> None:
    """Keys given to the plugin on the worker only (the app's client stays as it is): that
    worker runs on a client of the same connection that seals, its activities too."""
    keys = keyring()
    worker = Worker(
        client, task_queue=task_queue, plugins=[DurablePlanPlugin(APP_TOOLS, encryption=keys)]
    )
    assert codec_of(worker.client.data_converter) is not None
    assert codec_of(client.data_converter) is None, "the app's own client is not changed"
    sealed = with_plugins(client, [EncryptionPlugin(keys)])
    plan = {"steps": [{"id": "look", "tool": "look_up_monster", "args": {"name": "orc"}}]}
    async with worker:
        handle = await start_plan(sealed, plan, task_queue=task_queue, registry=APP_TOOLS)
        result = await asyncio.wait_for(handle.result(), 60)
    assert result.returned["look"]["note"] == f"{SECRET} of orc"
    raw = raw_bytes(await client.get_workflow_handle(handle.id).fetch_history())
    assert SECRET.encode() not in raw


async def test_a_tool_only_worker_serves_only_its_queues_tools(
    client: Client, task_queue: str
) -> None:
    vault = f"{task_queue}-vault"
    registry = routed_tools(vault)
    app = with_plugins(client, [DurablePlanPlugin(registry)])
    plans = Worker(app, task_queue=task_queue)
    tools = Worker(app, task_queue=vault)
    config = tools.config(active_config=True)
    assert config.get("workflows") in (None, [])
    names = {activity._Definition.must_from_callable(a).name for a in config["activities"]}
    assert names == {"where_am_i"}
    assert config.get("max_concurrent_activities") == 2  # the owner's limit
    plan_config = plans.config(active_config=True)
    assert PlanWorkflow in plan_config["workflows"]
    async with plans, tools:
        handle = await start_plan(
            app,
            {
                "steps": [
                    {"id": "look", "tool": "look_up_monster", "args": {"name": "orc"}},
                    {"id": "where", "tool": "where_am_i"},
                ]
            },
            task_queue=task_queue,
            registry=registry,
        )
        result = await asyncio.wait_for(handle.result(), 60)
    assert result.returned["where"] == {"queue": vault}, result.returned


async def test_a_client_built_with_the_plugin_reads_a_plans_stored_results(
    client: Client, task_queue: str, tmp_path: Path
) -> None:
    """A 300 KiB result: kept by reference in the result store (sealed), read back into the
    plan's result (``return_stored="value"``), which External Storage keeps (sealed): the
    plugin's client reads it; a client without the plugin cannot."""
    from durable_plan.protect.result_store import FileResultStore

    keys = keyring()
    plugin = DurablePlanPlugin(
        APP_TOOLS,
        encryption=keys,
        payload_storage=str(tmp_path / "payloads"),
        result_store=FileResultStore(tmp_path / "results"),
    )
    app = with_plugins(client, [plugin])
    plan = {"steps": [{"id": "scroll", "tool": "read_scroll", "args": {"pages": 1}}]}
    async with Worker(app, task_queue=task_queue):
        handle = await start_plan(
            app,
            plan,
            task_queue=task_queue,
            registry=APP_TOOLS,
            max_result_bytes=1024 * 1024,  # read back whole; kept by reference past 256 KiB
            return_stored="value",
        )
        result = await asyncio.wait_for(handle.result(), 60)
    text = result.returned["scroll"]["text"]
    assert text.startswith(SECRET) and len(text) > 300 * 1024
    assert list((tmp_path / "payloads").rglob("*")), "the result went to External Storage"
    for stored in (tmp_path / "results").rglob("*"):
        if stored.is_file():
            assert SECRET.encode() not in stored.read_bytes(), stored
    with pytest.raises(Exception):  # noqa: B017 - whichever: it cannot be read without keys
        await client.get_workflow_handle(handle.id).result()


async def test_the_users_worker_settings_are_kept_and_the_defaults_fill_the_rest(
    client: Client, task_queue: str
) -> None:
    worker = Worker(
        client,
        task_queue=task_queue,
        activities=[note_answer],
        max_concurrent_activities=3,
        sticky_queue_schedule_to_start_timeout=timedelta(seconds=5),
        plugins=[DurablePlanPlugin(APP_TOOLS)],
    )
    config = worker.config(active_config=True)
    assert config.get("max_concurrent_activities") == 3
    assert config.get("sticky_queue_schedule_to_start_timeout") == timedelta(seconds=5)
    assert config.get("graceful_shutdown_timeout") == GRACEFUL_SHUTDOWN  # unset: ours
    plain = Worker(client, task_queue=f"{task_queue}-2", plugins=[DurablePlanPlugin(APP_TOOLS)])
    defaults = plain.config(active_config=True)
    assert defaults.get("sticky_queue_schedule_to_start_timeout") == STICKY_TIMEOUT
    assert defaults.get("max_concurrent_activities") is None


def test_a_setting_the_plugin_cannot_keep_is_refused_clearly(client: Client) -> None:
    registry = routed_tools("vault")
    with pytest.raises(ValueError, match=r"max_concurrent_activities=9 .* above the limit .*\(2"):
        Worker(
            client,
            task_queue="vault",
            max_concurrent_activities=9,
            plugins=[DurablePlanPlugin(registry)],
        )
    own = DataConverter(external_storage=external_storage(FileStorageDriver("/tmp/own")))
    with pytest.raises(ValueError, match="External Storage of its own"):
        with_plugins(client, [DurablePlanPlugin(payload_storage="/tmp/other")], data_converter=own)
    with pytest.raises(ValueError, match="other keys"):
        with_plugins(
            client, [EncryptionPlugin(keyring("a")), DurablePlanPlugin(encryption=keyring("b"))]
        )
    twice = with_plugins(client, [DurablePlanPlugin(APP_TOOLS)])
    with pytest.warns(UserWarning), pytest.raises(ValueError, match="given twice"):
        Worker(twice, task_queue="q", plugins=[DurablePlanPlugin(APP_TOOLS)])


class Marker(PayloadCodec):
    """The user's own codec (compression, say): it stays, encryption goes after it."""

    def __init__(self) -> None:
        self.seen = 0

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        self.seen += len(payloads)
        return list(payloads)

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return list(payloads)


async def test_the_users_own_data_converter_is_kept(client: Client) -> None:
    marker = Marker()
    own_storage = external_storage(FileStorageDriver("/tmp/own"))
    own = dataclasses.replace(
        DataConverter.default, payload_codec=marker, external_storage=own_storage
    )
    app = with_plugins(client, [DurablePlanPlugin(encryption=keyring())], data_converter=own)
    converter = app.config(active_config=True)["data_converter"]
    assert converter.external_storage is own_storage, "their storage, not replaced"
    assert codec_of(converter) is not None
    [sealed] = await converter.encode([{"secret": SECRET}])
    assert marker.seen == 1 and SECRET.encode() not in sealed.data
    # No storage of theirs: the plugin's (here: one that only refuses reads, clearly).
    bare = with_plugins(client, [DurablePlanPlugin(payload_storage=False)])
    storage = bare.config(active_config=True)["data_converter"].external_storage
    assert type(storage) is type(unconfigured_storage())


def test_the_plan_tool_plugin_gives_the_registrys_tools_unless_plan_only() -> None:
    """Direct calls by default (the tools the agent does not carry), none for a plan-only
    agent; the old keyword arguments still work and land in their records."""
    from strands import Agent

    from durable_plan.strands.options import PlanBounds
    from durable_plan.strands.plugin import WorkflowPlanPlugin

    def tools(plugin: WorkflowPlanPlugin) -> list[str]:
        agent = Agent(model=ScriptedModel([]), plugins=[plugin], callback_handler=None)
        return sorted(agent.tool_registry.registry)

    assert tools(WorkflowPlanPlugin(registry=APP_TOOLS)) == [
        "look_up_monster",
        "read_scroll",
        "submit_workflow_plan",
    ]
    assert tools(WorkflowPlanPlugin(registry=APP_TOOLS, direct_tools=False)) == [
        "submit_workflow_plan"
    ]
    old = WorkflowPlanPlugin(max_steps=5, honor_final=False, remember_steps=0)
    assert old.bounds == PlanBounds(max_steps=5) and old.max_steps == 5
    assert not old.honor_final and not old.memory.enabled
    with pytest.raises(TypeError, match="unexpected keyword argument 'max_stepz'"):
        WorkflowPlanPlugin(max_stepz=5)


def test_the_embedding_example_runs_as_written(temporal_target: str) -> None:
    """``examples/existing_app.py``, with its workflow ``examples/existing_app_workflow.py``,
    as the README shows them."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "existing_app.py")],
        cwd=ROOT,
        env={**os.environ, "TEMPORAL_ADDRESS": temporal_target},
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert '"damage"' in done.stdout, done.stdout
