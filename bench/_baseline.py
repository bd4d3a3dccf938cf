"""Bare Temporal baseline for bench/durable.py: D sequential no-op activities, nothing else.

Lives in its own importable module because ``python -m bench.durable`` runs that file as
``__main__``, and a workflow class must be importable by the worker under a stable name.
Unsandboxed like ``PlanWorkflow`` so the comparison isolates durable-plan's own work.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import timedelta

from temporalio import activity, workflow
from temporalio.common import RetryPolicy

BARE_WORKFLOW_NAME = "BareChain"

# The same timeout and retry shape PlanWorkflow gives a step (bench passes 0.1 s initial).
_TIMEOUT = timedelta(seconds=60)
_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=0.1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=30),
    maximum_attempts=3,
)


@dataclass
class BareInput:
    depth: int
    local: bool


@activity.defn(name="bare_noop")
async def bare_noop(n: int) -> int:
    """A no-op step: returns n + 1."""
    return n + 1


@workflow.defn(name=BARE_WORKFLOW_NAME, sandboxed=False)
class BareChain:
    """``depth`` sequential no-op activities, each fed the previous result."""

    @workflow.run
    async def run(self, request: BareInput) -> int:
        n = 0
        for _ in range(request.depth):
            if request.local:
                n = await workflow.execute_local_activity(
                    bare_noop, n, start_to_close_timeout=_TIMEOUT, retry_policy=_RETRY
                )
            else:
                n = await workflow.execute_activity(
                    bare_noop, n, start_to_close_timeout=_TIMEOUT, retry_policy=_RETRY
                )
        return n


@activity.defn(name="bare_sum")
async def bare_sum(values: list[int]) -> int:
    """A no-op join: returns the sum."""
    return sum(values)


@dataclass
class BareDagInput:
    local: bool


BARE_DAG_WORKFLOW_NAME = "BareDag"


@workflow.defn(name=BARE_DAG_WORKFLOW_NAME, sandboxed=False)
class BareDag:
    """bench/throughput.py's 8-step plan in plain Temporal: s0 -> a0..a2 -> b0(a0, a1),
    b1(a1, a2) -> j(b0, b1) -> t, no-op activities, each started as soon as its inputs are
    done (no barrier between levels, as PlanWorkflow schedules)."""

    @workflow.run
    async def run(self, request: BareDagInput) -> int:
        run = workflow.execute_local_activity if request.local else workflow.execute_activity

        async def noop(n: int) -> int:
            return int(
                await run(bare_noop, n, start_to_close_timeout=_TIMEOUT, retry_policy=_RETRY)
            )

        async def add(values: list[int]) -> int:
            return int(
                await run(bare_sum, values, start_to_close_timeout=_TIMEOUT, retry_policy=_RETRY)
            )

        async def after(*inputs: asyncio.Task[int]) -> int:
            return await add([await t for t in inputs])

        # Barrier-free like a plan: b0 starts once a0 and a1 are done, whatever a2 does.
        s0 = await noop(0)
        a0, a1, a2 = (asyncio.create_task(noop(s0)) for _ in range(3))
        b0, b1 = asyncio.create_task(after(a0, a1)), asyncio.create_task(after(a1, a2))
        return await noop(await after(b0, b1))
