"""What a saved-plan step (``plan__<name>``) costs over a plain step, in one quick run.

    python -m bench.saved_plans [--repeats N]

Starts its own dev server and an in-process worker, then runs, interleaved (shuffled in
each repeat, so a noisy machine hits every mode alike), four one-call plans of an instant
tool: a plain step, and the same call as the only step of a saved plan, each in-process
and durably. Durably the saved plan is a child ``PlanWorkflow`` (its own start, workflow
tasks and result), so the difference is the price of nesting: a child workflow round trip,
the child's own check and its input (the saved plan and its tool table). Medians and p90
in ms; prints only, never asserts.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import time
import uuid
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from bench._report import command_line, machine_line, markdown_table, server_version
from durable_plan.local.runner import execute_plan
from durable_plan.server.connection import exit_now
from durable_plan.server.devserver import DevServer
from durable_plan.temporal.client.start import start_plan
from durable_plan.temporal.worker.helpers import plan_worker
from durable_plan.tools.registry import ToolRegistry


async def tick(n: int) -> dict[str, Any]:
    """Instant: n + 1.

    Args:
        n: a number
    """
    return {"n": n + 1}


def registry() -> ToolRegistry:
    reg = ToolRegistry([tick])
    reg.add_plan(
        {
            "inputs": {"type": "object", "properties": {"n": {"type": "integer"}}},
            "steps": [{"id": "t", "tool": "tick", "bind": {"n": "inputs.n"}}],
            "returns": ["t"],
        },
        name="one_tick",
    )
    return reg


REGISTRY = registry()
PLANS = {
    "plain step": {"steps": [{"id": "a", "tool": "tick", "args": {"n": 1}}]},
    "saved-plan step": {"steps": [{"id": "a", "tool": "plan__one_tick", "args": {"n": 1}}]},
}
MODES = ("in-process", "durable")


async def once(client: Any, task_queue: str, plan: dict[str, Any], mode: str) -> float:
    started = time.perf_counter()
    if mode == "in-process":
        result = await execute_plan(plan, REGISTRY)
    else:
        handle = await start_plan(client, plan, task_queue=task_queue, registry=REGISTRY)
        result = await handle.result()
    if not result.ok:
        raise RuntimeError(f"the bench plan failed: {result.ledger}")
    return (time.perf_counter() - started) * 1000.0


def p90(xs: Sequence[float]) -> float:
    return sorted(xs)[max(int(len(xs) * 0.9) - 1, 0)]


async def main_async(repeats: int) -> None:
    load_start = os.getloadavg()[0]
    runs: dict[tuple[str, str], list[float]] = defaultdict(list)
    with DevServer(headless=True) as server:
        version = server_version(server.binary)
        client = await server.connect()
        task_queue = f"bench-saved-{uuid.uuid4().hex[:8]}"
        async with plan_worker(client, task_queue=task_queue, registry=REGISTRY):
            configs = [(name, mode) for name in PLANS for mode in MODES]
            for _ in range(3):  # warm-up: imports, connections, caches
                for name, mode in configs:
                    await once(client, task_queue, PLANS[name], mode)
            rng = random.Random(1)
            for _ in range(repeats):
                rng.shuffle(configs)
                for name, mode in configs:
                    runs[name, mode].append(await once(client, task_queue, PLANS[name], mode))
    print(command_line("bench.saved_plans"))
    print(machine_line(load_start, version, extra=f"{repeats} runs per configuration") + "\n")
    rows = []
    for mode in MODES:
        plain = statistics.median(runs["plain step", mode])
        saved = statistics.median(runs["saved-plan step", mode])
        rows.append(
            [
                mode,
                f"{plain:.1f}",
                f"{saved:.1f}",
                f"{saved - plain:+.1f}",
                f"{p90(runs['plain step', mode]):.1f} / {p90(runs['saved-plan step', mode]):.1f}",
            ]
        )
    print(
        markdown_table(
            [
                "mode",
                "plain step (ms, median)",
                "saved-plan step",
                "difference",
                "p90 plain / saved",
            ],
            rows,
        )
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.saved_plans", description=__doc__)
    parser.add_argument("--repeats", type=int, default=20, help="runs per configuration")
    asyncio.run(main_async(parser.parse_args(argv).repeats))


if __name__ == "__main__":
    exit_now(main())  # no interpreter finalization: temporalio/sdk-python#300
