"""Breakpoints and nested step paths on the dev server: the same table as in-process
(``tests/support/breakpoint_cases.py``, ``tests/unit/run/test_breakpoints_local.py``).

A call a breakpoint names waits in the workflow that runs it (a plan's steps and items in
the plan, an agent step's tool calls in its child), addressed by its path from the plan's
root; continue, skip and abort are ``PlanHandle`` methods (the CLI and the console call
them). Where the runners can be compared (skip, the paths in the ledger and the events),
each case runs in-process too and the ledgers must match.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.strands_agents import StrandsPlugin

from durable_plan import plan_worker, start_plan
from durable_plan.language.step_path import StepPathError
from durable_plan.local.runner import execute_plan
from durable_plan.run.breakpoints import Pause
from durable_plan.temporal.client.start import PlanHandle
from durable_plan.temporal.workflows.pauses import MAX_PAUSED_BYTES
from durable_plan.temporal.workflows.plan_status import PLAN_STATUS
from tests.support.breakpoint_cases import (
    AGENT,
    CALLS,
    CHAIN,
    MAP,
    REFUND_AGENT,
    SAVED,
    gated_chain,
    registry,
    scripted,
)
from tests.support.crash_tools import crash_registry
from tests.support.helpers import until_phase
from tests.support.worker_processes import RESULT_TIMEOUT_S, read_log, worker_processes

REGISTRY = registry()
WAIT_S = 30.0


@pytest.fixture(scope="module")
async def bp_client(temporal_target: str) -> AsyncIterator[Client]:
    yield await Client.connect(
        temporal_target, plugins=[StrandsPlugin(models={"scripted": scripted})]
    )


async def until_paused(handle: PlanHandle, *paths: str) -> list[dict[str, Any]]:
    """Poll ``paused()`` until every one of ``paths`` is paused; the pauses then."""
    deadline = time.monotonic() + WAIT_S
    seen: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        try:
            seen = await handle.paused()
        except Exception:  # not started yet
            seen = []
        if set(paths) <= {p["path"] for p in seen}:
            return seen
        await asyncio.sleep(0.1)
    raise AssertionError(f"{paths} not paused within {WAIT_S:g} s (paused: {seen})")


async def start(client: Client, task_queue: str, plan: Any, breakpoints: list[str]) -> PlanHandle:
    CALLS.clear()
    return await start_plan(
        client,
        plan,
        task_queue=task_queue,
        registry=REGISTRY,
        model="scripted",
        breakpoints=breakpoints,
    )


async def local_ledger(plan: Any, breakpoints: list[str], answers: dict[str, str]) -> Any:
    async def on_pause(pause: Pause) -> Any:
        return answers.get(pause.path, "continue")

    return await execute_plan(
        plan, registry(gated=False), model=scripted(), breakpoints=breakpoints, on_pause=on_pause
    )


def statuses(result: Any) -> list[tuple[str, str, str | None]]:
    return [(o.id, o.status, o.error) for o in result.ledger]


async def test_a_plain_step_pauses_shows_its_arguments_and_continues(
    bp_client: Client, task_queue: str
) -> None:
    async with plan_worker(bp_client, task_queue=task_queue, registry=REGISTRY):
        handle = await start(bp_client, task_queue, CHAIN, ["b"])
        [pause] = await until_paused(handle, "b")
        assert (pause["tool"], pause["args"]) == ("charge", {"cents": 500})
        assert pause["scope"] == {"steps": {"a": {"n": 5}}}
        assert "charge 500" not in CALLS
        line = await until_phase(handle, "b", "paused")
        assert line["tool"] == "charge"
        meta = await handle.handle.query("__temporal_workflow_metadata")
        assert "**Paused at** `b`" in meta.current_details
        assert f"durable-plan continue {handle.id} b" in meta.current_details
        # No activity slot, no timer: nothing is pending while the call is paused.
        raw = (await handle.handle.describe()).raw_description
        assert not [a for a in raw.pending_activities if a.activity_id == "b"]
        with pytest.raises(ValueError, match="no call is paused at 'c'"):
            await handle.continue_("c")
        assert await handle.continue_("b") == "continue"
        result = await asyncio.wait_for(handle.result(), WAIT_S)
        events = [e async for e in handle.events()]
    assert result.ok and "charge 500" in CALLS
    marks = [(e.kind, e.step, e.status) for e in events if e.kind in ("paused", "resumed")]
    assert marks == [("paused", "b", None), ("resumed", "b", "continue")]
    history = await handle.handle.fetch_history()
    timers = [e for e in history.events if e.event_type == EventType.EVENT_TYPE_TIMER_STARTED]
    assert timers == []


async def test_skip_prunes_dependents_as_in_process(bp_client: Client, task_queue: str) -> None:
    async with plan_worker(bp_client, task_queue=task_queue, registry=REGISTRY):
        handle = await start(bp_client, task_queue, CHAIN, ["b"])
        await until_paused(handle, "b")
        await handle.skip("b")
        durable = await asyncio.wait_for(handle.result(), WAIT_S)
    local = await local_ledger(CHAIN, ["b"], {"b": "skip"})
    assert statuses(durable) == statuses(local)
    assert durable.outcome("b").status == "not_taken" and durable.outcome("c").status == "not_taken"


async def test_abort_ends_the_plan_cancelled_with_its_ledger(
    bp_client: Client, task_queue: str
) -> None:
    async with plan_worker(bp_client, task_queue=task_queue, registry=REGISTRY):
        handle = await start(bp_client, task_queue, CHAIN, ["b"])
        await until_paused(handle, "b")
        await handle.abort("b")
        with pytest.raises(Exception):  # noqa: B017 (cancelled)
            await asyncio.wait_for(handle.result(), WAIT_S)
        description = await handle.handle.describe()
        assert description.status == WorkflowExecutionStatus.CANCELED
        ledger = {line["id"]: line["phase"] for line in await handle.progress()}
    assert ledger["a"] == "ok" and ledger["b"] != "ok" and "charge 500" not in CALLS


async def test_map_items_pause_at_once_each_addressed_by_its_path(
    bp_client: Client, task_queue: str
) -> None:
    async with plan_worker(bp_client, task_queue=task_queue, registry=REGISTRY):
        handle = await start(bp_client, task_queue, MAP, ["m"])
        paused = await until_paused(handle, "m/do.0", "m/do.1", "m/do.2")
        assert {p["path"]: p["scope"]["item"] for p in paused} == {
            "m/do.0": 1,
            "m/do.1": 2,
            "m/do.2": 3,
        }
        await handle.skip("m/do.1")
        await handle.continue_("m/do.2")
        await handle.continue_("m/do.0")
        durable = await asyncio.wait_for(handle.result(), WAIT_S)
        history = await handle.handle.fetch_history()
    local = await local_ledger(MAP, ["m"], {"m/do.1": "skip"})
    assert durable.returned == local.returned
    assert durable.returned["m"]["results"][1] == {"not_taken": "skipped at a breakpoint"}
    ids = sorted(
        e.activity_task_scheduled_event_attributes.activity_id
        for e in history.events
        if e.HasField("activity_task_scheduled_event_attributes")
    )
    assert ids == ["m/do.0", "m/do.2"]


async def test_an_agent_step_pauses_each_tool_call_by_its_nested_path(
    bp_client: Client, task_queue: str
) -> None:
    async with plan_worker(bp_client, task_queue=task_queue, registry=REGISTRY):
        handle = await start(bp_client, task_queue, AGENT, ["ag"])
        [first] = await until_paused(handle, "ag/agent.1/fetch")
        assert first["args"] == {"n": 1} and first["scope"] is None
        line = (await handle.progress())[0]
        assert line["paused"][0]["path"] == "ag/agent.1/fetch"
        await handle.continue_("ag/agent.1/fetch")
        # One round, two calls to one tool: both paused at once, each by its own path.
        await until_paused(handle, "ag/agent.2/charge", "ag/agent.2/charge~2")
        await handle.skip("ag/agent.2/charge~2")
        await handle.continue_("ag/agent.2/charge")
        durable = await asyncio.wait_for(handle.result(), WAIT_S)
        events = [e async for e in handle.events()]
        child = bp_client.get_workflow_handle(f"{handle.id}/agent/ag")
        history = await child.fetch_history()
    assert CALLS == ["fetch 1", "charge 10"]
    local = await local_ledger(AGENT, ["ag"], {"ag/agent.2/charge~2": "skip"})
    assert durable.returned["ag"]["tools_called"] == local.returned["ag"]["tools_called"]
    assert [c["path"] for c in durable.returned["ag"]["tools_called"]] == [
        "ag/agent.1/fetch",
        "ag/agent.2/charge",
        "ag/agent.2/charge~2",
    ]
    ids = [
        e.activity_task_scheduled_event_attributes.activity_id
        for e in history.events
        if e.HasField("activity_task_scheduled_event_attributes")
        and e.activity_task_scheduled_event_attributes.activity_type.name != "invoke_model"
    ]
    assert ids == ["ag/agent.1/fetch", "ag/agent.2/charge"]
    # The step events (from the child's stream) name each call by its path.
    three = ["ag/agent.1/fetch", "ag/agent.2/charge", "ag/agent.2/charge~2"]
    assert sorted(str(e.path) for e in events if e.kind == "agent_tool_call") == three
    assert sorted(str(e.path) for e in events if e.kind == "paused") == three
    resumed = {e.path: e.status for e in events if e.kind == "resumed"}
    assert resumed["ag/agent.2/charge~2"] == "skip"


async def test_a_saved_plan_step_pauses_inside_its_child_plan(
    bp_client: Client, task_queue: str
) -> None:
    async with plan_worker(bp_client, task_queue=task_queue, registry=REGISTRY):
        handle = await start(bp_client, task_queue, SAVED, ["s"])
        [first] = await until_paused(handle, "s/plan.first")
        assert first["call"] == "first" and first["args"] == {"cents": 40}
        assert first["scope"] == {"steps": {}, "inputs": {"cents": 40}}
        child = PlanHandle(bp_client.get_workflow_handle(f"{handle.id}/plan/s"))
        meta = await child.handle.query("__temporal_workflow_metadata")
        assert "`s/plan.first`" in meta.current_details
        await handle.continue_("s/plan.first")  # routed to the child plan by its path
        await until_paused(handle, "s/plan.second")
        await handle.skip("s/plan.second")
        durable = await asyncio.wait_for(handle.result(), WAIT_S)
        inner = await asyncio.wait_for(child.result(), WAIT_S)
    assert CALLS == ["charge 40"]
    local = await local_ledger(SAVED, ["s"], {"s/plan.second": "skip"})
    assert statuses(durable) == statuses(local) and durable.returned == local.returned
    assert [(o.id, o.status) for o in inner.ledger] == [("first", "ok"), ("second", "not_taken")]


async def test_an_approval_still_applies_after_continue(bp_client: Client, task_queue: str) -> None:
    async with plan_worker(bp_client, task_queue=task_queue, registry=REGISTRY):
        handle = await start(bp_client, task_queue, gated_chain(), ["r"])
        await until_paused(handle, "r")
        await handle.continue_("r")
        line = await until_phase(handle, "r", "awaiting_approval")
        assert CALLS == []
        await handle.decide("r", True, args_digest=line["args_digest"])
        result = await asyncio.wait_for(handle.result(), WAIT_S)
    assert result.ok and CALLS == ["refund 300"]


async def test_a_bad_breakpoint_starts_nothing(bp_client: Client, task_queue: str) -> None:
    with pytest.raises(StepPathError, match="can match no segment"):
        await start(bp_client, task_queue, CHAIN, ["b/not a segment"])
    listed = [w async for w in bp_client.list_workflows(f"TaskQueue = '{task_queue}'")]
    assert listed == []


async def test_a_pause_survives_a_killed_worker_then_continues(
    client: Client, temporal_target: str, task_queue: str, workflow_id: str, tmp_path: Path
) -> None:
    """The pause is history, not worker state: a worker SIGKILLed while a call is paused
    leaves nothing behind, the next one replays to the same pause, and the call runs once
    after continue."""
    log = tmp_path / "side-effects.jsonl"
    plan = {
        "steps": [
            {"id": "a", "tool": "crash_work", "args": {"value": 1, "sleep_s": 0.0}},
            {
                "id": "b",
                "tool": "crash_work",
                "args": {"add": 1, "sleep_s": 0.0},
                "bind": {"value": "steps.a.value"},
            },
        ]
    }
    async with worker_processes(temporal_target, task_queue, log, tmp_path) as spawn:
        first = await spawn()
        handle = await start_plan(
            client,
            plan,
            task_queue=task_queue,
            registry=crash_registry(),
            workflow_id=workflow_id,
            breakpoints=["b"],
        )
        await until_paused(handle, "b")
        first.kill()
        await first.proc.wait()
        await spawn()
        [pause] = await until_paused(handle, "b")  # answered by the new worker, from history
        assert pause["args"] == {"add": 1, "sleep_s": 0.0, "value": 2}
        await handle.continue_("b")
        result = await asyncio.wait_for(handle.result(), RESULT_TIMEOUT_S)
    assert result.ok and result.returned["b"]["value"] == 3
    entries = read_log(log)
    for step in ("a", "b"):
        dones = [e for e in entries if e["step"] == step and e["event"] == "done"]
        assert len(dones) == 1, entries


async def test_an_agent_call_pauses_then_awaits_approval_addressed_from_the_plan(
    bp_client: Client, task_queue: str
) -> None:
    """Both on one call inside an agent step, each answered on the plan's handle by the
    call's path (routed to the agent step's child workflow)."""
    async with plan_worker(bp_client, task_queue=task_queue, registry=REGISTRY):
        handle = await start(bp_client, task_queue, REFUND_AGENT, ["back/agent.*/refund"])
        await until_paused(handle, "back/agent.1/refund")
        await handle.continue_("back/agent.1/refund")
        deadline = time.monotonic() + WAIT_S
        awaiting: list[dict[str, Any]] = []
        while not awaiting and time.monotonic() < deadline:
            line = (await handle.progress())[0]
            awaiting = line.get("awaiting") or []
            await asyncio.sleep(0.1)
        assert awaiting and awaiting[0]["id"] == "back/agent.1/refund", awaiting
        assert CALLS == [], "continued, the call still waits for its approval"
        digest = awaiting[0]["args_digest"]
        await handle.decide("back/agent.1/refund", True, args_digest=digest)
        result = await asyncio.wait_for(handle.result(), WAIT_S)
    assert result.returned["back"]["output"] == {"total": 5} and CALLS == ["refund 5"]


async def details(handle: Any) -> str:
    """The web UI's current details (the built-in metadata query)."""
    return str((await handle.query("__temporal_workflow_metadata")).current_details)


async def plan_status_of(handle: PlanHandle) -> str | None:
    return (await handle.handle.describe()).typed_search_attributes.get(PLAN_STATUS)


async def until_details(handle: Any, ok: Callable[[str], bool], what: str) -> str:
    deadline = time.monotonic() + WAIT_S
    text = ""
    while time.monotonic() < deadline:
        text = await details(handle)
        if ok(text):
            return text
        await asyncio.sleep(0.1)
    raise AssertionError(f"the details never {what}: {text!r}")


async def test_an_abort_sent_to_an_agent_steps_child_ends_the_whole_plan(
    bp_client: Client, task_queue: str
) -> None:
    """Review finding 5: a call paused inside an agent step's child told the person to
    answer ``<child id> <own path>``, and ``abort`` there cancelled only the child: the
    agent step failed and the rest of the plan ran on. Now the details address the call
    from the top-level plan, and an abort sent to the child cancels the plan itself."""
    plan = {"steps": [*AGENT["steps"], {"id": "other", "tool": "fetch", "args": {"n": 2}}]}
    async with plan_worker(bp_client, task_queue=task_queue, registry=REGISTRY):
        handle = await start(bp_client, task_queue, plan, ["ag", "other"])
        paused = await until_paused(handle, "ag/agent.1/fetch", "other")
        inner = next(p for p in paused if p["path"] == "ag/agent.1/fetch")
        child = PlanHandle(bp_client.get_workflow_handle(f"{handle.id}/agent/ag"))
        shown = await details(child.handle)
        assert f"durable-plan continue {handle.id} ag/agent.1/fetch" in shown
        await child.abort(inner["call"])  # by the child's own id, as an old page said
        with pytest.raises(Exception):  # noqa: B017 (cancelled)
            await asyncio.wait_for(handle.result(), WAIT_S)
        description = await handle.handle.describe()
    assert description.status == WorkflowExecutionStatus.CANCELED
    assert CALLS == []


async def test_a_pause_and_an_approval_share_the_details_and_the_status(
    bp_client: Client, task_queue: str
) -> None:
    """Review finding 6: each desk kept the details it found when its first call opened and
    put them back when its last closed, so continuing a pause wiped a pending approval's
    details; and a pause never showed in ``PlanStatus``. Now one drawing of both desks'
    open calls, and ``paused`` in the list (``awaiting_approval`` wins when both wait)."""
    plan = {
        "steps": [
            {"id": "r", "tool": "refund", "args": {"cents": 300}},
            {"id": "x", "tool": "charge", "args": {"cents": 7}},
        ]
    }
    async with plan_worker(bp_client, task_queue=task_queue, registry=REGISTRY):
        handle = await start(bp_client, task_queue, plan, ["r", "x"])
        await until_paused(handle, "r", "x")
        assert await plan_status_of(handle) == "paused"
        await handle.continue_("r")
        line = await until_phase(handle, "r", "awaiting_approval")
        both = await until_details(
            handle.handle, lambda t: "Awaiting approval" in t, "showed the approval"
        )
        assert "**Paused at** `x`" in both
        assert await plan_status_of(handle) == "awaiting_approval"
        await handle.continue_("x")
        left = await until_details(
            handle.handle, lambda t: "Paused at" not in t, "let the answered pause go"
        )
        assert "**Awaiting approval**" in left and "`r`" in left, left
        assert await plan_status_of(handle) == "awaiting_approval"
        await handle.decide("r", True, args_digest=line["args_digest"])
        result = await asyncio.wait_for(handle.result(), WAIT_S)
        assert await plan_status_of(handle) == "ok"
    assert result.ok and sorted(CALLS) == ["charge 7", "refund 300"]


async def blob(size: int) -> dict[str, Any]:
    """Make a long text.

    Args:
        size: its length

    Returns:
        {"text": str}
    """
    return {"text": "x" * size}


async def keep(text: str) -> dict[str, Any]:
    """Keep a text.

    Args:
        text: the text

    Returns:
        {"kept": int}
    """
    return {"kept": len(text)}


async def test_the_paused_query_stays_within_its_budget_with_many_large_pauses(
    bp_client: Client, task_queue: str
) -> None:
    """Review finding 9: each pause's scope was bounded, its arguments were not, and there
    was no budget across pauses: sixteen parallel steps paused with 200 KB arguments (and
    a scope as large) made the ``paused`` query's answer several MiB, and it failed, so
    ``paused()``, ``show`` and ``continue <wf>`` all did. Now ``MAX_PAUSED_BYTES`` in all:
    the first pauses whole, the rest as previews, every path still listed."""
    tools = registry()
    tools.add(blob)
    tools.add(keep)
    size = 200_000
    keeps = [f"k{n}" for n in range(16)]
    plan = {
        "steps": [
            {"id": "big", "tool": "blob", "args": {"size": size}},
            *({"id": k, "tool": "keep", "bind": {"text": "steps.big.text"}} for k in keeps),
        ]
    }
    async with plan_worker(bp_client, task_queue=task_queue, registry=tools):
        CALLS.clear()
        handle = await start_plan(
            bp_client, plan, task_queue=task_queue, registry=tools, breakpoints=["k*"]
        )
        paused = await until_paused(handle, *keeps)
        assert len(json.dumps(paused)) <= MAX_PAUSED_BYTES + 64 * 1024
        assert paused[0]["args"] == {"text": "x" * size}  # the first whole
        previews = [p for p in paused if "omitted" in p["args"]]
        assert previews and previews[-1]["args"]["preview"].startswith('{"text":"xxx')
        assert "bytes as JSON, past the" in previews[-1]["args"]["omitted"]
        await handle.abort("k0")
        with pytest.raises(Exception):  # noqa: B017 (cancelled)
            await asyncio.wait_for(handle.result(), WAIT_S)
