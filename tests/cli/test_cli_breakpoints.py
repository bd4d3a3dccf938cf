"""`durable-plan show|continue|skip|abort` and `run --break`: breakpoints from a shell.

The commands run as subprocesses against the session's dev server; the plan runs on a
worker in this process (``tests/support/breakpoint_cases.py``'s tools)."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

from temporalio.client import Client

from durable_plan import plan_worker, start_plan
from tests.support.breakpoint_cases import CALLS, MAP, registry

ROOT = Path(__file__).resolve().parents[2]
REGISTRY = registry()


async def cli(*args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "durable_plan",
        *args,
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    return proc.returncode if proc.returncode is not None else -1, out.decode(), err.decode()


async def test_show_continue_and_skip_paused_items(
    client: Client, temporal_target: str, task_queue: str
) -> None:
    CALLS.clear()
    address = ("--address", temporal_target)
    async with plan_worker(client, task_queue=task_queue, registry=REGISTRY):
        handle = await start_plan(
            client, MAP, task_queue=task_queue, registry=REGISTRY, breakpoints=["m"]
        )
        deadline = time.monotonic() + 30
        shown = ""
        while time.monotonic() < deadline:
            code, shown, _ = await cli("show", handle.id, *address)
            if shown.count("paused at m/do.") == 3:
                break
            await asyncio.sleep(0.2)
        assert "paused at m/do.0 (tool charge)" in shown, shown
        assert f"answer: durable-plan continue {handle.id} m/do.1" in shown
        # Three calls paused: without a path the command names them and answers none.
        code, _, err = await cli("continue", handle.id, *address)
        assert code == 1 and "paused: m/do.0, m/do.1, m/do.2" in err, err
        code, out, err = await cli("skip", handle.id, "m/do.1", *address)
        assert (code, out.strip()) == (0, "m/do.1: skip"), err
        code, _, err = await cli("continue", handle.id, "m/do.1", *address)
        assert code == 1 and "no call is paused at 'm/do.1'" in err, err
        for path in ("m/do.0", "m/do.2"):
            code, out, err = await cli("continue", handle.id, path, *address)
            assert code == 0, err
        result = await asyncio.wait_for(handle.result(), 30)
    assert result.returned["m"]["not_taken"] == 1
    assert sorted(CALLS) == ["charge 1", "charge 3"]


async def test_run_refuses_a_breakpoint_that_can_never_pause() -> None:
    code, _, err = await cli(
        "run",
        "examples/plans/triage.yaml",
        "--tools",
        "examples.plan_tools",
        "--input",
        "ticket_id=7",
        "--break",
        "Ticket",
        "--embedded",
    )
    assert code == 2, err
    assert "--break: breakpoint 'Ticket': 'Ticket' can match no segment" in err
