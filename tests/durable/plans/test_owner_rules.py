"""The tool owner's rules hold inside plans: hooks, retries, timeouts, local, plannable, approvals.

Each bypass of issue 9 is reproduced here (in-process and durably where it
applies) and shown closed: a plan may tighten what the owner registered, never
loosen it.
"""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from strands import Agent, tool
from strands.hooks import AfterToolCallEvent, BeforeToolCallEvent
from strands.types.tools import ToolContext
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowFailureError
from temporalio.strands_agents import StrandsPlugin

from activities.game_master import GAME_TOOLS
from durable_plan import PlanWorkflow, plan_input, plan_worker, start_plan
from durable_plan.language.errors import PlanRejected
from durable_plan.local.runner import execute_plan
from durable_plan.strands.plugin import WorkflowPlanPlugin
from durable_plan.temporal.wire.messages import ApprovalDecision
from durable_plan.temporal.wire.result_form import expand_result
from durable_plan.testing import ScriptedModel, TurnLike, call, say
from durable_plan.testing.scripted_model import output
from durable_plan.tools.approval import args_digest
from durable_plan.tools.registry import ToolRegistry
from tests.support.helpers import acli_subprocess, arun_cli, until_phase
from tests.support.hooked_workflows import HookedAgentWorkflow, HookedInput

RUNS: list[str] = []
SLOW_GATE = threading.Event()
"""Holds a read of ``slow.txt`` until the test sets it (the read runs in an activity thread),
so a signal sent meanwhile deterministically arrives before the next step is reached."""
SLOW_GATE.set()
LAST_PLAN_ID = [""]


@tool
def read_file(path: str) -> dict[str, Any]:
    """Read a file.

    Args:
        path: the file
    """
    RUNS.append(f"read_file {path}")
    if path == "slow.txt":
        SLOW_GATE.wait(30)
    return {"path": path, "text": "hello"}


@tool
def delete_files(path: str) -> dict[str, Any]:
    """Delete files.

    Args:
        path: what to delete
    """
    RUNS.append(f"delete_files {path}")
    return {"deleted": path}


@tool(context=True)
def ask_person(question: str, tool_context: ToolContext) -> dict[str, Any]:
    """Ask a person.

    Args:
        question: the question
    """
    answer = tool_context.interrupt("ask", reason=question)
    return {"answer": answer}


def forbid_deletes(event: BeforeToolCallEvent) -> None:
    if event.tool_use["name"] == "delete_files":
        event.cancel_tool = "deleting files is not allowed here"


def shout_reads(event: BeforeToolCallEvent) -> None:
    if event.tool_use["name"] == "read_file":
        event.tool_use["input"]["path"] = event.tool_use["input"]["path"].upper()


def redact(event: AfterToolCallEvent) -> None:
    if event.tool_use["name"] == "read_file" and event.result["status"] == "success":
        event.result = {**event.result, "content": [{"json": {"text": "[redacted]"}}]}


def hooked_agent(script: list[TurnLike], *hooks: Any, **plugin: Any) -> Agent:
    agent = Agent(
        model=ScriptedModel(script),
        tools=[read_file, delete_files, ask_person],
        plugins=[WorkflowPlanPlugin(**plugin)],
        callback_handler=None,
    )
    for event_type, callback in hooks:
        agent.hooks.add_callback(event_type, callback)
    return agent


def results(agent: Agent) -> list[str]:
    return [
        json.dumps(block["toolResult"])
        for message in agent.messages
        for block in message["content"]
        if "toolResult" in block
    ]


@pytest.fixture(autouse=True)
def _clear() -> None:
    RUNS.clear()


# -- 1. hooks, in-process --------------------------------------------------------------------

DELETE_PLAN = {
    "steps": [
        {"id": "read", "tool": "read_file", "args": {"path": "a.txt"}},
        {"id": "rm", "tool": "delete_files", "bind": {"path": "steps.read.path"}},
    ]
}


def test_a_before_hook_that_cancels_a_direct_call_cancels_the_plan_step_too() -> None:
    direct = hooked_agent(
        [call("delete_files", path="x"), say("refused")], (BeforeToolCallEvent, forbid_deletes)
    )
    direct("delete x")
    assert RUNS == []
    planned = hooked_agent(
        [call("submit_workflow_plan", **DELETE_PLAN), say("refused")],
        (BeforeToolCallEvent, forbid_deletes),
    )
    planned("read then delete")
    assert RUNS == ["read_file a.txt"], "the hook kept delete_files from running"
    [text] = results(planned)
    assert (
        "step 'rm' (delete_files) failed: cancelled by a hook: deleting files is not allowed"
        in (text)
    )


def test_hooks_rewrite_a_steps_input_and_its_result() -> None:
    plan = {"steps": [{"id": "read", "tool": "read_file", "args": {"path": "a.txt"}}]}
    agent = hooked_agent(
        [call("submit_workflow_plan", **plan), say("done")],
        (BeforeToolCallEvent, shout_reads),
        (AfterToolCallEvent, redact),
    )
    agent("read")
    assert RUNS == ["read_file A.TXT"]
    [text] = results(agent)
    assert "[redacted]" in text and "hello" not in text


def test_a_tool_that_interrupts_inside_a_plan_says_to_call_it_directly() -> None:
    plan = {"steps": [{"id": "ask", "tool": "ask_person", "args": {"question": "ok?"}}]}
    agent = hooked_agent([call("submit_workflow_plan", **plan), say("I'll ask directly.")])
    agent("ask")
    [text] = results(agent)
    assert "asked for a person's input" in text and "call it directly" in text
    assert "Interrupt(id=" not in text


# -- 2. retries, timeouts, local can only be tightened ---------------------------------------


def owner_registry() -> ToolRegistry:
    registry = ToolRegistry()
    registry.add(read_file, retries=0, timeout_s=10)
    registry.add(delete_files, retries=1, timeout_s=5, allow_local=True)
    return registry


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("retries", 4, "more than the 0"),
        ("timeout_s", 30, "longer than the 10 s"),
        ("local", True, "may not run as a local activity"),
    ],
)
async def test_a_step_cannot_loosen_the_owners_rules(field: str, value: Any, words: str) -> None:
    plan = {"steps": [{"id": "a", "tool": "read_file", "args": {"path": "p"}, field: value}]}
    with pytest.raises(PlanRejected) as info:
        await execute_plan(plan, owner_registry())
    [problem] = info.value.problems
    assert (problem.code, problem.step, problem.field) == ("owner_rule", "a", field)
    assert words in problem.message
    assert RUNS == []


async def test_a_step_may_tighten_the_owners_rules() -> None:
    plan = {
        "steps": [
            {"id": "a", "tool": "delete_files", "args": {"path": "p"}, "retries": 0},
            {"id": "b", "tool": "delete_files", "args": {"path": "q"}, "timeout_s": 1},
            {"id": "c", "tool": "delete_files", "args": {"path": "r"}, "local": True},
        ]
    }
    result = await execute_plan(plan, owner_registry())
    assert result.ok


# -- 3. plannable=[] means nothing ------------------------------------------------------------


def test_an_empty_plannable_list_makes_nothing_plannable() -> None:
    plan = {"steps": [{"id": "read", "tool": "read_file", "args": {"path": "a"}}]}
    agent = hooked_agent([call("submit_workflow_plan", **plan), say("ok")], plannable=[])
    agent("read")
    assert RUNS == []
    [text] = results(agent)
    assert "cannot be planned" in text
    spec = agent.tool_registry.registry["submit_workflow_plan"].tool_spec
    assert "No tool can be planned" in spec["description"]


async def test_an_empty_tool_table_in_workflow_input_plans_nothing(
    client: Client, task_queue: str
) -> None:
    request = plan_input(DELETE_PLAN, owner_registry())
    request.tools = {}
    async with plan_worker(client, task_queue=task_queue, registry=owner_registry()):
        with pytest.raises(WorkflowFailureError) as info:
            await client.execute_workflow(
                PlanWorkflow.run, request, id=f"empty-{uuid.uuid4()}", task_queue=task_queue
            )
    assert "unknown tool 'read_file'" in str(info.value.cause)
    assert RUNS == []


# -- 2, durably: the workflow enforces the rules even for input that skipped the client ------


async def test_the_workflow_refuses_a_plan_that_loosens_the_rules(
    client: Client, task_queue: str
) -> None:
    registry = owner_registry()
    with pytest.raises(PlanRejected):
        await start_plan(
            client,
            {"steps": [{"id": "a", "tool": "read_file", "args": {"path": "p"}, "retries": 4}]},
            task_queue=task_queue,
            registry=registry,
        )
    request = plan_input(
        {"steps": [{"id": "a", "tool": "read_file", "args": {"path": "p"}}]}, registry
    )
    request.plan["steps"][0]["retries"] = 4  # tampered after the client's check
    async with plan_worker(client, task_queue=task_queue, registry=registry):
        with pytest.raises(WorkflowFailureError) as info:
            await client.execute_workflow(
                PlanWorkflow.run, request, id=f"loose-{uuid.uuid4()}", task_queue=task_queue
            )
    assert "more than the 0" in str(info.value.cause)
    assert RUNS == []


# -- 4. approvals are for the arguments a person saw -----------------------------------------


async def test_an_early_approve_signal_is_refused_and_the_person_sees_the_bound_args(
    client: Client, task_queue: str
) -> None:
    registry = ToolRegistry()
    registry.add(read_file)
    registry.add(delete_files, requires_approval=True)
    plan = {
        "steps": [
            {"id": "gate", "tool": "read_file", "args": {"path": "slow.txt"}},
            {"id": "rm", "tool": "delete_files", "bind": {"path": "steps.gate.path"}},
        ]
    }
    SLOW_GATE.clear()
    try:
        async with plan_worker(client, task_queue=task_queue, registry=registry):
            handle = await start_plan(client, plan, task_queue=task_queue, registry=registry)
            # Sent while 'gate' still runs, so before 'rm' is reached: must not pre-approve it.
            await handle.handle.signal("approve_step", ApprovalDecision("rm", True, "early"))
            SLOW_GATE.set()
            line = await until_phase(handle, "rm", "awaiting_approval")
            assert line["args"] == {"path": "slow.txt"}
            assert line["args_digest"] == args_digest({"path": "slow.txt"})
            assert any("not awaiting approval" in r for r in line.get("refused_decisions", []))
            with pytest.raises(ValueError, match="digest"):
                await handle.decide("rm", approved=True, args_digest="0" * 16)
            assert RUNS == ["read_file slow.txt"], "neither the early signal nor a bad digest ran"
            await handle.decide("rm", approved=True, args_digest=line["args_digest"])
            result = await handle.result()
    finally:
        SLOW_GATE.set()
    assert result.outcome("rm").status == "ok"
    assert RUNS == ["read_file slow.txt", "delete_files slow.txt"]


# -- 1, durably: the TemporalAgent's hooks run for each plan step ----------------------------

GOBLIN = {
    "steps": [
        {"id": "lookup", "tool": "look_up_monster", "args": {"name": "goblin"}},
        {"id": "attack", "tool": "roll_attack", "bind": {"armour": "steps.lookup.armour"}},
        {
            "id": "damage",
            "tool": "apply_damage",
            "bind": {"monster": "steps.lookup.name", "damage": "steps.attack.damage"},
        },
    ],
    "final": True,
}
OGRE = {
    "steps": [{"id": "hit", "tool": "apply_damage", "args": {"monster": "ogre", "damage": 9}}],
    "final": True,
}
OGRE_LOOP = {
    "steps": [
        {
            "id": "loop",
            "tool": "agent",
            "args": {
                "prompt": "Hit the ogre hard.",
                "output_schema": {"type": "object", "properties": {"hit": {"type": "boolean"}}},
                "tools": ["apply_damage"],
            },
        }
    ],
    "final": True,
}
SCRIPTS: dict[str, list[TurnLike]] = {
    "goblin": [call("submit_workflow_plan", **GOBLIN)],
    "ogre": [call("submit_workflow_plan", **OGRE), say("The ogre is protected.")],
    "ogre loop": [call("submit_workflow_plan", **OGRE_LOOP)],
    "Hit the ogre hard.": [
        call("apply_damage", monster="ogre", damage=9),
        output({"hit": False}),
    ],
}


@pytest.fixture(scope="module")
async def agent_client(temporal_target: str) -> AsyncIterator[Client]:
    model = {"scripted": lambda: ScriptedModel(scripts=SCRIPTS)}
    yield await Client.connect(temporal_target, plugins=[StrandsPlugin(models=model)])


async def converse(client: Client, task_queue: str, prompt: str) -> tuple[str, Any]:
    async with plan_worker(
        client, task_queue=task_queue, registry=GAME_TOOLS, workflows=[HookedAgentWorkflow]
    ):
        handle = await client.start_workflow(
            HookedAgentWorkflow.run,
            HookedInput(prompt),
            id=f"hooked-{uuid.uuid4().hex[:8]}",
            task_queue=task_queue,
        )
        answer = await asyncio.wait_for(handle.result(), 60)
        LAST_PLAN_ID[0] = f"{handle.id}/plan/tooluse_0_0"
        child = client.get_workflow_handle(LAST_PLAN_ID[0])
        child_result = expand_result(await child.result())  # the full form
    return answer, child_result


async def test_durable_plan_steps_pass_the_agents_hooks(
    agent_client: Client, task_queue: str
) -> None:
    answer, child = await converse(agent_client, task_queue, "goblin")
    returned = json.loads(answer)
    assert returned["lookup"]["checked"] is True, "the after-hook rewrote the result"
    assert returned["damage"] == {"hp_after": 4, "defeated": False}, "damage 6 halved to 3"
    assert [o["status"] for o in child["ledger"]] == ["ok", "ok", "ok"]


async def test_a_durable_plan_step_cancelled_by_the_agents_hook_fails_with_its_message(
    agent_client: Client, task_queue: str
) -> None:
    answer, child = await converse(agent_client, task_queue, "ogre")
    assert answer == "The ogre is protected."
    [line] = child["ledger"]
    assert line["status"] == "failed"
    assert line["error"] == "cancelled by a hook: the ogre may not be harmed"


async def _cli(*args: str) -> tuple[int, str, str]:
    done = await arun_cli(*args)
    return done.returncode, done.stdout, done.stderr


async def test_the_cli_shows_the_arguments_awaiting_approval_and_decides(
    client: Client, task_queue: str, temporal_target: str
) -> None:
    registry = ToolRegistry()
    registry.add(read_file)
    registry.add(delete_files, requires_approval=True)
    plan = {
        "steps": [
            {"id": "gate", "tool": "read_file", "args": {"path": "cli.txt"}},
            {"id": "rm", "tool": "delete_files", "bind": {"path": "steps.gate.path"}},
        ]
    }
    async with plan_worker(client, task_queue=task_queue, registry=registry):
        handle = await start_plan(client, plan, task_queue=task_queue, registry=registry)
        line = await until_phase(handle, "rm", "awaiting_approval")
        code, out, _ = await _cli("show", handle.id, "--address", temporal_target)
        assert code == 0
        assert 'arguments: {"path": "cli.txt"}' in out
        assert f"digest:    {line['args_digest']}" in out
        # `decide` as a subprocess, the way a user starts it (the rest run in this process).
        code, _, err = await acli_subprocess(
            "decide",
            handle.id,
            "rm",
            "--approve",
            "--digest",
            "f" * 16,
            "--address",
            temporal_target,
        )
        assert code == 1 and "digest" in err
        code, out, _ = await _cli(
            "decide",
            handle.id,
            "rm",
            "--approve",
            "--digest",
            line["args_digest"],
            "--address",
            temporal_target,
        )
        assert code == 0 and "rm: approved" in out
        result = await handle.result()
    assert result.outcome("rm").status == "ok"


async def test_tool_calls_inside_a_durable_agent_step_pass_the_agents_hooks(
    agent_client: Client, task_queue: str
) -> None:
    answer, child = await converse(agent_client, task_queue, "ogre loop")
    loop = json.loads(answer)["loop"]
    assert loop["output"] == {"hit": False} and loop["tools_called"][0]["tool"] == "apply_damage"
    [line] = child["ledger"]
    assert line["status"] == "ok"
    history = await agent_client.get_workflow_handle(
        f"{LAST_PLAN_ID[0]}/agent/loop"
    ).fetch_history()
    scheduled = [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]
    assert "apply_damage" not in scheduled, "the hook cancelled the call before its activity"
    inputs = [
        e.activity_task_scheduled_event_attributes.input.payloads[0].data.decode()
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]
    assert "the ogre may not be harmed" in inputs[-1], "the loop's model saw the hook's message"
