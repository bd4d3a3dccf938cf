"""Conversations that cannot be broken (issue 22, items 1-5): the hook relay, whole-plan
failures and the scope of reuse, on the real dev server.

Each test is a defect reproduced first on the code before the fix, with a plan a model
could write or an ordinary owner setting. The durable ones check that the conversation
and its plans close (never TERMINATED, no workflow task failing), that another plan on
the same worker still completes, and how often each side effect ran.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from strands import Agent
from strands.hooks import BeforeToolCallEvent
from strands.vended_interventions.hitl import HumanInTheLoop
from temporalio.api.enums.v1 import EventType, WorkflowTaskFailedCause
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHandle, WorkflowHistory
from temporalio.strands_agents import StrandsPlugin, TemporalAgent
from temporalio.worker import Worker

from durable_plan import plan_worker, start_plan
from durable_plan.run.hooks import ToolHooks
from durable_plan.strands.plugin import WorkflowPlanPlugin
from durable_plan.temporal.wire.hook_messages import HOOK_REQUEST_SIGNAL
from durable_plan.testing import ScriptedModel, TurnLike, call, output, say, turn
from durable_plan.testing.scripted_model import SKIPPED
from tests.support.relay_workflows import (
    CALLS,
    RELAY_TOOLS,
    RelayConversationWorkflow,
    RelayInput,
    RelayOutput,
    charge,
    look,
)

ROOT = Path(__file__).resolve().parents[3]
KIB = 240
STEPS = 30
PLANS = 4


def big_plan(number: int) -> dict[str, Any]:
    """30 steps of 240 KiB each, returning nothing: every documented bound respected."""
    steps = [
        {"id": f"b{n}", "tool": "blob", "args": {"n": number * 100 + n, "kib": KIB}}
        for n in range(STEPS)
    ]
    return {"steps": steps, "returns": []}


CHARGE_THEN_HOLD = {
    "steps": [
        {"id": "pay", "tool": "charge", "args": {"order": "A1", "amount": 13}},
        {"id": "wait", "tool": "hold", "args": {"seconds": 30}, "after": ["pay"]},
    ]
}
CHARGE_THEN_LOOK = {
    "steps": [
        {"id": "pay", "tool": "charge", "args": {"order": "A1", "amount": 13}},
        {"id": "done", "tool": "look", "args": {"name": "receipt"}, "after": ["pay"]},
    ],
    "final": True,
}
SLOW_AGENT_PLAN = {
    "steps": [
        {
            "id": "ask",
            "tool": "agent",
            "timeout_s": 0.5,
            "args": {
                "prompt": "Look around.",
                "output_schema": {"type": "object", "properties": {"seen": {"type": "boolean"}}},
                "tools": ["look"],
            },
        },
        {"id": "after", "tool": "look", "args": {"name": "later"}},
    ],
    "on_error": "continue",
}
MARKED_PLAN = {
    "steps": [
        {"id": "direct", "tool": "look", "args": {"name": "a"}},
        {
            "id": "inner",
            "tool": "agent",
            "args": {
                "prompt": "Look inside.",
                "output_schema": {"type": "object", "properties": {"marked": {"type": "boolean"}}},
                "tools": ["look"],
            },
        },
    ],
    "final": True,
}

SCRIPTS: dict[str, list[TurnLike]] = {
    "four big plans": [
        *(call("submit_workflow_plan", **big_plan(n)) for n in range(1, PLANS + 1)),
        say("All four ran."),
    ],
    "charge then hold": [
        call("submit_workflow_plan", **CHARGE_THEN_HOLD),
        call("submit_workflow_plan", **CHARGE_THEN_LOOK),
    ],
    "slow hook": [call("submit_workflow_plan", **SLOW_AGENT_PLAN), say("Done.")],
    "Look around.": [call("look", name="a"), output({"seen": True})],
    "marked": [call("submit_workflow_plan", **MARKED_PLAN)],
    "Look inside.": [call("look", name="b"), output({"marked": True})],
}


@pytest.fixture(scope="module")
async def agent_client(temporal_target: str) -> AsyncIterator[Client]:
    model = {"scripted": lambda: ScriptedModel(scripts=SCRIPTS)}
    yield await Client.connect(temporal_target, plugins=[StrandsPlugin(models=model)])


def relay_worker(client: Client, task_queue: str) -> Worker:
    return plan_worker(
        client, task_queue=task_queue, registry=RELAY_TOOLS, workflows=[RelayConversationWorkflow]
    )


async def start(
    client: Client, task_queue: str, prompt: str, *, workflow_id: str | None = None, **options: Any
) -> WorkflowHandle[Any, RelayOutput]:
    return await client.start_workflow(
        RelayConversationWorkflow.run,
        RelayInput(prompt, **options),
        id=workflow_id or f"relay-{uuid.uuid4().hex[:8]}",
        task_queue=task_queue,
    )


async def closed_cleanly(client: Client, workflow_id: str) -> WorkflowHistory:
    """The workflow completed, and no workflow task of it ever failed.

    Not counted: the server's own flush of a workflow task while too many large events
    arrived during it (``FORCE_CLOSE_COMMAND`` from history-service, past its 2 MiB of
    buffered events): the task is simply taken again with them, nothing fails."""
    handle = client.get_workflow_handle(workflow_id)
    description = await handle.describe()
    assert description.status == WorkflowExecutionStatus.COMPLETED, (
        workflow_id,
        description.status,
    )
    history = await handle.fetch_history()
    failed = [
        e
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED
        and e.workflow_task_failed_event_attributes.cause
        != WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_FORCE_CLOSE_COMMAND
    ]
    assert not failed, (
        f"{workflow_id}: a workflow task failed: "
        + "; ".join(e.workflow_task_failed_event_attributes.failure.message for e in failed)
        + f" (history: {len(history.events)} events)"
    )
    # A timer pending at completion may fire during the completing task: the server then
    # rejects it (UnhandledCommand). Under load a plan's pacer was caught pending at the end.
    timers = [e.event_type for e in history.events if "TIMER" in EventType.Name(e.event_type)]
    started = timers.count(EventType.EVENT_TYPE_TIMER_STARTED)
    assert started == len(timers) - started, f"{workflow_id}: a timer pending at completion"
    return history


def signals(history: WorkflowHistory, name: str) -> int:
    return sum(
        1
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED
        and e.workflow_execution_signaled_event_attributes.signal_name == name
    )


async def history_bytes(client: Client, workflow_id: str) -> int:
    description = await client.get_workflow_handle(workflow_id).describe()
    return int(description.raw_description.workflow_execution_info.history_size_bytes)


async def a_second_plan_completes(client: Client, task_queue: str) -> None:
    plan = {"steps": [{"id": "x", "tool": "look", "args": {"name": "next"}}]}
    handle = await start_plan(client, plan, task_queue=task_queue, registry=RELAY_TOOLS)
    assert (await asyncio.wait_for(handle.result(), 30)).returned == {"x": {"name": "next"}}


# -- 1: the relay only for the owner's hooks, and bounded ---------------------------------------


def test_the_relay_is_off_for_agents_without_the_owners_hooks() -> None:
    """Strands puts callbacks of its own on every agent (``AgentDelegation``): they are not
    the owner's hooks, so they must not turn the relay on."""
    model = ScriptedModel(scripts={"x": [say("hi")]})
    plain = Agent(model=model, plugins=[WorkflowPlanPlugin()], callback_handler=None)
    assert ToolHooks(plain).active is False
    durable = TemporalAgent(
        model="m", plugins=[WorkflowPlanPlugin(registry=RELAY_TOOLS)], callback_handler=None
    )
    assert ToolHooks(durable).active is False
    hooked = Agent(model=model, plugins=[WorkflowPlanPlugin()], callback_handler=None)
    hooked.hooks.add_callback(BeforeToolCallEvent, lambda event: None)
    assert ToolHooks(hooked).active is True
    gated = Agent(
        model=model,
        plugins=[WorkflowPlanPlugin(plannable=["*"])],
        interventions=[HumanInTheLoop(allowed_tools=["submit_workflow_plan"])],
        callback_handler=None,
    )
    assert ToolHooks(gated).active is True, "interventions are the owner's rules"


@pytest.mark.parametrize("hook", ["none", "noop"])
async def test_a_conversation_of_four_large_plans_closes(
    agent_client: Client, task_queue: str, hook: str, tmp_path: Path
) -> None:
    """Four plans of 30 steps x 240 KiB, returns: [] (every bound respected). Before the fix
    the conversation was TERMINATED ("transaction size ... exceeds limit of 4194304") and
    the plans too (GrpcMessageTooLarge); with a no-op hook its history reached 31 MB."""
    async with relay_worker(agent_client, task_queue):
        handle = await start(agent_client, task_queue, "four big plans", hook=hook)
        out = await asyncio.wait_for(handle.result(), 300)
        history = await closed_cleanly(agent_client, handle.id)
        for number in range(PLANS):
            await closed_cleanly(agent_client, f"{handle.id}/plan/tooluse_{number}_0")
        await a_second_plan_completes(agent_client, task_queue)
        size = await history_bytes(agent_client, handle.id)
    assert out.plans == PLANS
    assert all(line["status"] == "ok" for ledger in out.ledgers for line in ledger), out.ledgers
    requests = signals(history, HOOK_REQUEST_SIGNAL)
    if hook == "none":
        assert requests == 0, "no relay for an agent without hooks"
        # What remains is the conversation's memory (a remembered 240 KiB result comes back
        # from a plan and goes to the next, bounded by remember_bytes) and the model calls.
        assert size < PLANS * 600 * 1024, size
    else:
        assert requests == 2 * PLANS * STEPS
        assert out.hook_calls >= 2 * PLANS * STEPS
        # Each result reaches the owner's hook once, never echoed back in a reply.
        assert size < PLANS * STEPS * KIB * 1024 * 1.1, size
    print(f"\nconversation history with hook={hook}: {size / PLANS / 1024:.0f} KiB per plan")
    if hook == "none":  # the relay's replay is the slow-hook test's (a smaller history)
        replay_in_subprocess(history, tmp_path)


async def test_a_step_past_the_relay_budget_fails_saying_so(
    agent_client: Client, task_queue: str
) -> None:
    """The relay's room in the conversation's history is counted: past it a step fails
    with a message naming the bound, and the conversation goes on."""
    async with relay_worker(agent_client, task_queue):
        handle = await start(
            agent_client,
            task_queue,
            "four big plans",
            hook="noop",
            plugin={"hook_relay_bytes": 1024 * 1024},
        )
        out = await asyncio.wait_for(handle.result(), 300)
        await closed_cleanly(agent_client, handle.id)
    first = out.ledgers[0]
    failed = [line for line in first if line["status"] == "failed"]
    assert failed, first
    assert "hook_relay_bytes" in failed[0]["error"]
    assert "conversation's history has room" in failed[0]["error"]


# -- 2 and 3: a slow hook, an agent step past its timeout, a long conversation id -------------


def replay_in_subprocess(history: WorkflowHistory, tmp_path: Path) -> None:
    """Replay a conversation's history in another process, under another hash seed."""
    path = tmp_path / "history.json"
    path.write_text(history.to_json())
    script = (
        "import sys\n"
        "from temporalio.client import WorkflowHistory\n"
        "from temporalio.strands_agents import StrandsPlugin\n"
        "from temporalio.worker import Replayer\n"
        "from durable_plan.server.connection import run_script\n"
        "from tests.support.relay_workflows import RelayConversationWorkflow\n"
        f"history = WorkflowHistory.from_json({history.workflow_id!r}, open(sys.argv[1]).read())\n"
        "replayer = Replayer(workflows=[RelayConversationWorkflow],"
        " plugins=[StrandsPlugin(models={})])\n"
        "async def main() -> None:\n"
        "    await replayer.replay_workflow(history)\n"
        "    print('replayed')\n"
        # run_script: no interpreter finalization, which the SDK's native threads can abort
        "run_script(main())\n"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345", "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", script, str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=ROOT,
    )
    assert done.returncode == 0 and "replayed" in done.stdout, done.stderr[-3000:]


async def test_a_slow_hook_and_an_agent_step_past_its_timeout_leave_the_conversation_whole(
    agent_client: Client, task_queue: str, tmp_path: Path
) -> None:
    """An async before-hook of 1 s (a rate limiter) and an agent step with timeout_s 0.5:
    the hook's reply goes to a child that has ended. Before the fix the conversation failed
    with ExternalWorkflowExecutionNotFound, and one that completed while a relay handler
    was still running failed replay ("Timer machine does not handle this event")."""
    async with relay_worker(agent_client, task_queue):
        handle = await start(agent_client, task_queue, "slow hook", hook="slow")
        out = await asyncio.wait_for(handle.result(), 120)
        history = await closed_cleanly(agent_client, handle.id)
        await closed_cleanly(agent_client, f"{handle.id}/plan/tooluse_0_0")
        await a_second_plan_completes(agent_client, task_queue)
    assert out.answer == "Done."
    ledger = {line["id"]: line for line in out.ledgers[0]}
    assert ledger["ask"]["status"] == "failed"
    assert ledger["after"]["status"] == "ok", "the plan went on after the agent step"
    replay_in_subprocess(history, tmp_path)


async def test_a_long_conversation_id_still_reaches_the_owners_hooks(
    agent_client: Client, task_queue: str
) -> None:
    """With a long conversation id the child ids are shortened; the relay found the plan
    by parsing the agent child's id and missed, cancelling every tool call of the step."""
    workflow_id = "relay-" + "x" * 240
    async with relay_worker(agent_client, task_queue):
        handle = await start(
            agent_client, task_queue, "marked", hook="mark", workflow_id=workflow_id
        )
        out = await asyncio.wait_for(handle.result(), 120)
        await closed_cleanly(agent_client, handle.id)
    answer = json.loads(out.answer)
    assert answer["direct"] == {"name": "a", "marked": True}
    assert answer["inner"]["output"] == {"marked": True}
    assert answer["inner"]["tools_called"] == [
        {"tool": "look", "round": 1, "path": "inner/agent.1/look"}
    ]


# -- 4: a plan that ends as a whole still tells what it did --------------------------------------


async def wait_for(predicate: Any, timeout: float = 30) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        assert loop.time() < deadline, "timed out waiting"
        await asyncio.sleep(0.05)


@pytest.mark.parametrize("ending", ["cancel", "terminate"])
async def test_a_plan_that_ends_as_a_whole_tells_the_model_what_ran_and_is_not_repeated(
    agent_client: Client, task_queue: str, ending: str
) -> None:
    """The plan charged, then was cancelled (or terminated) while a later step ran. Before
    the fix the model heard only "the plan failed", resubmitted the same steps, and the
    customer was charged twice. Now it gets the ledger, and the repair reuses the charge."""
    CALLS.clear()
    async with relay_worker(agent_client, task_queue):
        handle = await start(agent_client, task_queue, "charge then hold")
        await wait_for(lambda: CALLS["hold"] >= 1)
        plan = agent_client.get_workflow_handle(f"{handle.id}/plan/tooluse_0_0")
        if ending == "cancel":
            await plan.cancel()
        else:
            await plan.terminate("stopped by an operator")
        out = await asyncio.wait_for(handle.result(), 60)
        history = await closed_cleanly(agent_client, handle.id)
    assert CALLS["charge"] == 1, "the repair reused the charge instead of charging again"
    assert out.plans == 2
    first = {line["id"]: line for line in out.ledgers[0]}
    assert first["pay"]["status"] == "ok"
    assert first["wait"]["status"] == "failed" and "still running" in first["wait"]["error"]
    second = json.loads(out.answer)
    assert second["pay"] == {"receipt": "r-A1-13"}
    texts = [
        e.activity_task_scheduled_event_attributes.input.payloads[0].data.decode()
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and e.activity_task_scheduled_event_attributes.activity_type.name == "invoke_model"
    ]
    told = texts[1]  # the model call after the first plan
    assert "The plan failed as a whole" in told and "pay: ok" in told
    assert "Not run again if the corrected plan keeps its id" in told


# -- 5: reuse is scoped to one request --------------------------------------------------------


def plain_agent(script: list[TurnLike], **plugin: Any) -> Agent:
    return Agent(
        model=ScriptedModel(script=script),
        tools=[charge, look],
        plugins=[WorkflowPlanPlugin(**plugin)],
        callback_handler=None,
    )


ONE_CHARGE = {
    "steps": [{"id": "pay", "tool": "charge", "args": {"order": "B2", "amount": 5}}],
    "final": True,
}


@pytest.mark.parametrize("across", [False, True])
async def test_a_later_request_runs_its_plan_again_unless_the_owner_opts_in(across: bool) -> None:
    """ "Attack again" in a later turn got the earlier result back silently, the tool never
    running. Memory is per invocation of the agent now; the owner may keep it across."""
    CALLS.clear()
    script: list[TurnLike] = [
        call("submit_workflow_plan", **ONE_CHARGE),
        SKIPPED,  # the final plan's answer ended the turn without a model call
        call("submit_workflow_plan", **ONE_CHARGE),
    ]
    agent = plain_agent(script, remember_across_turns=across)
    await agent.invoke_async("charge B2")
    await agent.invoke_async("charge B2 again")
    assert CALLS["charge"] == (1 if across else 2)


async def test_two_plans_in_one_model_turn_run_one_after_the_other() -> None:
    """Two submit_workflow_plan calls in one model turn ran concurrently, with the same plan
    number and no shared memory: both charged. They run in turn now; the second is plan 2
    and reuses what the first ran."""
    CALLS.clear()
    plugin = WorkflowPlanPlugin()
    agent = Agent(
        model=ScriptedModel(
            script=[
                turn(
                    call("submit_workflow_plan", **{**ONE_CHARGE, "final": False}),
                    call("submit_workflow_plan", **{**ONE_CHARGE, "final": False}),
                ),
                say("Charged."),
            ]
        ),
        tools=[charge],
        plugins=[plugin],
        callback_handler=None,
    )
    await agent.invoke_async("charge twice in one turn")
    assert CALLS["charge"] == 1
    assert plugin.plans_run == 2
    assert plugin.results[1].outcome("pay").reused_from == 1


async def test_never_reuse_patterns_cover_any_tool() -> None:
    """A tool the owner did not register (an MCP tool, say) can still opt out of reuse."""
    CALLS.clear()
    script: list[TurnLike] = [
        call("submit_workflow_plan", **{**ONE_CHARGE, "final": False}),
        call("submit_workflow_plan", **{**ONE_CHARGE, "final": False}),
        say("Twice."),
    ]
    agent = plain_agent(script, never_reuse=["char*"])
    await agent.invoke_async("charge B2 twice")
    assert CALLS["charge"] == 2
