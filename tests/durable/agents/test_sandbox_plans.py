"""The conversation's sandbox inside its plans, on the session's dev server.

A ``TemporalAgent`` with ``TemporalSandbox("work")`` writes files directly (the SDK's sandbox
activities); its plans' steps, map items and agent steps call ``sandbox_shell``,
``sandbox_file_editor`` and an owner's ``count_lines`` in the same environment: the factory
registered through ``StrandsPlugin(sandboxes={"work": ...})`` (a real ``DirSandbox`` per chain,
``tests/support/sandbox_support.py``), called by our wrapper activity with the conversation's
chain. No mocks: real commands in real directories.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.contrib.workflow_streams import WorkflowStreamClient
from temporalio.strands_agents import StrandsPlugin

from durable_plan import plan_worker, start_plan
from durable_plan.run.references import is_reference
from durable_plan.temporal.activities.sandbox_calls import (
    PlanSandboxStreamEvent,
    sdk_sandbox_activities,
)
from durable_plan.testing import ScriptedModel
from tests.support.helpers import until_phase
from tests.support.sandbox_support import (
    BASE_ENV,
    CALLS_FILE,
    SANDBOX,
    chain_sandboxes,
    sandbox_scripts,
)
from tests.support.sandbox_workflows import (
    REGISTRIES,
    SANDBOX_TOPIC,
    SandboxChatInput,
    SandboxChatWorkflow,
)


@pytest.fixture(scope="module")
async def sandbox_client(temporal_target: str) -> AsyncIterator[Client]:
    plugin = StrandsPlugin(
        models={"scripted": lambda: ScriptedModel(scripts=sandbox_scripts())},
        sandboxes={SANDBOX: chain_sandboxes()},
    )
    yield await Client.connect(temporal_target, plugins=[plugin])


@pytest.fixture
def base(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Where this test's environments live (one directory per workflow chain)."""
    path = tmp_path / "sandboxes"
    path.mkdir()
    monkeypatch.setenv(BASE_ENV, str(path))
    return path


def new_id(tag: str) -> str:
    return f"sandbox-{tag}-{uuid.uuid4().hex[:8]}"


async def converse(
    client: Client, task_queue: str, *prompts: str, tools: str = "plain", workflow_id: str = ""
) -> tuple[dict[str, Any], str]:
    workflow_id = workflow_id or new_id("chat")
    async with plan_worker(
        client, task_queue=task_queue, registry=REGISTRIES[tools], workflows=[SandboxChatWorkflow]
    ):
        out = await client.execute_workflow(
            SandboxChatWorkflow.run,
            SandboxChatInput(list(prompts), tools),
            id=workflow_id,
            task_queue=task_queue,
        )
    return out, workflow_id


def environments(base: Path) -> list[str]:
    """The chain directories the factory made (one per environment)."""
    return sorted(p.name for p in base.iterdir() if p.is_dir())


def factory_chains(base: Path) -> set[str]:
    """The workflow ids every factory call was asked for (the SDK's and ours)."""
    return {line.split()[0] for line in (base / CALLS_FILE).read_text().splitlines()}


def calls_of(calls: list[str], workflow_id: str) -> list[str]:
    return [c for c in calls if c.startswith(workflow_id + " ")]


def text_of(result: dict[str, Any]) -> str:
    return " ".join(
        b.get("text") or json.dumps(b.get("json")) for b in result["content"] if isinstance(b, dict)
    )


def plan_json(result: dict[str, Any]) -> dict[str, Any]:
    [block] = [b for b in result["content"] if "json" in b]
    value: dict[str, Any] = block["json"]
    return value


async def test_a_plan_reads_edits_and_runs_in_the_conversations_environment(
    sandbox_client: Client, task_queue: str, base: Path
) -> None:
    out, workflow_id = await converse(sandbox_client, task_queue, "edit in a plan")
    created, plan, cat = out["results"]
    assert created["status"] == "success", created
    assert plan["status"] == "success", plan
    returned = plan_json(plan)["returned"]
    assert "beta" in json.dumps(returned["read"])  # read what the agent wrote directly
    assert returned["run"] == {"output": "2\n", "error": "", "exit_code": 0}
    assert returned["lines"] == {"path": "/notes.txt", "lines": 2}
    # The agent's next direct call (the SDK's activity) sees the plan's change.
    assert cat["status"] == "success" and "gamma" in text_of(cat), cat
    [env] = environments(base)
    assert (
        env.startswith(workflow_id) and (base / env / "notes.txt").read_text() == "alpha\ngamma\n"
    )
    assert factory_chains(base) == {workflow_id}  # the plan never reached another chain


async def test_an_agent_step_edits_in_the_conversations_environment(
    sandbox_client: Client, task_queue: str, base: Path
) -> None:
    out, workflow_id = await converse(sandbox_client, task_queue, "fix in an agent step")
    _created, plan, cat = out["results"]
    assert plan["status"] == "success", plan
    fix = plan_json(plan)["returned"]["fix"]
    assert fix["output"] == {"fixed": True}
    assert [t["path"] for t in fix["tools_called"]] == [
        "fix/agent.1/sandbox_file_editor",
        "fix/agent.2/sandbox_shell",
    ]
    assert "delta" in text_of(cat), cat
    assert factory_chains(base) == {workflow_id}
    assert len(environments(base)) == 1


async def test_a_map_edits_each_file_in_the_conversations_environment(
    sandbox_client: Client, task_queue: str, base: Path
) -> None:
    out, workflow_id = await converse(sandbox_client, task_queue, "edit over files")
    results = out["results"]
    plan, cat = results[-2], results[-1]
    assert plan["status"] == "success", plan
    assert json.loads(text_of(cat))["output"] == "y1\ny2\n", cat
    assert factory_chains(base) == {workflow_id}


async def test_an_owners_sandbox_tool_called_directly_uses_the_conversations_environment(
    sandbox_client: Client, task_queue: str, base: Path
) -> None:
    """``count_lines`` is not the sandbox's own tool: the plugin gives it to the agent for
    direct calls (``direct_tools``), which run through the same wrapper, in this chain."""
    out, workflow_id = await converse(sandbox_client, task_queue, "count directly")
    counted = out["results"][1]
    assert counted["status"] == "success", counted
    assert '"lines": 2' in json.dumps(counted["content"]), counted
    assert factory_chains(base) == {workflow_id}


async def test_a_conversation_that_continued_as_new_keeps_its_environment(
    sandbox_client: Client, task_queue: str, base: Path
) -> None:
    """The chain is the first run's: after continue-as-new the next run's plan still reads
    what the first run wrote (and the factory is never asked for another chain)."""
    workflow_id = new_id("renewed")
    async with plan_worker(
        sandbox_client,
        task_queue=task_queue,
        registry=REGISTRIES["plain"],
        workflows=[SandboxChatWorkflow],
    ):
        handle = await sandbox_client.start_workflow(
            SandboxChatWorkflow.run,
            SandboxChatInput(["keep a secret red", "and now?"], continue_as_new=True),
            id=workflow_id,
            task_queue=task_queue,
        )
        out = await handle.result()
        runs = [w async for w in sandbox_client.list_workflows(f"WorkflowId = '{workflow_id}'")]
    assert len(runs) == 2, runs  # it did continue as new
    assert plan_json(out["results"][1])["returned"]["peek"]["output"] == "red\n"
    assert factory_chains(base) == {workflow_id}
    assert len(environments(base)) == 1


async def test_a_saved_plans_steps_run_in_the_callers_environment(
    sandbox_client: Client, task_queue: str, base: Path
) -> None:
    out, workflow_id = await converse(
        sandbox_client, task_queue, "peek in a saved plan", tools="nested"
    )
    plan = out["results"][1]
    assert plan["status"] == "success", plan
    nested = plan_json(plan)["returned"]["nested"]
    assert "alpha" in json.dumps(nested), nested
    assert factory_chains(base) == {workflow_id}


async def test_a_plan_started_outside_a_conversation_uses_its_own_chain(
    sandbox_client: Client, task_queue: str, base: Path
) -> None:
    plan_id = new_id("alone")
    plan = {
        "steps": [
            {
                "id": "write",
                "tool": "sandbox_file_editor",
                "args": {"command": "create", "path": "/own.txt", "file_text": "mine\n"},
            },
            {
                "id": "read",
                "tool": "sandbox_shell",
                "args": {"command": "cat own.txt"},
                "after": ["write"],
            },
            {
                "id": "notes",
                "tool": "sandbox_file_editor",
                "args": {"command": "create", "path": "/notes.txt", "file_text": "n1\n"},
            },
            {"id": "nested", "tool": "plan__peek_notes", "after": ["notes"]},
        ],
        "returns": ["read", "nested"],
    }
    tools = REGISTRIES["nested"]
    async with plan_worker(sandbox_client, task_queue=task_queue, registry=tools):
        handle = await start_plan(
            sandbox_client, plan, task_queue=task_queue, registry=tools, workflow_id=plan_id
        )
        result = await handle.result()
    assert result.ok, result
    assert result.returned["read"]["output"] == "mine\n"
    # Its saved plan's child runs in the same environment, the top-level plan's.
    assert "n1" in json.dumps(result.returned["nested"])
    assert factory_chains(base) == {plan_id}  # its own chain: an environment of its own


async def test_a_large_command_output_is_kept_by_reference_like_any_result(
    sandbox_client: Client, task_queue: str, base: Path
) -> None:
    plan = {
        "steps": [
            {
                "id": "big",
                "tool": "sandbox_shell",
                "args": {"command": "head -c 400000 /dev/zero | tr '\\0' a"},
            }
        ],
        "returns": ["big"],
    }
    async with plan_worker(sandbox_client, task_queue=task_queue, registry=REGISTRIES["plain"]):
        handle = await start_plan(
            sandbox_client, plan, task_queue=task_queue, registry=REGISTRIES["plain"]
        )
        result = await handle.result()
        history = await handle.handle.fetch_history()
    assert result.ok, result
    assert is_reference(result.returned["big"]), str(result.returned["big"])[:300]
    assert history.to_json().count("aaaa") < 100  # the output itself never entered history


async def test_two_conversations_never_see_each_others_files(
    sandbox_client: Client, task_queue: str, base: Path
) -> None:
    red_id, blue_id, other_id = new_id("red"), new_id("blue"), new_id("other")
    async with plan_worker(
        sandbox_client,
        task_queue=task_queue,
        registry=REGISTRIES["plain"],
        workflows=[SandboxChatWorkflow],
    ):
        outs = await asyncio.gather(
            *(
                sandbox_client.execute_workflow(
                    SandboxChatWorkflow.run,
                    SandboxChatInput(prompts),
                    id=wid,
                    task_queue=task_queue,
                )
                for wid, prompts in (
                    (red_id, ["keep a secret red", "and now?"]),
                    (blue_id, ["keep a secret blue", "and now?"]),
                    (other_id, ["read another's secret"]),
                )
            )
        )
    red, blue, other = outs
    assert plan_json(red["results"][1])["returned"]["peek"]["output"] == "red\n"
    assert plan_json(blue["results"][1])["returned"]["peek"]["output"] == "blue\n"
    # A third conversation has no secret.txt: its environment is its own (and a missing
    # path fails the step at once, as the SDK's FileNotFoundError does: not retried).
    [failed] = other["results"]
    assert failed["status"] == "error" and "No such file" in text_of(failed), failed
    calls = (base / CALLS_FILE).read_text().splitlines()
    assert len(calls_of(calls, other_id)) == 1  # one attempt: a missing path is not retried
    assert factory_chains(base) == {red_id, blue_id, other_id}
    assert len(environments(base)) == 3


async def test_a_plan_forging_a_chain_identity_is_refused(
    sandbox_client: Client, task_queue: str, base: Path
) -> None:
    out, _ = await converse(sandbox_client, task_queue, "forge a chain")
    [refused] = out["results"]
    assert refused["status"] == "error"
    assert "tool 'sandbox_shell' has no argument 'chain_workflow_id'" in text_of(refused)
    assert not (base / CALLS_FILE).exists()  # nothing ran, no environment was asked for


async def test_a_gated_sandbox_shell_waits_for_a_person_inside_the_plan(
    sandbox_client: Client, task_queue: str, base: Path
) -> None:
    workflow_id = new_id("gated")
    async with plan_worker(
        sandbox_client,
        task_queue=task_queue,
        registry=REGISTRIES["gated"],
        workflows=[SandboxChatWorkflow],
    ):
        handle = await sandbox_client.start_workflow(
            SandboxChatWorkflow.run,
            SandboxChatInput(["gated command"], "gated"),
            id=workflow_id,
            task_queue=task_queue,
        )
        child = sandbox_client.get_workflow_handle(f"{workflow_id}/plan/tooluse_1_0")
        await until_phase(child, "run", "awaiting_approval", timeout_s=30)
        # Nothing of the step runs before the person decides.
        assert not (await child.describe()).raw_description.pending_activities
        assert await child.execute_update("decide_step", {"step_id": "run", "approved": True})
        out = await handle.result()
    plan = out["results"][1]
    assert plan_json(plan)["returned"]["run"]["output"].split() == ["2", "notes.txt"]


async def test_a_plan_steps_output_streams_to_the_conversation_by_its_path(
    sandbox_client: Client, task_queue: str, base: Path
) -> None:
    """The conversation's sandbox streams on ``SANDBOX_TOPIC``: a plan step's command output is
    published there too, each chunk naming the step's path (the agent's direct calls' chunks,
    published by the SDK, have none)."""
    workflow_id = new_id("stream")
    seen: list[PlanSandboxStreamEvent] = []

    async def read() -> None:
        stream = WorkflowStreamClient.create(sandbox_client, workflow_id)
        topics = [SANDBOX_TOPIC]
        async for item in stream.subscribe(topics, result_type=PlanSandboxStreamEvent):
            seen.append(item.data)

    async with plan_worker(
        sandbox_client,
        task_queue=task_queue,
        registry=REGISTRIES["plain"],
        workflows=[SandboxChatWorkflow],
    ):
        handle = await sandbox_client.start_workflow(
            SandboxChatWorkflow.run,
            SandboxChatInput(["edit in a plan"]),
            id=workflow_id,
            task_queue=task_queue,
        )
        reading = asyncio.ensure_future(read())
        out = await handle.result()
        deadline = asyncio.get_running_loop().time() + 10
        while len({e.path for e in seen}) < 2 and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.1)
        reading.cancel()
    assert out["results"][1]["status"] == "success"
    by_path = {e.path: e.chunk.data for e in seen}
    assert by_path.get("run") == "2\n", seen  # the plan's step, by its path
    assert "" in by_path and "gamma" in by_path[""]  # the agent's direct `cat`


def test_the_sdks_sandbox_factories_are_found_where_we_look() -> None:
    """``sandbox_calls`` reads StrandsPlugin's factories from its activities' definitions:
    this fails first, and clearly, if an SDK release moves them."""
    factory = chain_sandboxes()
    plugin = StrandsPlugin(models={}, sandboxes={SANDBOX: factory})
    sdk = sdk_sandbox_activities(plugin.activities or [])  # type: ignore[arg-type]
    assert sdk is not None and sdk._factories == {SANDBOX: factory}


def scheduled_types(events: Any) -> list[str]:
    return [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]
