"""`durable-plan show`, `approve` and `worker` on a real plan on the dev server.

The triage plan's refund needs a person's approval: `run` starts it and waits, `show`
finds it awaiting approval with the arguments, `approve` answers, and `run` ends with
the result; a rejection fails the step (exit 1). A `worker` subprocess serves plans
another `run --no-worker` starts. Bad ids, ended plans and absent servers each have
their exit code and one line.

The commands run in this process (``tests.support.helpers.arun_cli``: the same exit status and
streams) except where a test says "subprocess": ``show`` and ``approve`` on bad ids, and
``worker`` (it installs signal handlers, and is stopped with SIGTERM).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
from collections.abc import AsyncIterator
from pathlib import Path

from temporalio.client import Client

from durable_plan.server.devserver import free_port
from tests.support.helpers import (
    acli_subprocess,
    arun_cli,
    finish,
    phase_is,
    spawn_cli,
    until_progress,
)

ROOT = Path(__file__).resolve().parents[2]
TRIAGE = str(ROOT / "examples" / "plans" / "triage.yaml")
PARTY = str(ROOT / "examples" / "plans" / "party_round.yaml")
TOOLS = ("--tools", "examples.plan_tools")


async def cli(*args: str) -> tuple[int, str, str]:
    done = await arun_cli(*args)
    return done.returncode, done.stdout, done.stderr


@contextlib.asynccontextmanager
async def running(
    client: Client, workflow_id: str, *args: str
) -> AsyncIterator[asyncio.Task[tuple[int, str, str]]]:
    """``cli(*args)`` in the background (a `run` of plan ``workflow_id``); if the test leaves
    before it ends, the plan is terminated so that the command ends too."""
    task = asyncio.ensure_future(cli(*args))
    try:
        yield task
    finally:
        if not task.done():
            with contextlib.suppress(Exception):
                await client.get_workflow_handle(workflow_id).terminate("the test ended")
            with contextlib.suppress(Exception):
                await asyncio.wait_for(task, 60)


async def until_awaiting(client: Client, workflow_id: str, address: str) -> str:
    """Until the refund step awaits approval (polling the plan's ledger); then what `show`
    prints for it."""
    await until_progress(
        client.get_workflow_handle(workflow_id),
        phase_is("refund", "awaiting_approval"),
        what="refund awaiting approval",
        timeout_s=60,
    )
    code, out, err = await cli("show", workflow_id, "--address", address)
    assert code == 0 and "awaiting approval" in out, (out, err)
    return out


def one_error(stderr: str) -> str:
    [line] = stderr.strip().splitlines()
    return line


async def test_show_and_approve_a_running_plan(
    client: Client, temporal_target: str, workflow_id: str
) -> None:
    address = ("--address", temporal_target)
    async with running(
        client,
        workflow_id,
        *("run", TRIAGE, *TOOLS, "-i", "ticket_id=7", "--workflow-id", workflow_id, *address),
    ) as run:
        shown = await until_awaiting(client, workflow_id, temporal_target)
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
        code, out, err = await asyncio.wait_for(run, 120)
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
    client: Client, temporal_target: str, workflow_id: str
) -> None:
    address = ("--address", temporal_target)
    async with running(
        client,
        workflow_id,
        *("run", TRIAGE, *TOOLS, "-i", "ticket_id=7", "--workflow-id", workflow_id, *address),
    ) as run:
        await until_awaiting(client, workflow_id, temporal_target)
        watch = asyncio.ensure_future(cli("show", workflow_id, "--watch", *address))
        code, out, err = await cli(
            "approve", workflow_id, "refund", "--reject", "--reason", "not twice", *address
        )
        assert (code, out.strip()) == (0, "refund: rejected"), err
        code, out, err = await asyncio.wait_for(run, 120)
        watched = await asyncio.wait_for(watch, 120)
    assert code == 1, err
    refund = next(line for line in json.loads(out)["ledger"] if line["id"] == "refund")
    assert refund["status"] == "failed" and "not twice" in refund["error"]
    assert "step 'refund' failed:" in err
    # `show --watch` waited for the end and exits as the plan ended: failed.
    assert watched[0] == 1, watched
    assert f"plan {workflow_id}: completed" in watched[1] and "1 failed" in watched[1], watched


async def test_show_and_approve_bad_ids_and_no_server(temporal_target: str) -> None:
    # As subprocesses: the one run of `show` and of `approve` each as a user starts them.
    code, _, err = await acli_subprocess("show", "no-such-plan", "--address", temporal_target)
    assert code == 2
    line = one_error(err)
    assert line.startswith(f"durable-plan: error: no workflow 'no-such-plan' on {temporal_target}")
    code, _, err = await acli_subprocess(
        "approve", "no-such-plan", "refund", "--address", temporal_target
    )
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
    worker = await spawn_cli("worker", *TOOLS, "--task-queue", task_queue, *address)  # subprocess
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
