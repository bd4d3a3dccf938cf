"""`client.py` started after its worker stopped says so, instead of waiting without a word.

The server remembers a worker's polls for minutes after it stopped, so the check before
starting the conversation ("does anything poll the task queue?") passes. The conversation's
history is the sure sign: its first workflow task is never started. After a few seconds
`client.py` says so in one line (the task queue, and the command that starts the worker),
and keeps waiting: a worker started then runs the conversation to its answer.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import worker as worker_script
from durable_plan.temporal.client.pollers import task_queue_has_pollers

ROOT = Path(__file__).resolve().parents[3]


async def test_client_says_no_worker_took_the_conversation_then_waits(
    temporal_target: str, task_queue: str
) -> None:
    client = await worker_script.connect(temporal_target)
    async with worker_script.build_worker(client, task_queue):
        assert await task_queue_has_pollers(client, task_queue, grace_s=30)
    # The worker is gone; the server still lists it (the case the poll check cannot catch).
    assert await task_queue_has_pollers(client, task_queue, grace_s=0)

    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "client.py",
        "--address",
        temporal_target,
        "--task-queue",
        task_queue,
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert proc.stderr is not None and proc.stdout is not None
        notice = (await asyncio.wait_for(proc.stderr.readline(), 60)).decode().strip()
        assert notice.startswith("client.py: no worker has picked up conversation game-master-")
        assert f"on task queue '{task_queue}' at {temporal_target}" in notice
        assert (
            f"start `python worker.py --address {temporal_target} --task-queue {task_queue}` in "
            "another terminal: the conversation waits until one does" in notice
        )
        async with worker_script.build_worker(client, task_queue):
            out = (await asyncio.wait_for(proc.stdout.read(), 60)).decode()
            assert await asyncio.wait_for(proc.wait(), 60) == 0
        rest = (await proc.stderr.read()).decode()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert "model round trips: 1 (a plain loop needs 4)" in out
    assert rest == "", "one line, said once"
