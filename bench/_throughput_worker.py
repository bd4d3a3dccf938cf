"""The worker process of bench/throughput.py: plans and the bare baseline, nothing else.

A process of its own so its CPU time and peak RSS are the worker's alone (the client
and the dev server run elsewhere). Prints READY once polling, stops on SIGTERM, then
prints ``GC {...}``: its garbage collections by generation and the CPU they took. Set up
as ``worker.py`` sets up its worker (start-up objects frozen out of later collections,
young objects collected every 10,000: ``server/long_lived.py``) unless the options say
``"gc_freeze": false``.

    python -m bench._throughput_worker ADDRESS TASK_QUEUE [OPTIONS_JSON]
"""

from __future__ import annotations

import asyncio
import gc
import json
import signal
import sys
import time
from datetime import timedelta
from typing import Any

from temporalio.client import Client

from bench._baseline import BareDag, bare_noop, bare_sum
from durable_plan.server.connection import run_script
from durable_plan.server.long_lived import freeze_startup_objects
from durable_plan.temporal.worker.helpers import plan_worker
from durable_plan.tools.registry import ToolRegistry


async def step(n: int) -> dict[str, Any]:
    """An instant step. Returns {"n": n + 1}."""
    return {"n": n + 1}


async def join(values: list[int]) -> dict[str, Any]:
    """An instant join. Returns {"n": sum(values)}."""
    return {"n": sum(values)}


REGISTRY = ToolRegistry()
for _tool in (step, join):
    REGISTRY.add(_tool, allow_local=True)


def _options(raw: str) -> dict[str, Any]:
    """Worker options from JSON; numbers ending in ``_s`` become timedeltas."""
    options: dict[str, Any] = {}
    for key, value in json.loads(raw).items():
        if key.endswith("_s"):
            options[key[:-2]] = timedelta(seconds=value)
        else:
            options[key] = value
    return options


class GcClock:
    """Collections by generation and the thread CPU seconds they took (``gc.callbacks``)."""

    def __init__(self) -> None:
        self.collections = [0, 0, 0]
        self.seconds = [0.0, 0.0, 0.0]
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.thread_time()
            return
        generation = info["generation"]
        self.collections[generation] += 1
        self.seconds[generation] += time.thread_time() - self._started

    def report(self) -> str:
        return "GC " + json.dumps({"collections": self.collections, "seconds": self.seconds})


async def main(address: str, task_queue: str, options: dict[str, Any]) -> int:
    freeze = options.pop("gc_freeze", True)
    client = await Client.connect(address)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    worker = plan_worker(
        client,
        task_queue=task_queue,
        registry=REGISTRY,
        workflows=[BareDag],
        activities=[bare_noop, bare_sum],
        graceful_shutdown_timeout=timedelta(seconds=1),
        **options,
    )
    if freeze:
        freeze_startup_objects()
    clock = GcClock()
    gc.callbacks.append(clock)
    async with worker:
        print("READY", flush=True)
        await stop.wait()
    gc.callbacks.remove(clock)
    print(clock.report(), flush=True)
    return 0


if __name__ == "__main__":
    raw_options = sys.argv[3] if len(sys.argv) > 3 else "{}"
    run_script(main(sys.argv[1], sys.argv[2], _options(raw_options)))
