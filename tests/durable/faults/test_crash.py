"""Kill the worker mid-step: the plan still finishes, and no completed side effect repeats.

The worker runs as a subprocess (``tests/support/crash_worker.py``) on the session dev
server. Each tool writes "start" and "done" lines to a side-effect log around a
one-second sleep. When step K is in flight (and the server has every other
started step as completed, and no workflow task outstanding) the worker is
SIGKILLed and a replacement, warmed up beforehand, starts polling. The killed
step's heartbeat times out after a second, Temporal retries it on the new
worker, and the rest of the plan runs there.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from durable_plan import PlanHandle, start_plan
from durable_plan.testing import model_calls
from durable_plan.testing.scripted_model import MODEL_ACTIVITY_NAMES
from tests.support.crash_tools import (
    crash_agent_plan,
    crash_map_plan,
    crash_plan,
    crash_registry,
)
from tests.support.worker_processes import (
    RESULT_TIMEOUT_S,
    in_flight,
    kill_and_replace,
    only_pending_activity,
    read_log,
    worker_processes,
)

STEPS = ["a", "b", "c1", "c2", "d", "e"]
KILL_POINT_TIMEOUT_S = 20.0


async def wait_for_kill_point(handle: PlanHandle, log: Path, target: str) -> None:
    """Until ``target`` runs and is all the server is waiting for.

    Checking the server (not only the log) makes sure every other step's
    completion was delivered before the kill, so only ``target`` may run twice;
    and that no workflow task is in flight, whose loss would cost the workflow
    task timeout (10 s) rather than the heartbeat timeout.
    """
    deadline = time.monotonic() + KILL_POINT_TIMEOUT_S
    while time.monotonic() < deadline:
        entries = read_log(log)
        if (
            in_flight(entries) == {target}
            and await only_pending_activity(handle, target)
            # Re-read: the step must still be mid-sleep when the kill lands.
            and in_flight(read_log(log)) == {target}
        ):
            return
        done = {e["step"] for e in entries if e["event"] == "done"}
        if target in done:
            pytest.fail(f"step {target} finished before the kill point was seen: {entries}")
        await asyncio.sleep(0.02)
    pytest.fail(f"step {target} never ran alone; log: {read_log(log)}")


@pytest.mark.parametrize("killed", ["b", "c2", "e"], ids=["step2", "step4", "step6"])
async def test_kill_worker_mid_step(
    client: Client,
    temporal_target: str,
    task_queue: str,
    workflow_id: str,
    tmp_path: Path,
    killed: str,
) -> None:
    log = tmp_path / "side-effects.jsonl"
    async with worker_processes(temporal_target, task_queue, log, tmp_path) as spawn:
        first = await spawn()
        # c1 is quick, so when c2 is killed its fan-out sibling has already landed.
        handle = await start_plan(
            client,
            crash_plan(fast="c1"),
            task_queue=task_queue,
            registry=crash_registry(),
            workflow_id=workflow_id,
            retry_initial_interval_s=0.2,
        )
        second, result = await kill_and_replace(
            spawn, first, handle, log, wait_for_kill_point(handle, log, killed)
        )

    assert result.ok, result.ledger
    assert [o.id for o in result.ledger] == STEPS
    assert all(o.status == "ok" for o in result.ledger), result.ledger
    assert result.returned == {"e": {"value": 12}}
    assert result.outcome(killed).attempts == 2

    entries = read_log(log)
    for step in STEPS:
        lines = [e for e in entries if e["step"] == step]
        starts = [e for e in lines if e["event"] == "start"]
        dones = [e for e in lines if e["event"] == "done"]
        assert len(dones) == 1, f"step {step}: side effect ran {len(dones)} times: {lines}"
        if step == killed:
            assert [e["attempt"] for e in starts] == [1, 2], lines
            assert dones[0]["attempt"] == 2, lines
            # Attempt 1 died with the first worker; attempt 2 ran on the new one.
            assert starts[0]["pid"] == first.proc.pid, lines
            assert starts[1]["pid"] == dones[0]["pid"] == second.proc.pid, lines
        else:
            assert [e["attempt"] for e in starts] == [1], lines
        assert {e["key"] for e in lines} == {f"{workflow_id}/{step}"}, lines


# -- agent steps: kill the worker mid-loop ---------------------------------------------------


async def wait_for_loop_kill_point(child: Any, log: Path, where: str) -> None:
    """``tool``: the second round's tool call runs alone; ``model``: the second model call
    runs alone (the first tool call is done, nothing else pending)."""
    deadline = time.monotonic() + KILL_POINT_TIMEOUT_S
    while time.monotonic() < deadline:
        entries = read_log(log)
        try:
            raw = (await child.describe()).raw_description
        except Exception:
            await asyncio.sleep(0.05)
            continue
        pending = list(raw.pending_activities)
        done = {e["step"] for e in entries if e["event"] == "done"}
        quiet = len(pending) == 1 and not raw.HasField("pending_workflow_task")
        if (
            where == "tool"
            and quiet
            and in_flight(entries) == {"loop/agent.2/crash_work"}
            and pending[0].activity_id == "loop/agent.2/crash_work"
            and in_flight(read_log(log))
        ):
            return
        if (
            where == "model"
            and quiet
            and done == {"loop/agent.1/crash_work"}
            and not in_flight(entries)
            and pending[0].activity_type.name in MODEL_ACTIVITY_NAMES
            and pending[0].attempt == 1
            and pending[0].HasField("last_started_time")
        ):
            return
        await asyncio.sleep(0.02)
    pytest.fail(f"the loop never reached the {where} kill point; log: {read_log(log)}")


@pytest.mark.parametrize("where", ["tool", "model"], ids=["in-a-tool-call", "between-rounds"])
async def test_kill_worker_mid_agent_loop(
    client: Client,
    temporal_target: str,
    task_queue: str,
    workflow_id: str,
    tmp_path: Path,
    where: str,
) -> None:
    log = tmp_path / "side-effects.jsonl"
    async with worker_processes(temporal_target, task_queue, log, tmp_path, "--agents") as spawn:
        first = await spawn()
        handle = await start_plan(
            client,
            crash_agent_plan(),
            task_queue=task_queue,
            registry=crash_registry(),
            workflow_id=workflow_id,
            model="scripted",
            retry_initial_interval_s=0.2,
            model_heartbeat_timeout_s=1.0,
        )
        child = client.get_workflow_handle(f"{workflow_id}/agent/loop")
        _, result = await kill_and_replace(
            spawn, first, handle, log, wait_for_loop_kill_point(child, log, where)
        )
        child_history = await child.fetch_history()

    loop = result.returned["loop"]
    assert loop["final"] is True and loop["output"] == {"total": 3}
    assert loop["iterations"] == 3
    assert model_calls(child_history) == 3, "no model round ran twice"
    entries = read_log(log)
    for call_id in ("loop/agent.1/crash_work", "loop/agent.2/crash_work"):
        dones = [e for e in entries if e["step"] == call_id and e["event"] == "done"]
        assert len(dones) == 1, f"{call_id} ran {len(dones)} times: {entries}"
    starts = [e for e in entries if e["event"] == "start"]
    expected = 3 if where == "tool" else 2  # the killed tool call started twice
    assert len(starts) == expected, entries


# -- maps: kill the worker mid-map ------------------------------------------------------------


async def test_kill_worker_mid_map_reruns_no_finished_item(
    client: Client, temporal_target: str, task_queue: str, workflow_id: str, tmp_path: Path
) -> None:
    log = tmp_path / "side-effects.jsonl"
    async with worker_processes(temporal_target, task_queue, log, tmp_path) as spawn:
        first = await spawn()
        handle = await start_plan(
            client,
            crash_map_plan(),
            task_queue=task_queue,
            registry=crash_registry(),
            workflow_id=workflow_id,
            retry_initial_interval_s=0.2,
        )
        _, result = await kill_and_replace(
            spawn, first, handle, log, wait_for_kill_point(handle, log, "m/do.3")
        )
    assert [r["value"] for r in result.returned["m"]["results"]] == [10, 11, 12, 13, 14, 15]
    entries = read_log(log)
    for index in range(6):
        item = f"m/do.{index}"
        starts = [e for e in entries if e["step"] == item and e["event"] == "start"]
        dones = [e for e in entries if e["step"] == item and e["event"] == "done"]
        assert len(dones) == 1, f"{item} ran {len(dones)} times: {entries}"
        assert len(starts) == (2 if index == 3 else 1), f"{item}: {starts}"


# -- the retry budget: a lost worker does not spend it -------------------------------------------


async def wait_for_attempt(log: Path, step: str, attempt: int) -> None:
    """Until ``step``'s attempt ``attempt`` has started and not finished."""
    deadline = time.monotonic() + KILL_POINT_TIMEOUT_S
    while time.monotonic() < deadline:
        entries = [e for e in read_log(log) if e["step"] == step]
        started = any(e["event"] == "start" and e["attempt"] == attempt for e in entries)
        done = any(e["event"] == "done" for e in entries)
        if started and not done:
            return
        await asyncio.sleep(0.02)
    pytest.fail(f"attempt {attempt} of {step} never ran; log: {read_log(log)}")


async def test_a_step_interrupted_by_three_kills_still_succeeds_with_no_retries(
    client: Client, temporal_target: str, task_queue: str, workflow_id: str, tmp_path: Path
) -> None:
    log = tmp_path / "side-effects.jsonl"
    plan = {"steps": [{"id": "a", "tool": "crash_work", "args": {"value": 1}}]}
    async with worker_processes(temporal_target, task_queue, log, tmp_path) as spawn:
        worker = await spawn()
        handle = await start_plan(
            client,
            plan,
            task_queue=task_queue,
            registry=crash_registry(retries=0),  # the owner allows no retry at all
            workflow_id=workflow_id,
            retry_initial_interval_s=0.2,
        )
        for attempt in (1, 2, 3):
            loading = asyncio.create_task(spawn(hold=True))
            await wait_for_attempt(log, "a", attempt)
            worker.kill()
            await worker.proc.wait()
            worker = await loading
            await worker.release()
        result = await asyncio.wait_for(handle.result(), RESULT_TIMEOUT_S)
    assert result.outcome("a").status == "ok"
    assert result.outcome("a").attempts == 4
    dones = [e for e in read_log(log) if e["event"] == "done"]
    assert len(dones) == 1 and dones[0]["attempt"] == 4


# -- exactly-once effects: a kill between the effect and the completion ---------------------


@pytest.mark.parametrize("once", [True, False], ids=["exactly-once", "plain"])
async def test_a_kill_after_the_effect_repeats_it_only_without_the_helper(
    client: Client,
    temporal_target: str,
    task_queue: str,
    workflow_id: str,
    tmp_path: Path,
    once: bool,
) -> None:
    log = tmp_path / "side-effects.jsonl"
    plan = {"steps": [{"id": "r", "tool": "crash_refund", "args": {"ticket": 7, "once": once}}]}
    async with worker_processes(temporal_target, task_queue, log, tmp_path) as spawn:
        worker = await spawn()
        handle = await start_plan(
            client,
            plan,
            task_queue=task_queue,
            registry=crash_registry(),
            workflow_id=workflow_id,
            retry_initial_interval_s=0.2,
        )
        loading = asyncio.create_task(spawn(hold=True))
        deadline = time.monotonic() + KILL_POINT_TIMEOUT_S
        while not any(e["event"] == "committed" for e in read_log(log)):
            assert time.monotonic() < deadline, read_log(log)
            await asyncio.sleep(0.02)
        worker.kill()  # after the effect, before Temporal records the completion
        await worker.proc.wait()
        worker = await loading
        await worker.release()
        result = await asyncio.wait_for(handle.result(), RESULT_TIMEOUT_S)
    assert result.outcome("r").status == "ok" and result.outcome("r").attempts == 2
    conn = sqlite3.connect(log.with_suffix(".db"))
    rows = conn.execute("SELECT COUNT(*) FROM refunds").fetchone()[0]
    conn.close()
    assert rows == (1 if once else 2)


# -- failover: two workers, one dies mid-plan --------------------------------------------------


async def test_failover_the_other_worker_finishes_every_plan(
    client: Client, temporal_target: str, task_queue: str, workflow_id: str, tmp_path: Path
) -> None:
    log = tmp_path / "side-effects.jsonl"
    async with worker_processes(temporal_target, task_queue, log, tmp_path) as spawn:
        first, second = await spawn(), await spawn()
        handles = [
            await start_plan(
                client,
                crash_plan(fast="c1"),
                task_queue=task_queue,
                registry=crash_registry(),
                workflow_id=f"{workflow_id}-{n}",
                retry_initial_interval_s=0.2,
            )
            for n in range(4)
        ]
        deadline = time.monotonic() + KILL_POINT_TIMEOUT_S
        while not any(e["pid"] == first.proc.pid for e in read_log(log) if e["event"] == "start"):
            assert time.monotonic() < deadline, read_log(log)
            await asyncio.sleep(0.02)
        first.kill()  # mid-plan: the first worker has steps in flight
        await first.proc.wait()
        results = await asyncio.wait_for(
            asyncio.gather(*(h.result() for h in handles)), RESULT_TIMEOUT_S * 2
        )
        assert second.proc.returncode is None, "the survivor kept running"
    assert all(r.ok and r.returned == {"e": {"value": 12}} for r in results)
    dones: dict[str, list[int]] = {}
    for entry in read_log(log):
        if entry["event"] == "done":
            dones.setdefault(entry["key"], []).append(entry["pid"])
    assert len(dones) == 4 * len(STEPS)
    # At least once: only a step the killed worker had finished (effect done, completion
    # maybe not yet recorded) may have run again, on the survivor.
    repeated = {key: pids for key, pids in dones.items() if len(pids) > 1}
    assert all(pids[0] == first.proc.pid and len(pids) == 2 for pids in repeated.values())
