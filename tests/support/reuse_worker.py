"""A worker for the reuse tests' conversation workflow, run as a subprocess the test can SIGKILL.

    python tests/support/reuse_worker.py --target HOST:PORT --task-queue Q

Prints ``READY`` once it polls, then runs until killed, SIGTERM, or the end of
stdin (the test process is gone).
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
import threading
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from temporalio.client import Client  # noqa: E402
from temporalio.strands_agents import StrandsPlugin  # noqa: E402

from durable_plan import plan_worker  # noqa: E402
from durable_plan.testing import ScriptedModel  # noqa: E402
from tests.support.reuse_workflows import REUSE_TOOLS, SCRIPTS, ReuseConversationWorkflow  # noqa: E402


async def main(target: str, task_queue: str) -> None:
    models = {"scripted": lambda: ScriptedModel(scripts=SCRIPTS)}
    client = await Client.connect(target, plugins=[StrandsPlugin(models=models)])
    worker = plan_worker(
        client,
        task_queue=task_queue,
        registry=REUSE_TOOLS,
        workflows=[ReuseConversationWorkflow],
        # A SIGKILLed worker never says goodbye: its sticky queue falls back to the shared
        # one (which the replacement polls) after this long.
        sticky_queue_schedule_to_start_timeout=timedelta(seconds=1),
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)

    def watch_stdin() -> None:
        while sys.stdin.readline():
            pass
        loop.call_soon_threadsafe(stop.set)

    threading.Thread(target=watch_stdin, daemon=True).start()
    async with worker:
        print("READY", flush=True)
        await stop.wait()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--target", required=True)
    parser.add_argument("--task-queue", required=True)
    args = parser.parse_args()
    asyncio.run(main(args.target, args.task_queue))
