"""The workflow side of a plan step, without the server: recorded histories replayed in-process.

    python -m bench.replay_cost                 # 50 histories per arm, 9 interleaved repeats
    python -m bench.replay_cost --plans 100 --repeats 15
    python -m bench.replay_cost --profile       # also the functions by extra calls per step

``bench.throughput`` measures a worker under load: its CPU figures move by 0.4 ms per step
between runs on a shared machine, because the server, the client and the worker share it.
This bench records ``bench.throughput``'s four arms once (8-step plans and the bare DAG,
regular and local activities) and replays them with ``Replayer``: the same workflow code,
the same activations, no activity and no server in the timed loop. The arms are
interleaved per repeat and the difference plan - bare is taken per repeat, so a slower
moment of the machine moves both sides alike. ``--profile`` counts Python calls per step
(``cProfile`` on the replayer's workflow thread): call counts are exact where times are not.
Prints only.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import cProfile
import os
import pstats
import statistics
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Sequence

from temporalio.client import Client, WorkflowHistory
from temporalio.worker import Replayer

from bench._baseline import BareDag, BareDagInput, bare_noop, bare_sum
from bench._report import command_line, machine_line, markdown_table
from bench._throughput_worker import REGISTRY
from bench.throughput import EXPECTED_T, STEPS, plan
from durable_plan import plan_worker, start_plan
from durable_plan.server.devserver import DevServer
from durable_plan.temporal.workflows.agent_workflow import AgentStepWorkflow
from durable_plan.temporal.workflows.plan_workflow import PlanWorkflow

ARMS = ("plan", "bare", "plan-l", "bare-l")


async def record(client: Client, count: int) -> dict[str, list[WorkflowHistory]]:
    """``count`` finished histories of each arm, from one worker in this process."""
    histories: dict[str, list[WorkflowHistory]] = {}
    async with plan_worker(
        client,
        task_queue="replay-cost",
        registry=REGISTRY,
        workflows=[BareDag],
        activities=[bare_noop, bare_sum],
    ):
        for arm in ARMS:
            local = arm.endswith("-l")
            if arm.startswith("plan"):
                handles = await asyncio.gather(
                    *(
                        start_plan(client, plan(local), task_queue="replay-cost", registry=REGISTRY)
                        for _ in range(count)
                    )
                )
                outcomes = await asyncio.gather(*(h.result() for h in handles))
                assert all(o.returned.get("t") == {"n": EXPECTED_T} for o in outcomes)
                ids = [h.id for h in handles]
            else:
                ids = [f"bare-{uuid.uuid4()}" for _ in range(count)]
                results = await asyncio.gather(
                    *(
                        client.execute_workflow(
                            BareDag.run, BareDagInput(local), id=i, task_queue="replay-cost"
                        )
                        for i in ids
                    )
                )
                assert all(r == EXPECTED_T for r in results)
            histories[arm] = [await client.get_workflow_handle(i).fetch_history() for i in ids]
    return histories


async def _each(histories: Sequence[WorkflowHistory]) -> AsyncIterator[WorkflowHistory]:
    for history in histories:
        yield history


async def replay_all(replayer: Replayer, histories: Sequence[WorkflowHistory]) -> None:
    async with replayer.workflow_replay_iterator(_each(histories)) as results:
        async for result in results:
            if result.replay_failure is not None:
                raise result.replay_failure


async def timed(
    histories: dict[str, list[WorkflowHistory]], repeats: int
) -> dict[str, list[float]]:
    """CPU ms per step of each arm's replay, per repeat (arms interleaved)."""
    replayer = Replayer(workflows=[PlanWorkflow, AgentStepWorkflow, BareDag])
    for arm in ARMS:  # warm-up: imports, caches
        await replay_all(replayer, histories[arm][:5])
    ms: dict[str, list[float]] = {arm: [] for arm in ARMS}
    for _ in range(repeats):
        for arm in ARMS:
            started = time.process_time()
            await replay_all(replayer, histories[arm])
            elapsed = time.process_time() - started
            ms[arm].append(elapsed * 1000 / (len(histories[arm]) * STEPS))
    return ms


async def calls_per_step(histories: list[WorkflowHistory]) -> tuple[float, Counter[str]]:
    """Python calls per step of a replay, in total and by function (the workflow thread)."""
    executor = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    replayer = Replayer(
        workflows=[PlanWorkflow, AgentStepWorkflow, BareDag], workflow_task_executor=executor
    )
    await replay_all(replayer, histories[:5])
    profile = cProfile.Profile()
    executor.submit(profile.enable).result()
    await replay_all(replayer, histories)
    executor.submit(profile.disable).result()
    steps = len(histories) * STEPS
    by_function: Counter[str] = Counter()
    stats = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    for (path, line, name), (_, calls, *_rest) in stats.items():
        where = path.split("site-packages/")[-1].split("src/")[-1]
        by_function[f"{name} ({where}:{line})"] += calls
    total = sum(by_function.values())
    return total / steps, Counter({k: v / steps for k, v in by_function.items()})


async def main(args: argparse.Namespace) -> None:
    load_before = os.getloadavg()[0]
    with DevServer(headless=True) as server:
        client = await server.connect()
        histories = await record(client, args.plans)
    ms = await timed(histories, args.repeats)
    print("## Replay cost of a plan step (workflow side only)\n")
    print(f"`{command_line('bench.replay_cost')}`\n")
    extra = f"{args.plans} histories per arm, {args.repeats} repeats"
    print(machine_line(load_before, extra=extra) + "\n")
    rows: list[list[object]] = [[arm, statistics.median(ms[arm]), min(ms[arm])] for arm in ARMS]
    print(markdown_table(["arm", "median ms/step", "best ms/step"], rows, digits=3))
    for plan_arm, bare_arm in (("plan", "bare"), ("plan-l", "bare-l")):
        extra = [p - b for p, b in zip(ms[plan_arm], ms[bare_arm], strict=True)]
        ratio = statistics.median(ms[plan_arm]) / statistics.median(ms[bare_arm])
        print(
            f"  {plan_arm} - {bare_arm}: {statistics.median(extra):+.3f} ms per step "
            f"(median of per-repeat differences; {ratio:.2f}x)"
        )
    if args.profile:
        plan_calls, plan_by = await calls_per_step(histories["plan"])
        bare_calls, bare_by = await calls_per_step(histories["bare"])
        print(f"\nPython calls per step: plan {plan_calls:.0f}, bare {bare_calls:.0f}\n")
        extra_by = Counter({k: v - bare_by.get(k, 0.0) for k, v in plan_by.items()})
        print(
            markdown_table(
                ["function", "extra calls per step"],
                [[name.replace("|", "\\|"), n] for name, n in extra_by.most_common(args.top)],
            )
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plans", type=int, default=50, help="histories per arm")
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--top", type=int, default=20)
    asyncio.run(main(parser.parse_args()))
