"""Saved plans as tools (``plan__<name>``): in-process and on the real dev server.

A saved plan called from a step, from a map's body (a whole plan per item, its own map
nested through it) and from an agent step; its failure naming the inner step's path; a
cycle and the depth bound refused before anything runs; a broken saved plan never
registering; the caller's plannable patterns holding inside.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from strands import Agent
from strands.hooks import BeforeToolCallEvent
from temporalio.client import Client
from temporalio.strands_agents import StrandsPlugin

from durable_plan import plan_worker, start_plan
from durable_plan.check import check_plan
from durable_plan.check.plan_file.records import PlanFileError
from durable_plan.language.errors import PlanRejected
from durable_plan.language.plan import PlanResult
from durable_plan.local.runner import execute_plan
from durable_plan.strands.plugin import WorkflowPlanPlugin
from durable_plan.testing import ScriptedModel, call, say
from durable_plan.testing.scripted_model import output
from durable_plan.tools.approval import ApprovalPolicy
from durable_plan.tools.registry import ToolRegistry
from tests.support.crash_tools import FAST_SLEEP_S, crash_registry
from tests.support.helpers import until_phase
from tests.support.worker_processes import (
    in_flight,
    kill_and_replace,
    read_log,
    worker_processes,
)

CALLED: list[str] = []


async def lookup(name: str) -> dict[str, Any]:
    """A monster's hit points.

    Args:
        name: the monster

    Returns: {"name": str, "hp": int}
    """
    CALLED.append(name)
    if name == "boom":
        raise ValueError("no such monster")
    return {"name": name, "hp": len(name)}


async def numbers(n: int) -> dict[str, Any]:
    """The numbers 0..n-1.

    Args:
        n: how many
    """
    return {"values": list(range(n))}


async def square(x: int) -> dict[str, Any]:
    """x squared.

    Args:
        x: the number
    """
    return {"sq": x * x}


FETCH = {
    "description": "Look a monster up.",
    "inputs": {
        "type": "object",
        "properties": {"who": {"type": "string"}},
        "required": ["who"],
    },
    "steps": [{"id": "look", "tool": "lookup", "bind": {"name": "inputs.who"}}],
    "returns": ["look"],
}

SQUARES = {  # control steps inside: a saved plan per item nests a map in a map
    "inputs": {
        "type": "object",
        "properties": {"n": {"type": "integer"}},
        "required": ["n"],
    },
    "steps": [
        {"id": "nums", "tool": "numbers", "bind": {"n": "inputs.n"}},
        {
            "id": "sq",
            "tool": "map",
            "bind": {"over": "steps.nums.values"},
            "args": {"do": {"tool": "square", "bind": {"x": "item"}}},
        },
    ],
    "returns": ["sq"],
}


def registry() -> ToolRegistry:
    reg = ToolRegistry([lookup, numbers, square])
    reg.add_plan(FETCH, name="fetch")
    reg.add_plan(SQUARES, name="squares")
    return reg


REGISTRY = registry()

SCRIPTS = {"Find goblin": [call("plan__fetch", who="goblin"), output({"hp": 6})]}

CALLER = {
    "steps": [
        {"id": "one", "tool": "plan__fetch", "args": {"who": "orc"}},
        {"id": "hp", "tool": "square", "bind": {"x": "steps.one.look.hp"}},
        {"id": "nums", "tool": "numbers", "args": {"n": 3}},
        {
            "id": "each",
            "tool": "map",
            "bind": {"over": "steps.nums.values"},
            "args": {"do": {"tool": "plan__squares", "bind": {"n": "item + 1"}}},
        },
        {
            "id": "ask",
            "tool": "agent",
            "args": {
                "prompt": "Find goblin's hit points",
                "tools": ["plan__fetch"],
                "output_schema": {"type": "object", "properties": {"hp": {"type": "integer"}}},
            },
        },
    ]
}


def check_caller(result: PlanResult) -> None:
    assert result.ok, result.ledger
    assert result.returned["one"] == {"look": {"name": "orc", "hp": 3}}
    assert result.returned["hp"] == {"sq": 9}
    each = result.returned["each"]["results"]
    assert [item["sq"]["results"] for item in each] == [
        [{"sq": 0}],
        [{"sq": 0}, {"sq": 1}],
        [{"sq": 0}, {"sq": 1}, {"sq": 4}],
    ]
    ask = result.returned["ask"]
    assert ask["output"] == {"hp": 6}
    assert [c["tool"] for c in ask["tools_called"]] == ["plan__fetch"]
    assert "goblin" in CALLED


FAILING = {"steps": [{"id": "bad", "tool": "plan__fetch", "args": {"who": "boom"}}]}
FAILED_AT = "saved plan plan__fetch failed at bad/plan.look: ValueError: no such monster"


# -- in-process ------------------------------------------------------------------------------


async def test_a_saved_plan_runs_from_a_step_a_map_body_and_an_agent() -> None:
    CALLED.clear()
    result = await execute_plan(CALLER, REGISTRY, model=ScriptedModel(scripts=SCRIPTS))
    check_caller(result)


async def test_a_failed_saved_plan_fails_its_step_naming_the_inner_path() -> None:
    result = await execute_plan(FAILING, REGISTRY)
    assert result.outcome("bad").status == "failed"
    assert result.outcome("bad").error == FAILED_AT


def test_the_catalogue_shows_inputs_and_the_return_shape() -> None:
    spec = REGISTRY.catalog().tools["plan__fetch"]
    assert spec.input_schema == FETCH["inputs"]
    assert spec.output_schema is not None
    assert set(spec.output_schema["properties"]) == {"look"}
    with pytest.raises(PlanRejected) as rejected:
        check_plan(
            {
                "steps": [
                    {"id": "one", "tool": "plan__fetch", "args": {"whom": "orc"}},
                    {"id": "two", "tool": "square", "bind": {"x": "steps.one.look.hitpoints"}},
                ]
            },
            catalog=REGISTRY.catalog(),
        )
    text = str(rejected.value)
    assert "tool 'plan__fetch' has no argument 'whom'" in text
    assert "has no field 'hitpoints'" in text


def test_a_broken_saved_plan_never_registers() -> None:
    reg = ToolRegistry([lookup])
    with pytest.raises(PlanFileError, match="unknown tool 'lokup'"):
        reg.add_plan({"steps": [{"id": "a", "tool": "lokup"}], "returns": ["a"]}, name="x")
    with pytest.raises(PlanFileError, match="must declare `returns`"):
        reg.add_plan({"steps": [{"id": "a", "tool": "lookup"}]}, name="y")
    assert "plan__x" not in reg and "plan__y" not in reg


def cyclic_registry() -> ToolRegistry:
    """``alpha``'s agent may call every ``plan__*x``, and ``zx``, registered after it,
    calls ``alpha``: a cycle only the agent step's tools close."""
    reg = ToolRegistry([lookup])
    reg.add_plan(
        {"steps": [{"id": "a", "tool": "lookup", "args": {"name": "x"}}], "returns": ["a"]},
        name="leafx",
    )
    agent = {
        "id": "ag",
        "tool": "agent",
        "args": {"prompt": "go", "tools": ["plan__*x"], "output_schema": {"type": "object"}},
    }
    reg.add_plan({"steps": [agent], "returns": ["ag"]}, name="alpha")
    reg.add_plan({"steps": [{"id": "a", "tool": "plan__alpha"}], "returns": ["a"]}, name="zx")
    return reg


def deep_registry() -> ToolRegistry:
    """``l1`` .. ``l4`` each call the one below; ``wide``'s agent may call any ``plan__l*``,
    registered while ``l3`` was the deepest: once ``l4`` exists it reaches five deep."""
    reg = ToolRegistry([lookup])
    reg.add_plan(
        {"steps": [{"id": "a", "tool": "lookup", "args": {"name": "x"}}], "returns": ["a"]},
        name="l1",
    )
    for n in (2, 3):
        reg.add_plan(
            {"steps": [{"id": "a", "tool": f"plan__l{n - 1}"}], "returns": ["a"]}, name=f"l{n}"
        )
    agent = {
        "id": "ag",
        "tool": "agent",
        "args": {"prompt": "go", "tools": ["plan__l*"], "output_schema": {"type": "object"}},
    }
    reg.add_plan({"steps": [agent], "returns": ["ag"]}, name="wide")
    reg.add_plan({"steps": [{"id": "a", "tool": "plan__l3"}], "returns": ["a"]}, name="l4")
    with pytest.raises(PlanFileError, match="saved plans nest 5 deep"):
        reg.add_plan({"steps": [{"id": "a", "tool": "plan__l4"}], "returns": ["a"]}, name="l5")
    return reg


async def test_a_cycle_is_refused_before_anything_runs() -> None:
    CALLED.clear()
    plan = {"steps": [{"id": "go", "tool": "plan__alpha"}]}
    with pytest.raises(PlanRejected) as rejected:
        await execute_plan(plan, cyclic_registry(), model=ScriptedModel(scripts={"never": []}))
    assert "saved plans call each other in a cycle: plan__alpha -> plan__zx -> plan__alpha" in str(
        rejected.value
    )
    assert CALLED == []


async def test_nesting_past_the_depth_bound_is_refused_before_anything_runs() -> None:
    CALLED.clear()
    reg = deep_registry()
    ok = await execute_plan({"steps": [{"id": "go", "tool": "plan__l4"}]}, reg)
    assert ok.ok and CALLED == ["x"]
    CALLED.clear()
    with pytest.raises(PlanRejected) as rejected:
        await execute_plan(
            {"steps": [{"id": "go", "tool": "plan__wide"}]},
            reg,
            model=ScriptedModel(scripts={"never": []}),
        )
    text = str(rejected.value)
    assert (
        "saved plans nest 5 deep (plan__wide -> plan__l4 -> plan__l3 -> plan__l2 -> plan__l1)"
        in text
    )
    assert "the limit is 4" in text
    assert CALLED == []


async def test_the_callers_plannable_patterns_hold_inside() -> None:
    catalog = REGISTRY.catalog(plannable=["plan__*", "square", "numbers"])
    with pytest.raises(PlanRejected, match="saved plan plan__fetch cannot run under this plan"):
        await execute_plan(
            {"steps": [{"id": "a", "tool": "plan__fetch", "args": {"who": "x"}}]},
            REGISTRY,
            catalog=catalog,
        )


# -- durably ---------------------------------------------------------------------------------


@pytest.fixture
async def agent_client(temporal_target: str) -> AsyncIterator[Client]:
    plugin = StrandsPlugin(models={"scripted": lambda: ScriptedModel(scripts=SCRIPTS)})
    yield await Client.connect(temporal_target, plugins=[plugin])


async def run_durable(
    client: Client, task_queue: str, plan: dict[str, Any]
) -> tuple[PlanResult, Any]:
    async with plan_worker(client, task_queue=task_queue, registry=REGISTRY):
        handle = await start_plan(
            client, plan, task_queue=task_queue, registry=REGISTRY, model="scripted"
        )
        result = await asyncio.wait_for(handle.result(), 120)
        return result, handle


async def test_durably_a_saved_plan_is_a_child_plan_workflow(
    agent_client: Client, task_queue: str
) -> None:
    CALLED.clear()
    result, handle = await run_durable(agent_client, task_queue, CALLER)
    check_caller(result)
    me = handle.handle.id
    children = [
        e.start_child_workflow_execution_initiated_event_attributes
        async for e in handle.handle.fetch_history_events()
        if e.HasField("start_child_workflow_execution_initiated_event_attributes")
    ]
    ids = sorted(c.workflow_id for c in children)
    assert f"{me}/plan/one" in ids
    assert [f"{me}/plan/each/do.{i}" for i in range(3)] == [i for i in ids if "/do." in i]
    assert f"{me}/agent/ask" in ids
    # The agent's call of plan__fetch is a child of the agent step's workflow.
    agent = agent_client.get_workflow_handle(f"{me}/agent/ask")
    inner = [
        e.start_child_workflow_execution_initiated_event_attributes.workflow_id
        async for e in agent.fetch_history_events()
        if e.HasField("start_child_workflow_execution_initiated_event_attributes")
    ]
    assert len(inner) == 1 and inner[0].startswith(f"{me}/agent/ask/plan/")


async def test_durably_a_failed_saved_plan_fails_its_step_naming_the_inner_path(
    agent_client: Client, task_queue: str
) -> None:
    result, _ = await run_durable(agent_client, task_queue, FAILING)
    assert result.outcome("bad").status == "failed"
    assert result.outcome("bad").error == FAILED_AT


# -- a worker SIGKILLed inside a saved plan's child ------------------------------------------

CHAIN = {
    "inputs": {"type": "object", "properties": {"v": {"type": "integer"}}, "required": ["v"]},
    "steps": [
        {"id": "p1", "tool": "crash_work", "bind": {"value": "inputs.v"}},
        {"id": "p2", "tool": "crash_work", "bind": {"value": "steps.p1.value"}},
    ],
    "returns": ["p2"],
}
CRASH_CALLER = {
    "steps": [
        {"id": "a", "tool": "crash_work", "args": {"value": 1, "sleep_s": FAST_SLEEP_S}},
        {"id": "s", "tool": "plan__chain", "bind": {"v": "steps.a.value"}},
        {"id": "z", "tool": "crash_work", "bind": {"value": "steps.s.p2.value"}},
    ],
    "returns": ["z"],
}


async def wait_inside_the_child(child: Any, log: Path) -> None:
    """Until the child's second step runs alone (the first's completion recorded, no
    workflow task in flight), mid-sleep."""
    deadline = time.monotonic() + 20.0
    while time.monotonic() < deadline:
        flying = in_flight(read_log(log))
        try:
            raw = (await child.describe()).raw_description
        except Exception:  # the child has not started yet
            await asyncio.sleep(0.05)
            continue
        pending = [a.activity_id for a in raw.pending_activities]
        if (
            len(flying) == 1
            and next(iter(flying)).endswith("p2")
            and pending == ["p2"]
            and not raw.HasField("pending_workflow_task")
            and in_flight(read_log(log)) == flying
        ):
            return
        await asyncio.sleep(0.02)
    pytest.fail(f"the saved plan's step p2 never ran alone; log: {read_log(log)}")


async def test_a_worker_killed_inside_a_saved_plan_reruns_nothing_recorded(
    client: Client, temporal_target: str, task_queue: str, workflow_id: str, tmp_path: Path
) -> None:
    registry = crash_registry()
    registry.add_plan(CHAIN, name="chain")
    log = tmp_path / "side-effects.jsonl"
    async with worker_processes(temporal_target, task_queue, log, tmp_path) as spawn:
        first = await spawn()
        handle = await start_plan(
            client,
            CRASH_CALLER,
            task_queue=task_queue,
            registry=registry,
            workflow_id=workflow_id,
            retry_initial_interval_s=0.2,
        )
        child = client.get_workflow_handle(f"{workflow_id}/plan/s")
        _, result = await kill_and_replace(
            spawn, first, handle, log, wait_inside_the_child(child, log)
        )
    assert result.ok, result.ledger
    assert result.returned == {"z": {"value": 5}}  # 1, then +1 in a, p1, p2 and z
    entries = read_log(log)
    steps = sorted({e["step"] for e in entries})
    assert len(steps) == 4, entries
    for step in steps:
        starts = [e for e in entries if e["step"] == step and e["event"] == "start"]
        dones = [e for e in entries if e["step"] == step and e["event"] == "done"]
        assert len(dones) == 1, f"{step} ran its effect {len(dones)} times: {entries}"
        # Only the killed call started twice; nothing the server had recorded ran again.
        assert len(starts) == (2 if step.endswith("p2") else 1), f"{step}: {starts}"


# -- repair: a saved-plan step that ended ok is reused whole ---------------------------------


async def test_a_repair_plan_reuses_a_saved_plan_step_without_running_it() -> None:
    from durable_plan.local.runner import run_checked
    from durable_plan.run.reuse import Recall, Remembered, args_key, reusable_tools

    CALLED.clear()
    done = Remembered(
        "one", "plan__fetch", args_key({"who": "orc"}), '{"look":{"name":"orc","hp":3}}', 1
    )
    recall = Recall([done], plan=2, reusable=reusable_tools(REGISTRY.options()))
    plan = {
        "steps": [
            {"id": "one", "tool": "plan__fetch", "args": {"who": "orc"}},
            {"id": "hp", "tool": "square", "bind": {"x": "steps.one.look.hp"}},
        ]
    }
    checked = check_plan(plan, catalog=REGISTRY.catalog())
    result = await run_checked(checked, REGISTRY.invoke, recall=recall)
    assert result.ok and result.outcome("one").reused_from == 1
    assert result.returned["hp"] == {"sq": 9}
    assert CALLED == []  # nothing inside the saved plan ran again


# -- repair: a saved plan that failed after a charge does not charge again -------------------

CHARGES: list[int] = []


async def charge(amount: int) -> dict[str, Any]:
    """Charge a card (a side effect).

    Args:
        amount: euros
    """
    CHARGES.append(amount)
    return {"charged": amount}


async def confirm(ok: bool) -> dict[str, Any]:
    """Confirm the order; fails unless ok.

    Args:
        ok: whether it goes through
    """
    if not ok:
        raise ValueError("the order was not confirmed")
    return {"confirmed": True}


def shop() -> ToolRegistry:
    reg = ToolRegistry([charge, confirm])
    reg.add_plan(
        {
            "inputs": {
                "type": "object",
                "properties": {"amount": {"type": "integer"}, "ok": {"type": "boolean"}},
                "required": ["amount", "ok"],
            },
            "steps": [
                {"id": "pay", "tool": "charge", "bind": {"amount": "inputs.amount"}},
                {"id": "done", "tool": "confirm", "bind": {"ok": "inputs.ok"}, "after": ["pay"]},
            ],
            "returns": ["pay", "done"],
        },
        name="checkout",
    )
    return reg


SHOP = shop()


def checkout(ok: bool) -> dict[str, Any]:
    return {"steps": [{"id": "buy", "tool": "plan__checkout", "args": {"amount": 5, "ok": ok}}]}


def memory(entries: list[Any], plan: int) -> Any:
    from durable_plan.run.reuse import Recall, reusable_tools

    return Recall(entries, plan=plan, reusable=reusable_tools(SHOP.options()))


async def run_with_memory(plan: dict[str, Any], recall: Any) -> PlanResult:
    from durable_plan.local.agents import agent_steps
    from durable_plan.local.runner import run_checked

    invoker = agent_steps(SHOP.invoke, SHOP, SHOP.catalog().plannable)
    return await run_checked(check_plan(plan, catalog=SHOP.catalog()), invoker, recall=recall)


async def test_a_repaired_caller_does_not_rerun_a_saved_plans_charged_step() -> None:
    CHARGES.clear()
    first = memory([], plan=1)
    failed = await run_with_memory(checkout(ok=False), first)
    assert failed.outcome("buy").status == "failed" and CHARGES == [5]
    assert [e.step for e in first.learned] == ["buy/plan.pay"]
    repaired = await run_with_memory(checkout(ok=True), memory(first.learned, plan=2))
    assert repaired.ok and repaired.returned["buy"]["pay"] == {"charged": 5}
    assert CHARGES == [5]  # the charge inside the saved plan was reused, not repeated


async def test_durably_a_repaired_caller_does_not_rerun_a_saved_plans_charged_step(
    client: Client, task_queue: str
) -> None:
    from durable_plan.run.reuse import REMEMBERED_KEY, Remembered

    CHARGES.clear()
    async with plan_worker(client, task_queue=task_queue, registry=SHOP):
        handle = await start_plan(
            client,
            checkout(ok=False),
            task_queue=task_queue,
            registry=SHOP,
            memory=memory([], plan=1).to_wire(),
        )
        raw = await asyncio.wait_for(handle.handle.result(), 60)
        learned = [Remembered.from_wire(e) for e in json_of(raw)[REMEMBERED_KEY]]
        assert [e.step for e in learned] == ["buy/plan.pay"] and CHARGES == [5]
        handle = await start_plan(
            client,
            checkout(ok=True),
            task_queue=task_queue,
            registry=SHOP,
            memory=memory(learned, plan=2).to_wire(),
        )
        repaired = await asyncio.wait_for(handle.result(), 60)
    assert repaired.ok and repaired.returned["buy"]["pay"] == {"charged": 5}
    assert CHARGES == [5]


def json_of(raw: Any) -> Any:
    import json

    if isinstance(raw, bytes | str):
        return json.loads(raw)
    data = getattr(raw, "payload", None)
    return json.loads(data.data) if data is not None else raw


# -- replay: the caller's and each child plan's history, in another process -----------------

REPLAY_SCRIPT = """
import asyncio, json, os, sys
from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer
from durable_plan import PlanWorkflow

async def main():
    replayer = Replayer(workflows=[PlanWorkflow])
    for wid, path in json.loads(sys.argv[1]).items():
        with open(path) as f:
            await replayer.replay_workflow(WorkflowHistory.from_json(wid, f.read()))
    print("replayed", len(json.loads(sys.argv[1])))

asyncio.run(main())
os._exit(0)
"""


async def test_saved_plan_histories_replay_under_another_hash_seed(
    agent_client: Client, task_queue: str, tmp_path: Path
) -> None:
    import json
    import os
    import subprocess
    import sys

    _, handle = await run_durable(agent_client, task_queue, CALLER)
    me = handle.handle.id
    files: dict[str, str] = {}
    for wid in (me, f"{me}/plan/one", f"{me}/plan/each/do.2"):
        history = await agent_client.get_workflow_handle(wid).fetch_history()
        path = tmp_path / f"{len(files)}.json"
        path.write_text(history.to_json())
        files[wid] = str(path)
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-c", REPLAY_SCRIPT, json.dumps(files)],
        env={**os.environ, "PYTHONHASHSEED": "12345"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0 and "replayed 3" in done.stdout, done.stdout + done.stderr


def test_a_saved_plan_is_a_plans_tool_never_a_direct_one() -> None:
    """A model reaches a saved plan through a plan (one step is enough); the tools a
    conversation's model may call directly leave it out."""
    from durable_plan.temporal.workflows.agent_tools import durable_tools

    direct = {t.tool_name for t in durable_tools(REGISTRY)}
    assert direct == {"lookup", "numbers", "square"}
    assert "plan__fetch" in REGISTRY.catalog().plannable


# -- the owner's rules hold for the saved plan's call itself ---------------------------------


def forbid_fetch(event: BeforeToolCallEvent) -> None:
    if event.tool_use["name"] == "plan__fetch":
        event.cancel_tool = "fetching is not allowed"


def test_in_process_a_before_hook_cancels_a_steps_saved_plan_call() -> None:
    CALLED.clear()
    plan = {"steps": [{"id": "one", "tool": "plan__fetch", "args": {"who": "orc"}}]}
    agent = Agent(
        model=ScriptedModel([call("submit_workflow_plan", **plan), say("refused")]),
        tools=[],
        plugins=[WorkflowPlanPlugin(registry=REGISTRY)],
        callback_handler=None,
    )
    agent.hooks.add_callback(BeforeToolCallEvent, forbid_fetch)
    agent("fetch the orc")
    assert CALLED == [], "the hook kept the saved plan from running"
    texts = [
        json.dumps(block["toolResult"])
        for message in agent.messages
        for block in message["content"]
        if "toolResult" in block
    ]
    assert any("cancelled by a hook: fetching is not allowed" in t for t in texts), texts


async def test_durably_a_gated_saved_plan_waits_for_approval(
    agent_client: Client, task_queue: str
) -> None:
    """``approval_required=["plan__fetch"]``: the step's call waits for a person before its
    child starts (it ran unasked when saved-plan steps skipped the call's stages)."""
    CALLED.clear()
    gated = ApprovalPolicy.of(["plan__fetch"]).options(REGISTRY.options())
    plan = {"steps": [{"id": "one", "tool": "plan__fetch", "args": {"who": "orc"}}]}
    async with plan_worker(agent_client, task_queue=task_queue, registry=REGISTRY):
        handle = await start_plan(agent_client, plan, task_queue=task_queue, registry=gated)
        line = await until_phase(handle, "one", "awaiting_approval", timeout_s=15)
        assert line["args"] == {"who": "orc"}
        assert CALLED == [], "nothing of the saved plan ran before the approval"
        await handle.decide("one", approved=True, args_digest=line["args_digest"])
        result = await asyncio.wait_for(handle.result(), 60)
    assert result.ok, result.ledger
    assert result.returned["one"] == {"look": {"name": "orc", "hp": 3}}
    assert CALLED == ["orc"]
