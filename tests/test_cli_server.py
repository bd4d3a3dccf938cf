"""`durable-plan show`, `approve` and `worker` on a real plan on the dev server, as subprocesses.

The triage plan's refund needs a person's approval: `run` starts it and waits, `show`
finds it awaiting approval with the arguments, `approve` answers, and `run` ends with
the result; a rejection fails the step (exit 1). A `worker` subprocess serves plans
another `run --no-worker` starts. Bad ids, ended plans and absent servers each have
their exit code and one line.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import time
from pathlib import Path

from durable_plan.devserver import free_port

ROOT = Path(__file__).resolve().parent.parent
TRIAGE = str(ROOT / "examples" / "plans" / "triage.yaml")
PARTY = str(ROOT / "examples" / "plans" / "party_round.yaml")
TOOLS = ("--tools", "examples.plan_tools")


async def spawn(*args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "durable_plan",
        *args,
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


async def finish(proc: asyncio.subprocess.Process, timeout: float = 120) -> tuple[int, str, str]:
    out, err = await asyncio.wait_for(proc.communicate(), timeout)
    return proc.returncode if proc.returncode is not None else -1, out.decode(), err.decode()


async def cli(*args: str) -> tuple[int, str, str]:
    return await finish(await spawn(*args))


async def until_awaiting(workflow_id: str, address: str) -> str:
    """`show` until the refund step awaits approval; returns that output."""
    deadline = time.monotonic() + 60
    out = err = ""
    while time.monotonic() < deadline:
        code, out, err = await cli("show", workflow_id, "--address", address)
        if code == 0 and "awaiting approval" in out:
            return out
        await asyncio.sleep(0.3)
    raise AssertionError(f"refund never awaited approval:\n{out}\n{err}")


def one_error(stderr: str) -> str:
    [line] = stderr.strip().splitlines()
    return line


async def test_show_and_approve_a_running_plan(temporal_target: str, workflow_id: str) -> None:
    address = ("--address", temporal_target)
    run = await spawn(
        "run", TRIAGE, *TOOLS, "-i", "ticket_id=7", "--workflow-id", workflow_id, *address
    )
    try:
        shown = await until_awaiting(workflow_id, temporal_target)
        assert shown.splitlines()[0] == f"plan {workflow_id}: running"
        row = next(line for line in shown.splitlines() if "refund_payment" in line)
        assert "⏸ awaiting approval" in row and "waiting for a person's decision" in row
        assert "2 ok · 1 awaiting approval · 1 pending · 1 not taken" in shown
        assert '    arguments: {"ticket_id": 7}' in shown
        assert f"    answer:    durable-plan approve {workflow_id} refund --digest " in shown

        code, out, _ = await cli("show", workflow_id, "--json", *address)
        assert code == 0
        lines = {line["id"]: line for line in json.loads(out)}
        assert lines["refund"]["phase"] == "awaiting_approval"
        assert lines["escalate"]["phase"] == "not_taken"

        code, _, err = await cli("approve", workflow_id, "notify", *address)
        assert code == 1
        assert one_error(err).startswith("durable-plan: refused: ")

        code, out, err = await cli("approve", workflow_id, "refund", *address)
        assert (code, out.strip()) == (0, "refund: approved"), err
        code, out, err = await finish(run)
    finally:
        if run.returncode is None:
            run.kill()
    assert code == 0, err
    result = json.loads(out)
    assert result["returned"]["refund"] == {"ticket_id": 7, "refunded": True}
    assert result["returned"]["notify"]["message"] == "Your payment was refunded."

    code, out, _ = await cli("show", workflow_id, *address)
    assert code == 0
    assert out.splitlines()[0] == f"plan {workflow_id}: completed"
    assert "4 ok · 1 not taken" in out

    code, _, err = await cli("approve", workflow_id, "refund", *address)
    assert code == 1
    assert one_error(err) == (
        f"durable-plan: refused: plan {workflow_id} is completed; no step awaits approval"
    )


async def test_a_rejection_fails_the_step_and_the_run(
    temporal_target: str, workflow_id: str
) -> None:
    address = ("--address", temporal_target)
    run = await spawn(
        "run", TRIAGE, *TOOLS, "-i", "ticket_id=7", "--workflow-id", workflow_id, *address
    )
    try:
        await until_awaiting(workflow_id, temporal_target)
        watch = await spawn("show", workflow_id, "--watch", *address)
        code, out, err = await cli(
            "approve", workflow_id, "refund", "--reject", "--reason", "not twice", *address
        )
        assert (code, out.strip()) == (0, "refund: rejected"), err
        code, out, err = await finish(run)
        watched = await finish(watch)
    finally:
        if run.returncode is None:
            run.kill()
    assert code == 1, err
    refund = next(line for line in json.loads(out)["ledger"] if line["id"] == "refund")
    assert refund["status"] == "failed" and "not twice" in refund["error"]
    assert "step 'refund' failed:" in err
    # `show --watch` waited for the end and exits as the plan ended: failed.
    assert watched[0] == 1
    assert f"plan {workflow_id}: completed" in watched[1] and "1 failed" in watched[1]


async def test_show_and_approve_bad_ids_and_no_server(temporal_target: str) -> None:
    code, _, err = await cli("show", "no-such-plan", "--address", temporal_target)
    assert code == 2
    line = one_error(err)
    assert line.startswith(f"durable-plan: error: no workflow 'no-such-plan' on {temporal_target}")
    code, _, err = await cli("approve", "no-such-plan", "refund", "--address", temporal_target)
    assert code == 2
    assert one_error(err).startswith("durable-plan: error: no workflow 'no-such-plan'")
    address = f"127.0.0.1:{free_port()}"
    for args in (["show", "x"], ["approve", "x", "y"], ["worker", *TOOLS]):
        code, _, err = await cli(*args, "--address", address)
        assert code == 3, args
        assert one_error(err) == (
            f"durable-plan: error: no Temporal server answers at {address} (Connection "
            "refused); start one with `durable-plan dev`, or pass --address HOST:PORT"
        )


async def test_worker_serves_plans_started_elsewhere(
    temporal_target: str, task_queue: str, workflow_id: str
) -> None:
    address = ("--address", temporal_target)
    worker = await spawn("worker", *TOOLS, "--task-queue", task_queue, *address)
    try:
        assert worker.stdout is not None
        banner = (await asyncio.wait_for(worker.stdout.readline(), 60)).decode()
        assert banner.startswith("worker: 11 tools (look_up_monster, ")
        assert f"on task queue '{task_queue}' at {temporal_target}" in banner
        code, out, err = await cli(
            "run",
            PARTY,
            *TOOLS,
            "--no-worker",
            "--task-queue",
            task_queue,
            "--workflow-id",
            workflow_id,
            *address,
        )
        assert code == 0, err
        assert json.loads(out)["returned"]["tally"]["total_damage"] == 23
        assert "no worker polls" not in err
        worker.send_signal(signal.SIGTERM)
        code, _, err = await finish(worker, 60)
    finally:
        if worker.returncode is None:
            worker.kill()
    assert code == 0, err
    assert "worker: stopping" in err


async def test_worker_needs_a_tools_module_that_loads() -> None:
    code, _, err = await cli("worker", "--tools", "examples.no_such_module")
    assert code == 2
    assert one_error(err) == (
        "durable-plan: error: cannot import tools module 'examples.no_such_module': no module "
        "named 'examples.no_such_module' (run from the directory that holds it, or pass a path "
        "to a .py file)"
    )
