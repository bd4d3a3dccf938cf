"""Every path a tool call takes holds every rule of the tool's owner.

A tool call starts from one of these places: a plan step, a map item, a tool call inside an
agent step, or the model calling the tool directly (outside any plan), each in-process (a
plain Strands ``Agent``) and durably (a ``TemporalAgent`` conversation on the dev server).
Each path is walked here against each rule the owner set when registering the tool
(``tests/support/call_path_tools.py``), so a rule missing on any one path fails its own case:

* approval (``requires_approval=True``): a person is asked before the tool runs, and a
  rejection stops the call with no side effect. In-process a plan cannot stop to ask, so
  there the gated tool is refused before the plan runs ("call it directly") and a direct
  call stops the agent with a Strands interrupt until the person answers;
* the owner's hook (a ``BeforeToolCallEvent`` callback on the agent) runs for the call;
* the owner's retries (``retries=2``: three attempts durably; in-process calls are never
  retried, the runners' documented difference) and timeout (``timeout_s=1``).

MCP calls are not walked here: an MCP tool's owner is its server, and its plan steps take
the same stages as a registered tool's (``step_activities.call_activity``); they are
tested with a real MCP server in ``tests/durable/plans/test_mcp.py`` (slow tier).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
from strands import Agent
from strands.hooks import BeforeToolCallEvent
from temporalio.client import Client, WorkflowQueryFailedError
from temporalio.service import RPCError
from temporalio.strands_agents import StrandsPlugin

from durable_plan import plan_worker
from durable_plan.strands.plugin import WorkflowPlanPlugin
from durable_plan.temporal.client.start import PlanHandle
from durable_plan.temporal.workflows.agent_tools import durable_tools
from durable_plan.temporal.workflows.direct_calls import DIRECT_CALLS_QUERY
from durable_plan.testing import ScriptedModel, TurnLike, call, say
from durable_plan.testing.scripted_model import output
from tests.support.call_path_tools import OWNER_NOTE, RUNS, SLEEP_S, TOOLS, owners_hook
from tests.support.call_paths_workflows import CallPathsWorkflow

PATHS = ("plan step", "map item", "agent step", "direct call")
RULES = ("approval rejected", "approval given", "hook", "retries", "timeout")
CALLS: dict[str, tuple[str, dict[str, Any]]] = {
    "approval rejected": ("charge", {"cents": 500}),
    "approval given": ("charge", {"cents": 700}),
    "hook": ("stamp", {"tag": "t1"}),
    "retries": ("wobbly", {"tag": "t2"}),
    "timeout": ("sleepy", {"tag": "t3"}),
}
LOOP_SCHEMA = {"type": "object", "properties": {"done": {"type": "boolean"}}}


def prompt(path: str, rule: str) -> str:
    return f"{path}, {rule}"


def loop_prompt(rule: str) -> str:
    return f"inside an agent step, {rule}"


def plan_for(path: str, rule: str) -> dict[str, Any]:
    tool, args = CALLS[rule]
    if path == "plan step":
        step = {"id": "s", "tool": tool, "args": args}
    elif path == "map item":
        step = {"id": "m", "tool": "map", "args": {"over": [1], "do": {"tool": tool, "args": args}}}
    else:
        loop = {"prompt": loop_prompt(rule), "output_schema": LOOP_SCHEMA, "tools": [tool]}
        step = {"id": "a", "tool": "agent", "args": loop}
    return {"steps": [step], "final": False}


def script(path: str, rule: str) -> list[TurnLike]:
    tool, args = CALLS[rule]
    first = (
        call(tool, **args)
        if path == "direct call"
        else call("submit_workflow_plan", **plan_for(path, rule))
    )
    return [first, say("done")]


BLOBS_PROMPT = "direct calls of large results"
BLOB_KIB = 240
"""Under a direct call's own result bound (256 KiB, as a plan step's); six of them are
1.4 MiB, twice that in the next model call's input."""
BLOBS = 6

SCRIPTS: dict[str, list[TurnLike]] = {
    BLOBS_PROMPT: [call("blob", kib=BLOB_KIB) for _ in range(BLOBS)] + [say("done")],
    **{prompt(p, r): script(p, r) for p in PATHS for r in RULES},
    **{loop_prompt(r): [call(CALLS[r][0], **CALLS[r][1]), output({"done": True})] for r in RULES},
}


@dataclass
class Seen:
    """What one conversation did: every tool result it handed back, whether a person was
    asked, and how long it took."""

    results: list[dict[str, Any]]
    asked: bool
    started: float

    @property
    def text(self) -> str:
        return json.dumps(self.results)


def runs(event: str) -> list[dict[str, Any]]:
    return [args for name, args in RUNS if name == event]


@pytest.fixture(autouse=True)
def _clear() -> None:
    RUNS.clear()


# -- the two runners -------------------------------------------------------------------------


async def in_process(path: str, rule: str) -> Seen:
    started = time.monotonic()
    agent = Agent(
        model=ScriptedModel(scripts=SCRIPTS),
        tools=durable_tools(TOOLS),
        plugins=[WorkflowPlanPlugin(registry=TOOLS)],
        callback_handler=None,
    )
    agent.hooks.add_callback(BeforeToolCallEvent, owners_hook)
    result = await agent.invoke_async(prompt(path, rule))
    asked = result.stop_reason == "interrupt"
    if asked:
        [interrupt] = result.interrupts
        assert interrupt.reason["tool"] == "charge" and interrupt.reason["args"] == CALLS[rule][1]
        assert runs("charge") == [], "nothing runs before the person answers"
        answer: Any = "y" if rule == "approval given" else {"approved": False, "reason": "no"}
        await agent.invoke_async(
            [{"interruptResponse": {"interruptId": interrupt.id, "response": answer}}]
        )
    results = [
        block["toolResult"]
        for message in agent.messages
        for block in message["content"]
        if "toolResult" in block
    ]
    return Seen(results, asked, started)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
async def agent_client(temporal_target: str) -> AsyncIterator[Client]:
    models = {"scripted": lambda: ScriptedModel(scripts=SCRIPTS)}
    yield await Client.connect(temporal_target, plugins=[StrandsPlugin(models=models)])


async def durably(client: Client, task_queue: str, path: str, rule: str) -> Seen:
    started = time.monotonic()
    async with plan_worker(
        client, task_queue=task_queue, registry=TOOLS, workflows=[CallPathsWorkflow]
    ):
        handle = await client.start_workflow(
            CallPathsWorkflow.run,
            prompt(path, rule),
            id=f"paths-{uuid.uuid4().hex[:8]}",
            task_queue=task_queue,
        )
        asked = False
        if rule.startswith("approval"):
            await decide(client, handle.id, path, approved=rule == "approval given")
            asked = True
        results = json.loads(await asyncio.wait_for(handle.result(), 60))
    return Seen(results, asked, started)


async def decide(client: Client, conversation: str, path: str, approved: bool) -> None:
    """A person's decision on the call, once it awaits one (found as a person finds it: the
    conversation's ``direct_calls`` query, an agent step's ``progress``; a plan's step or
    map item by its id, the desk refusing a decision until the call awaits one)."""
    plan = f"{conversation}/plan/tooluse_0_0"
    where = {"direct call": conversation, "agent step": f"{plan}/agent/a"}.get(path, plan)
    known = {"plan step": "s", "map item": "m/do.0"}.get(path)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert runs("charge") == [], "nothing runs before a person decides"
        handle = client.get_workflow_handle(where)
        try:
            if known is not None:
                await PlanHandle(handle).decide(known, approved, "no")
                return
            query = DIRECT_CALLS_QUERY if path == "direct call" else "progress"
            calls = (await handle.query(query))["awaiting"]
            if calls:
                await PlanHandle(handle).decide(calls[0]["id"], approved, "no")
                return
        except ValueError as exc:
            assert "is not awaiting approval" in str(exc), exc
        except (RPCError, WorkflowQueryFailedError):
            pass  # not started yet, or no such query yet
        await asyncio.sleep(0.2)
    raise AssertionError(f"no {path} of {conversation} awaited a decision within 30 s")


# -- every path, every rule ------------------------------------------------------------------


async def walk(runner: str, path: str, rule: str, client: Client, task_queue: str) -> Seen:
    if runner == "in-process":
        return await in_process(path, rule)
    return await durably(client, task_queue, path, rule)


def check(runner: str, path: str, rule: str, seen: Seen) -> None:
    planned = path != "direct call"
    if rule.startswith("approval"):
        # No side effect before the decision: ``decide`` (durably) and ``in_process`` check
        # ``RUNS`` while the call waits for a person.
        if runner == "in-process" and planned:
            # Nobody can answer in the middle of an in-process plan: refused before it runs.
            assert not seen.asked and runs("charge") == []
            assert "requires human approval" in seen.text
            return
        assert seen.asked, "a person was asked"
        if rule == "approval rejected":
            assert runs("charge") == [], "a rejected call has no side effect"
            if path != "agent step":  # an agent step's loop reads it, not the conversation
                assert "rejected by a person" in seen.text
        else:
            assert runs("charge") == [CALLS[rule][1] | {"note": ""}], "approved: it ran once"
    elif rule == "hook":
        assert runs("stamp") == [{"tag": "t1", "note": OWNER_NOTE}], "the owner's hook ran"
    elif rule == "retries":
        attempts = 1 if runner == "in-process" else 3  # in-process calls are never retried
        assert len(runs("wobbly")) == attempts
    elif rule == "timeout":
        assert len(runs("sleepy")) == 1
        if path != "agent step":
            assert "timed out after 1 s" in seen.text
        # Past the tool's own running time: a call its owner's timeout cut short never ends.
        left = seen.started + SLEEP_S + 0.5 - time.monotonic()
        if left > 0:
            time.sleep(left)
        assert runs("sleepy done") == [], "the owner's 1 s timeout stopped the call"


@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("path", PATHS)
async def test_in_process(path: str, rule: str) -> None:
    check("in-process", path, rule, await in_process(path, rule))


@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("path", PATHS)
async def test_durably(agent_client: Client, task_queue: str, path: str, rule: str) -> None:
    check("durable", path, rule, await durably(agent_client, task_queue, path, rule))


async def test_a_direct_call_is_decided_from_the_command_line(
    agent_client: Client, task_queue: str, temporal_target: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`durable-plan approve <conversation> direct/<toolUseId> --digest D`, as a person would
    (it refused any workflow but a plan or an agent step)."""
    from tests.support.helpers import arun_cli

    async def by_command_line(client: Client, conversation: str, path: str, approved: bool) -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                calls = (await client.get_workflow_handle(conversation).query(DIRECT_CALLS_QUERY))[
                    "awaiting"
                ]
            except (RPCError, WorkflowQueryFailedError):
                calls = []
            if calls:
                call = calls[0]
                done = await arun_cli(
                    "approve",
                    conversation,
                    call["id"],
                    "--digest",
                    call["args_digest"],
                    "--address",
                    temporal_target,
                )
                assert done.returncode == 0, done.stderr
                assert done.stdout.startswith(f"{call['id']}: "), done.stdout
                return
            await asyncio.sleep(0.2)
        raise AssertionError("no direct call awaited a decision within 30 s")

    monkeypatch.setattr(sys.modules[__name__], "decide", by_command_line)
    seen = await durably(agent_client, task_queue, "direct call", "approval given")
    check("durable", "direct call", "approval given", seen)


async def test_direct_calls_leave_room_for_the_next_model_call(
    agent_client: Client, task_queue: str
) -> None:
    """Six direct calls of 240 KiB each: whole, the conversation's next model call (which
    carries it twice) would pass Temporal's 2 MB payload limit and its workflow task would
    fail forever. A direct call's result gets the room that call has, as a plan's results
    do (``conversation_room.fit_tool_result``), so the conversation ends normally."""
    async with plan_worker(
        agent_client, task_queue=task_queue, registry=TOOLS, workflows=[CallPathsWorkflow]
    ):
        handle = await agent_client.start_workflow(
            CallPathsWorkflow.run,
            BLOBS_PROMPT,
            id=f"paths-{uuid.uuid4().hex[:8]}",
            task_queue=task_queue,
        )
        results = json.loads(await asyncio.wait_for(handle.result(), 90))
    assert len(results) == BLOBS
    assert any("$preview" in json.dumps(result) for result in results), "past its room: a preview"
    assert sum(len(json.dumps(result)) for result in results) < 1_020_000


def test_a_direct_calls_id_is_bounded_and_never_issued_twice() -> None:
    """The model chooses the toolUseId: a long one made an activity id the server refuses
    (the workflow task failed on every retry), and ``a``, ``a``, ``a/2`` issued ``direct/a/2``
    twice (one approval entry and one activity id for two calls)."""
    from durable_plan.temporal.workflows.direct_calls import DirectCalls

    calls = DirectCalls()
    made = [calls.call_id(i) for i in ("a", "a", "a/2", "x" * 5000, "x" * 5000)]
    assert made[:3] == ["direct/a", "direct/a/2", "direct/a/2/2"]
    assert len(set(made)) == 5
    assert all(len(m) <= 140 for m in made), [len(m) for m in made]


async def test_a_workflows_own_direct_calls_query_is_kept(
    agent_client: Client, task_queue: str
) -> None:
    """A conversation declaring a ``direct_calls`` query of its own: it was replaced by the
    direct calls' (silently, while their ``approve_step`` refused to take over a user's).
    Now the call does not start, the model reads why, and the user's query still answers."""
    from tests.support.own_query_workflows import OWN_ANSWER, OwnQueryWorkflow

    async with plan_worker(
        agent_client, task_queue=task_queue, registry=TOOLS, workflows=[OwnQueryWorkflow]
    ):
        handle = await agent_client.start_workflow(
            OwnQueryWorkflow.run,
            prompt("direct call", "hook"),
            id=f"own-{uuid.uuid4().hex[:8]}",
            task_queue=task_queue,
        )
        [result] = json.loads(await asyncio.wait_for(handle.result(), 60))
        answer = await handle.query(DIRECT_CALLS_QUERY)
    assert result["status"] == "error"
    assert "declares its own 'direct_calls' query" in json.dumps(result)
    assert runs("stamp") == [], "not started"
    assert answer == OWN_ANSWER


def test_one_implementation_and_one_name_of_a_decision() -> None:
    """The plan's handlers and the direct calls' use the desk's bodies under one name each,
    and a direct call's retries start as a plan's do."""
    from durable_plan.temporal.wire.workflow_inputs import PlanInput
    from durable_plan.temporal.workflows import direct_calls
    from durable_plan.temporal.workflows.approvals import (
        APPROVE_SIGNAL,
        DECIDE_UPDATE,
        ApprovalHandlers,
    )

    signal = getattr(ApprovalHandlers.approve_step, "__temporal_signal_definition")
    update = ApprovalHandlers.decide_step._defn  # type: ignore[attr-defined]
    assert (signal.name, update.name) == (APPROVE_SIGNAL, DECIDE_UPDATE)
    interval = PlanInput({}).retrying.retry_initial_interval_s
    assert interval == direct_calls.RETRY_INITIAL_INTERVAL_S
