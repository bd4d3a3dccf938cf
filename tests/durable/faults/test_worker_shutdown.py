"""SIGTERM drains a worker: a running step finishes there, it is not retried elsewhere."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

from temporalio.client import Client

from activities.game_master import GAME_TOOLS
from durable_plan import plan_worker, start_plan
from tests.support.worker_processes import warm_python

ROOT = Path(__file__).resolve().parents[3]


async def test_sigterm_lets_the_running_step_finish(
    client: Client, temporal_target: str, task_queue: str
) -> None:
    env = {**os.environ, "GAME_MASTER_TOOL_DELAY": "1.5", "PYTHONUNBUFFERED": "1"}
    launcher = await warm_python()  # a forked `python worker.py` (tests/support/warm_python.py)
    proc = await launcher.spawn(
        ROOT / "worker.py",
        *("--target", temporal_target, "--task-queue", task_queue),
        env=env,
        cwd=ROOT,
        stderr="stdout",
    )
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), 30)
        assert b"worker polling" in line, line
        plan = {"steps": [{"id": "look", "tool": "look_up_monster", "args": {"name": "ogre"}}]}
        handle = await start_plan(client, plan, task_queue=task_queue, registry=GAME_TOOLS)
        deadline = time.monotonic() + 30
        while True:  # until the step runs on the subprocess worker
            raw = (await handle.handle.describe()).raw_description
            if any(a.HasField("last_started_time") for a in raw.pending_activities):
                break
            assert time.monotonic() < deadline, "the step never started on the worker"
            await asyncio.sleep(0.02)
        proc.send_signal(signal.SIGTERM)
        rest = await asyncio.wait_for(proc.stdout.read(), 30)
        assert await proc.wait() == 0
        assert b"worker stopped" in rest
        # The step completed before the worker left; a new worker finishes the workflow.
        async with plan_worker(client, task_queue=task_queue, registry=GAME_TOOLS):
            result = await asyncio.wait_for(handle.result(), 30)
        assert result.outcome("look").status == "ok"
        assert result.outcome("look").attempts == 1, "drained, not retried after a timeout"
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
