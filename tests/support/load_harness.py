"""Many mixed plans at once on one worker: all complete, none stuck.

Shared by ``tests/durable/faults/test_load.py`` (a CI-sized run) and ``bench/load.py`` (200 plans).
The mix: chains of 8 instant steps, maps of 8 items, agent steps (the scripted
model), and steps that pause for a person's approval (approved as soon as they
wait). The worker runs in this process, so its peak RSS is this process's.
"""

from __future__ import annotations

import asyncio
import resource
import time
from dataclasses import dataclass
from typing import Any

from temporalio.client import Client
from temporalio.strands_agents import StrandsPlugin

from durable_plan import PlanHandle, plan_worker, start_plan
from durable_plan.server.devserver import DevServer
from durable_plan.testing import ScriptedModel, call
from durable_plan.testing.scripted_model import output
from durable_plan.tools.registry import ToolRegistry


async def step(n: int) -> dict[str, Any]:
    """An instant step. Returns {"n": n + 1}."""
    return {"n": n + 1}


async def guarded(n: int) -> dict[str, Any]:
    """A step a person must approve. Returns {"n": n}."""
    return {"n": n}


def registry() -> ToolRegistry:
    tools = ToolRegistry([step])
    tools.add(guarded, requires_approval=True)
    return tools


SCRIPTS = {"Count on": [call("step", n=1), output({"n": 2})]}


def load_plan(n: int) -> tuple[dict[str, Any], str]:
    kind = ("chain", "map", "agent", "approval")[n % 4]
    if kind == "chain":
        steps: list[dict[str, Any]] = [{"id": "s0", "tool": "step", "args": {"n": 0}}]
        steps += [
            {"id": f"s{i}", "tool": "step", "bind": {"n": f"steps.s{i - 1}.n"}} for i in range(1, 8)
        ]
        return {"steps": steps, "returns": ["s7"]}, kind
    if kind == "map":
        return {
            "steps": [
                {
                    "id": "m",
                    "tool": "map",
                    "args": {"over": list(range(8)), "do": {"tool": "step", "bind": {"n": "item"}}},
                }
            ]
        }, kind
    if kind == "agent":
        schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
        return {
            "steps": [
                {
                    "id": "a",
                    "tool": "agent",
                    "args": {"prompt": "Count on", "output_schema": schema},
                }
            ]
        }, kind
    return {"steps": [{"id": "g", "tool": "guarded", "args": {"n": n}}]}, kind


@dataclass
class LoadReport:
    plans: int
    completed_ok: int
    stuck: int
    seconds: float
    peak_rss_mib: float

    def lines(self) -> list[str]:
        return [
            f"plans started        {self.plans}",
            f"completed ok         {self.completed_ok}",
            f"stuck or failed      {self.stuck}",
            f"wall clock           {self.seconds:.1f} s",
            f"peak RSS (worker)    {self.peak_rss_mib:.0f} MiB",
        ]


async def _approve_when_waiting(handle: PlanHandle) -> None:
    for _ in range(2000):
        for line in await handle.progress():
            if line["phase"] == "awaiting_approval":
                await handle.decide(line["id"], True, args_digest=line["args_digest"])
                return
        await asyncio.sleep(0.05)


async def run_load(server: DevServer, plans: int, task_queue: str) -> LoadReport:
    client = await Client.connect(
        server.target,
        plugins=[StrandsPlugin(models={"scripted": lambda: ScriptedModel(scripts=SCRIPTS)})],
    )
    tools = registry()
    started = time.monotonic()
    async with plan_worker(client, task_queue=task_queue, registry=tools):
        handles = []
        for n in range(plans):
            plan, kind = load_plan(n)
            handle = await start_plan(
                client, plan, task_queue=task_queue, registry=tools, model="scripted"
            )
            handles.append((handle, kind))
        approvals = [
            asyncio.create_task(_approve_when_waiting(h)) for h, k in handles if k == "approval"
        ]
        results = await asyncio.gather(
            *(asyncio.wait_for(h.result(), 300) for h, _ in handles), return_exceptions=True
        )
        await asyncio.gather(*approvals, return_exceptions=True)
    ok = sum(1 for r in results if not isinstance(r, BaseException) and r.ok)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return LoadReport(plans, ok, plans - ok, time.monotonic() - started, peak)
