"""Repair without repeating: a corrected plan reuses the steps that already ran ok.

In-process through ``WorkflowPlanPlugin`` on a plain Strands agent, and durably
through a ``TemporalAgent`` conversation on the dev server (the memory lives in
the agent's workflow and travels in each plan's input). Every tool appends to a
call log, so "not run again" is counted, not inferred. The model is the
scripted model; the conversations are in ``tests/support/reuse_workflows.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from strands import Agent
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle, WorkflowHistory
from temporalio.strands_agents import StrandsPlugin
from temporalio.worker import Replayer

from durable_plan import PlanWorkflow, plan_worker
from durable_plan.check import check_plan
from durable_plan.language.errors import PlanRejected
from durable_plan.language.plan import PlanResult
from durable_plan.language.schema import plan_tool_description
from durable_plan.run.reuse import Recall, Remembered, StepMemory, args_key, reusable_tools
from durable_plan.strands.plugin import WorkflowPlanPlugin
from durable_plan.temporal.wire.workflow_inputs import PlanInput
from durable_plan.testing import ScriptedModel, TurnLike, call, say
from durable_plan.tools.approval import ApprovalPolicy
from tests.support.helpers import tool_results, until_phase
from tests.support.reuse_workflows import (
    CALL_LOG_ENV,
    CLOCK_PROMPT,
    FAILING_PLAN,
    PRIOR_PROMPT,
    REFUND_PROMPT,
    REPAIR_PLAN,
    REPAIR_PROMPT,
    REUSE_TOOLS,
    SCRIPTS,
    TRY_AGAIN,
    TWO_TURNS_PROMPT,
    ConversationInput,
    ConversationOutput,
    ReuseConversationWorkflow,
    calls,
)
from tests.support.warm_python import WarmProcess
from tests.support.worker_processes import warm_python

ROOT = Path(__file__).resolve().parents[3]
RESULT_TIMEOUT_S = 60.0


@pytest.fixture
def call_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    log = tmp_path / "calls.jsonl"
    monkeypatch.setenv(CALL_LOG_ENV, str(log))
    return log


def reused(result: PlanResult) -> dict[str, int | None]:
    return {o.id: o.reused_from for o in result.ledger}


def local_agent(
    scripts: dict[str, list[TurnLike]] | None = None,
) -> tuple[Agent, WorkflowPlanPlugin]:
    """A plain Strands agent with the plan plugin: plans run in-process."""
    plugin = WorkflowPlanPlugin(registry=REUSE_TOOLS)
    model = ScriptedModel(scripts=scripts or SCRIPTS)
    return Agent(model=model, plugins=[plugin], callback_handler=None), plugin


NOTHING = PlanResult(returned={}, ledger=[], levels=[], inference_passes_saved=0, final=False)


async def submit(plugin: WorkflowPlanPlugin, plan: dict[str, Any], n: int) -> dict[str, Any]:
    """One plan through the plugin's tool body, as the model's tool call would."""
    use = {"toolUseId": f"t{n}", "name": "submit_workflow_plan", "input": plan}
    return dict(await plugin.submit(use, None))  # type: ignore[arg-type]


# -- in-process -------------------------------------------------------------------------------


def test_repair_plan_reuses_unchanged_steps_in_process(call_log: Path) -> None:
    agent, plugin = local_agent()
    answer = json.loads(str(agent(REPAIR_PROMPT)))
    assert answer["pay"] == {"receipt": "r-card-7-13", "amount": 13}
    # order and customer ran once in all; price changed (USD) and ran again; pay ran once.
    assert calls(call_log) == {"fetch_order": 1, "get_customer": 1, "price_order": 2, "charge": 1}
    first, second = plugin.results
    assert reused(first) == dict.fromkeys(["order", "customer", "price", "pay"])
    assert reused(second) == {"order": 1, "customer": 1, "price": None, "pay": None}
    assert second.outcome("order").attempts == 0
    assert answer["order"]["customer"] == "c7"  # a reused result is returned like any other
    [failure, _success] = tool_results(agent)
    text = failure["content"][0]["text"]
    assert "Repair: submit a corrected plan" in text
    assert "order (fetch_order), customer (get_customer), price (price_order)" in text
    assert "prior.<id>" in text


def test_reused_steps_are_reported_to_the_model(call_log: Path) -> None:
    plan = {**REPAIR_PLAN, "final": False}
    script = [
        call("submit_workflow_plan", **FAILING_PLAN),
        call("submit_workflow_plan", **plan),
        say("charged"),
    ]
    agent, _ = local_agent({"go": script})
    agent("go")
    report = tool_results(agent)[1]["content"][0]["json"]
    assert report["reused"] == {"order": 1, "customer": 1}


@pytest.mark.parametrize(
    ("change", "runs_again"),
    [
        ("same", False),
        ("other arguments", True),
        ("other id", True),
        ("other tool", True),
    ],
)
async def test_only_the_same_id_tool_and_arguments_are_reused(
    call_log: Path, change: str, runs_again: bool
) -> None:
    plugin = WorkflowPlanPlugin(registry=REUSE_TOOLS)
    first = {"steps": [{"id": "order", "tool": "fetch_order", "args": {"order_id": "A1"}}]}
    step: dict[str, Any] = {"id": "order", "tool": "fetch_order", "args": {"order_id": "A1"}}
    if change == "other arguments":
        step["args"] = {"order_id": "B2"}
    elif change == "other id":
        step["id"] = "order_again"
    elif change == "other tool":
        step = {"id": "order", "tool": "get_customer", "args": {"customer_id": "A1"}}
    await submit(plugin, first, 1)
    await submit(plugin, {"steps": [step]}, 2)
    ran = sum(calls(call_log).values())
    assert ran == (2 if runs_again else 1)
    assert plugin.results[-1].ledger[0].reused_from == (None if runs_again else 1)


async def test_arguments_are_compared_after_bindings_as_canonical_json(call_log: Path) -> None:
    """Bound and literal arguments with the same value, in another key order: reused."""
    plugin = WorkflowPlanPlugin(registry=REUSE_TOOLS)
    items = [{"qty": 3, "sku": "tea"}]
    literal = {"id": "price", "tool": "price_order", "args": {"currency": "EUR", "items": items}}
    await submit(plugin, {"steps": [literal]}, 1)
    assert args_key({"items": [{"sku": "tea", "qty": 3}], "currency": "EUR"}) == args_key(
        {"currency": "EUR", "items": items}
    )
    bound = {
        "steps": [
            {"id": "order", "tool": "fetch_order", "args": {"order_id": "A1"}},
            {**literal, "args": {"currency": "EUR"}, "bind": {"items": "steps.order.items"}},
        ]
    }
    await submit(plugin, bound, 2)
    assert calls(call_log) == {"price_order": 1, "fetch_order": 1}
    assert reused(plugin.results[-1]) == {"order": None, "price": 1}


def test_opt_out_tool_runs_again(call_log: Path) -> None:
    agent, plugin = local_agent()
    answer = json.loads(str(agent(CLOCK_PROMPT)))
    assert calls(call_log) == {"read_clock": 2, "fetch_order": 1}
    assert answer["clock"] == {"tick": 2}  # a fresh reading, not the remembered one
    assert reused(plugin.results[-1]) == {"clock": None, "order": 1}
    failure = tool_results(agent)[0]["content"][0]["text"]
    assert "Run again even then" in failure and "clock (read_clock)" in failure


def test_gated_tools_are_never_reusable() -> None:
    assert REUSE_TOOLS.get("read_clock").options.reuse is False
    open_tools = reusable_tools(REUSE_TOOLS.options())
    assert "refund" in open_tools and "read_clock" not in open_tools
    gated = reusable_tools(REUSE_TOOLS.options(ApprovalPolicy.of(["ref*"])))
    assert "refund" not in gated and "fetch_order" in gated
    # A remembered step of a tool that is gated now is not reused, whatever it matches.
    key = args_key({"card": "card-7", "amount": 5})
    entry = Remembered("give_back", "refund", key, '{"refunded":5}', 1)
    recall = Recall([entry], plan=2, reusable=gated)
    assert recall.key("refund", {"card": "card-7", "amount": 5}) == ""
    assert recall.reuse("give_back", "refund", recall.key("refund", {})) is None


def test_a_plan_reads_an_earlier_plans_result(call_log: Path) -> None:
    agent, plugin = local_agent()
    answer = json.loads(str(agent(PRIOR_PROMPT)))
    assert answer == {"pay": {"receipt": "r-card-7-12", "amount": 12}}
    assert calls(call_log) == {"fetch_order": 1, "get_customer": 1, "price_order": 1, "charge": 1}
    assert plugin.results[-1].ledger[0].reused_from is None


def test_reading_a_step_that_did_not_end_ok_is_a_check_error(call_log: Path) -> None:
    reads_failed = {
        "steps": [
            {"id": "again", "tool": "charge", "bind": {"card": "prior.pay.card", "amount": "1"}}
        ]
    }
    agent, _ = local_agent(
        {
            "go": [
                call("submit_workflow_plan", **FAILING_PLAN),
                call("submit_workflow_plan", **reads_failed),
                say("stop"),
            ]
        }
    )
    agent("go")
    rejection = tool_results(agent)[1]["content"][0]["text"]
    assert "Plan rejected, nothing was executed" in rejection
    assert "step 'again', field 'bind.card': reads prior.pay" in rejection
    assert "no earlier plan in this conversation has a step 'pay' that ended ok" in rejection
    assert "results that can be read as prior: customer, order, price" in rejection
    assert "charge" not in calls(call_log)


def test_prior_checks() -> None:
    def problems(plan: dict[str, Any], prior: list[str] | None) -> list[str]:
        with pytest.raises(PlanRejected) as info:
            check_plan(plan, prior=prior)
        return [f"{p.code}: {p.field}: {p.message}" for p in info.value.problems]

    def step(**bind: str) -> dict[str, Any]:
        return {"steps": [{"id": "a", "tool": "t", "bind": bind}]}

    [text] = problems(step(x="prior.order.id"), None)
    assert text.startswith("prior_reference: bind.x: reads prior.order, but no earlier plan")
    [text] = problems(step(x="prior.*"), ["order"])
    assert "reads prior.* without naming one step" in text
    [text] = problems(step(x="$lookup(prior, 'order')"), ["order"])
    assert "reads prior without naming one step" in text
    checked = check_plan(
        {
            "steps": [
                {"id": "a", "tool": "t", "bind": {"x": "prior.order.id", "y": "steps.b.v"}},
                {"id": "b", "tool": "t", "when": "prior.order.id = 'A1'"},
            ]
        },
        prior=["order"],
    )
    assert checked.steps["a"].prior_reads == ("order",)
    assert checked.steps["a"].deps == frozenset({"b"})  # prior creates no dependency
    assert checked.steps["b"].prior_reads == ("order",)
    assert checked.steps["b"].deps == frozenset()


async def test_a_misspelled_field_of_a_prior_result_names_its_keys(call_log: Path) -> None:
    plugin = WorkflowPlanPlugin(registry=REUSE_TOOLS)
    await submit(
        plugin, {"steps": [{"id": "order", "tool": "fetch_order", "args": {"order_id": "A1"}}]}, 1
    )
    plan = {
        "steps": [
            {"id": "who", "tool": "get_customer", "bind": {"customer_id": "prior.order.cust"}}
        ]
    }
    await submit(plugin, plan, 2)
    error = plugin.results[-1].outcome("who").error or ""
    assert "prior.order has keys order_id, customer, items" in error


async def test_memory_is_bounded_by_count_and_bytes(call_log: Path) -> None:
    plugin = WorkflowPlanPlugin(registry=REUSE_TOOLS, remember_steps=2)
    three = {
        "steps": [
            {"id": "o1", "tool": "fetch_order", "args": {"order_id": "A1"}},
            {"id": "o2", "tool": "fetch_order", "args": {"order_id": "A2"}},
            {"id": "o3", "tool": "fetch_order", "args": {"order_id": "A3"}},
        ]
    }
    await submit(plugin, three, 1)
    assert plugin.memory.ids == ["o2", "o3"] and plugin.memory.forgotten == 1
    await submit(plugin, three, 2)  # o1 was forgotten: it runs again; o2, o3 are reused
    assert reused(plugin.results[-1]) == {"o1": None, "o2": 1, "o3": 1}
    assert calls(call_log) == {"fetch_order": 4}
    # Reused entries count as used again; the one run just now is the most recent.
    assert plugin.memory.ids == ["o3", "o1"] and plugin.memory.forgotten == 2

    memory = StepMemory(max_steps=10, max_bytes=300)
    small = Remembered("a", "t", "k", json.dumps({"v": 1}), 1)
    large = Remembered("b", "t", "k", json.dumps({"v": "x" * 400}), 1)
    memory.remember([small, large], NOTHING)
    assert memory.ids == ["a"]  # a result over the bound alone is not remembered
    more = [Remembered(f"s{n}", "t", "k", json.dumps({"v": "y" * 60}), 2) for n in range(4)]
    memory.remember(more, NOTHING)
    assert memory.size <= 300 and memory.ids[-1] == "s3" and "a" not in memory


def test_the_plan_tool_teaches_reuse_and_prior() -> None:
    text = plan_tool_description(["fetch_order"])
    assert "prior.<id>" in text and "same id, tool and arguments" in text


# -- durable: a TemporalAgent conversation on the dev server --------------------------------


@pytest.fixture(scope="module")
async def agent_client(temporal_target: str) -> AsyncIterator[Client]:
    models = {"scripted": lambda: ScriptedModel(scripts=SCRIPTS)}
    yield await Client.connect(temporal_target, plugins=[StrandsPlugin(models=models)])


@contextlib.asynccontextmanager
async def worker(client: Client, task_queue: str) -> AsyncIterator[None]:
    async with plan_worker(
        client, task_queue=task_queue, registry=REUSE_TOOLS, workflows=[ReuseConversationWorkflow]
    ):
        yield


async def start(
    client: Client, task_queue: str, *prompts: str, **options: Any
) -> WorkflowHandle[Any, ConversationOutput]:
    return await client.start_workflow(
        ReuseConversationWorkflow.run,
        ConversationInput(prompts=list(prompts), **options),
        id=f"reuse-{uuid.uuid4().hex[:8]}",
        task_queue=task_queue,
    )


def scheduled_steps(history: WorkflowHistory) -> list[str]:
    return [
        e.activity_task_scheduled_event_attributes.activity_id
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]


def child_inputs(history: WorkflowHistory) -> dict[str, dict[str, Any]]:
    """Child workflow id -> its PlanInput as JSON, from the parent's history."""
    out = {}
    for e in history.events:
        if e.event_type == EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED:
            attrs = e.start_child_workflow_execution_initiated_event_attributes
            wire = json.loads(attrs.input.payloads[0].data)
            out[attrs.workflow_id] = dataclasses.asdict(PlanInput.from_wire(wire))
    return out


async def test_durable_repair_reuses_steps_and_starts_no_activity(
    agent_client: Client, task_queue: str, call_log: Path
) -> None:
    async with worker(agent_client, task_queue):
        handle = await start(agent_client, task_queue, REPAIR_PROMPT)
        output = await asyncio.wait_for(handle.result(), RESULT_TIMEOUT_S)
        history = await handle.fetch_history()
    assert calls(call_log) == {"fetch_order": 1, "get_customer": 1, "price_order": 2, "charge": 1}
    assert output.plans == 2
    assert [line["reused_from"] for line in output.ledgers[1]] == [1, 1, None, None]
    assert json.loads(output.answers[0])["pay"]["amount"] == 13
    first_id, second_id = (f"{handle.id}/plan/tooluse_{n}_0" for n in (0, 1))
    second = await agent_client.get_workflow_handle(second_id).fetch_history()
    assert scheduled_steps(second) == ["price", "pay"]  # the reused steps started nothing
    inputs = child_inputs(history)
    assert inputs[first_id]["memory"]["steps"] == []
    sent = inputs[second_id]["memory"]
    assert sent["plan"] == 2
    # Only what the plan can use travels: its steps with the same id and tool.
    assert [s["step"] for s in sent["steps"]] == ["order", "customer", "price"]
    assert output.remembered == ["order", "customer", "price", "pay"]


async def test_durable_prior_read_and_opt_out(
    agent_client: Client, task_queue: str, call_log: Path
) -> None:
    async with worker(agent_client, task_queue):
        prior = await start(agent_client, task_queue, PRIOR_PROMPT)
        clock = await start(agent_client, task_queue, CLOCK_PROMPT)
        prior_output = await asyncio.wait_for(prior.result(), RESULT_TIMEOUT_S)
        clock_output = await asyncio.wait_for(clock.result(), RESULT_TIMEOUT_S)
    assert json.loads(prior_output.answers[0]) == {"pay": {"receipt": "r-card-7-12", "amount": 12}}
    assert json.loads(clock_output.answers[0])["clock"] == {"tick": 2}
    assert [line["reused_from"] for line in clock_output.ledgers[1]] == [None, 1]
    counts = calls(call_log)
    assert counts["read_clock"] == 2 and counts["charge"] == 1
    assert counts["fetch_order"] == 2  # once per conversation: memory is per conversation


async def wait_for_approval(client: Client, child_id: str, step_id: str) -> Any:
    child = client.get_workflow_handle(child_id)
    await until_phase(child, step_id, "awaiting_approval", timeout_s=20)
    return child


async def test_durable_gated_tool_is_never_reused(
    agent_client: Client, task_queue: str, call_log: Path
) -> None:
    async with worker(agent_client, task_queue):
        handle = await start(agent_client, task_queue, REFUND_PROMPT, approval_required=["refund"])
        for n in (0, 1):  # the repeat asks the person again, and refunds again
            child = await wait_for_approval(
                agent_client, f"{handle.id}/plan/tooluse_{n}_0", "give_back"
            )
            await child.execute_update("decide_step", {"step_id": "give_back", "approved": True})
        output = await asyncio.wait_for(handle.result(), RESULT_TIMEOUT_S)
    assert calls(call_log) == {"refund": 2}
    assert output.ledgers[1] == [{"id": "give_back", "status": "ok", "reused_from": None}]


async def test_replay_of_a_conversation_with_reuse(
    agent_client: Client, task_queue: str, call_log: Path
) -> None:
    async with worker(agent_client, task_queue):
        handle = await start(agent_client, task_queue, REPAIR_PROMPT)
        await asyncio.wait_for(handle.result(), RESULT_TIMEOUT_S)
        history = await handle.fetch_history()
    children = [
        await agent_client.get_workflow_handle(f"{handle.id}/plan/tooluse_{n}_0").fetch_history()
        for n in (0, 1)
    ]
    models = {"scripted": lambda: ScriptedModel(scripts=SCRIPTS)}
    replayer = Replayer(
        workflows=[ReuseConversationWorkflow, PlanWorkflow], plugins=[StrandsPlugin(models=models)]
    )
    for recorded in (history, *children):
        await replayer.replay_workflow(recorded)  # raises on any non-determinism
    # The repair plan ran with a memory: its reused steps started nothing.
    assert scheduled_steps(children[1]) == ["price", "pay"]


# -- durable: the memory survives a worker kill between the two plans ------------------------


@contextlib.asynccontextmanager
async def worker_processes(
    target: str, task_queue: str, log: Path, tmp: Path
) -> AsyncIterator[Any]:
    """Yields ``spawn()``: a reuse worker subprocess that polls; all are killed on exit.

    Each is forked from the launcher that imported the libraries once
    (tests/support/warm_python.py).
    """
    procs: list[WarmProcess] = []
    env = {**os.environ, CALL_LOG_ENV: str(log), "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
    launcher = await warm_python()

    async def spawn() -> WarmProcess:
        stderr_path = tmp / f"worker-{len(procs) + 1}.stderr"
        with stderr_path.open("wb") as stderr:
            proc = await launcher.spawn(
                ROOT / "tests" / "support" / "reuse_worker.py",
                *("--target", target, "--task-queue", task_queue),
                env=env,
                cwd=ROOT,
                stderr=stderr,
            )
        procs.append(proc)
        line = (await asyncio.wait_for(proc.stdout.readline(), 60)).strip()
        assert line == b"READY", stderr_path.read_text()
        return proc

    try:
        yield spawn
    finally:
        for proc in procs:
            proc.kill()
        for proc in procs:
            await asyncio.wait_for(proc.wait(), 10)


async def test_memory_survives_a_worker_kill_between_plans(
    agent_client: Client, temporal_target: str, task_queue: str, call_log: Path, tmp_path: Path
) -> None:
    async with worker_processes(temporal_target, task_queue, call_log, tmp_path) as spawn:
        first = await spawn()
        handle = await start(
            agent_client,
            task_queue,
            TWO_TURNS_PROMPT,
            TRY_AGAIN,
            wait_between=True,
            remember_across_turns=True,  # the repair comes in the user's next turn
        )
        deadline = time.monotonic() + 30
        while await handle.query(ReuseConversationWorkflow.turns_done) < 1:
            assert time.monotonic() < deadline, "the first turn never ended"
            await asyncio.sleep(0.1)
        # The failed plan is over and its steps are remembered; the conversation waits for
        # the user. The worker holding it dies without a word.
        first.kill()
        await asyncio.wait_for(first.wait(), 10)
        await spawn()
        await handle.signal(ReuseConversationWorkflow.proceed)
        output = await asyncio.wait_for(handle.result(), RESULT_TIMEOUT_S)
        history = await handle.fetch_history()
    assert calls(call_log) == {"fetch_order": 1, "get_customer": 1, "price_order": 2, "charge": 1}
    assert [line["reused_from"] for line in output.ledgers[1]] == [1, 1, None, None]
    assert output.answers[0].startswith("The charge failed")
    # The new worker rebuilt the memory from history alone and sent it with the repair plan.
    sent = child_inputs(history)[f"{handle.id}/plan/tooluse_2_0"]["memory"]
    assert [s["step"] for s in sent["steps"]] == ["order", "customer", "price"]


async def test_plan_options_travel_to_each_child_plan(
    agent_client: Client, task_queue: str, call_log: Path
) -> None:
    options = {"retry_initial_interval_s": 0.25, "return_stored": "preview"}
    async with worker(agent_client, task_queue):
        handle = await start(agent_client, task_queue, PRIOR_PROMPT, plan_options=options)
        output = await asyncio.wait_for(handle.result(), RESULT_TIMEOUT_S)
        history = await handle.fetch_history()
    assert json.loads(output.answers[0]) == {"pay": {"receipt": "r-card-7-12", "amount": 12}}
    inputs = child_inputs(history)
    assert inputs and all(
        i["retrying"]["retry_initial_interval_s"] == 0.25
        and i["storage"]["return_stored"] == "preview"
        for i in inputs.values()
    )


def test_plan_options_are_checked_when_the_plugin_is_built() -> None:
    with pytest.raises(ValueError, match=r"unknown option\(s\) store_over; the options are: "):
        WorkflowPlanPlugin(plan_options={"store_over": 10})
    with pytest.raises(ValueError, match="unknown option"):
        WorkflowPlanPlugin(plan_options={"tools": {}})  # the plugin sets that itself
