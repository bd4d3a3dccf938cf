"""A rate-limited tool under load: many plans at once, one tool held to N calls a second.

    python -m bench.routing                   # 50 plans, a tool limited to 5 calls/s
    python -m bench.routing --plans 100 --rate 10

Each plan is ``find -> call -> done``: ``find`` and ``done`` run on the plan's queue,
``call`` on the tool's own queue (``ToolRegistry.add(task_queue=..., max_per_second=...)``),
served by a ``tool_worker``. All plans start at once. The observed rate comes from the
activities' start times as the server recorded them (``activity.info().started_time``):
the overall rate from the first start to the last, and the most starts in any window of
1 s and of 5 s (a token bucket admits a short burst first).

Then fairness: conversation A's plan calls the tool 30 times; a second later conversation
B's plan calls it 3 times. Without task-queue fairness B's calls wait behind A's; with it
(``matching.enableFairness``, each call keyed by its conversation) B's are served in
turn. Both parts run on two dev servers, fairness off (as ``start-dev`` ships) and on.
Prints only.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from temporalio import activity
from temporalio.client import Client

from bench._report import command_line, machine_line, markdown_table, server_version
from durable_plan import plan_worker, start_plan, tool_worker
from durable_plan.server.devserver import TUNED_DYNAMIC_CONFIG, DevServer
from durable_plan.tools.registry import ToolRegistry

STARTS: list[tuple[datetime, str]] = []
"""(the server's start time of each limited call, the plan that made it)."""


def find(n: int) -> dict[str, int]:
    """Returns {"n": int}."""
    return {"n": n}


def call(n: int) -> dict[str, int]:
    """The rate-limited API. Returns {"n": int}."""
    info = activity.info()
    STARTS.append((info.started_time, info.workflow_id or ""))
    return {"n": n + 1}


def done(n: int) -> dict[str, int]:
    """Returns {"n": int}."""
    return {"n": n}


def registry(tool_queue: str, rate: float) -> ToolRegistry:
    tools = ToolRegistry([find, done])
    tools.add(call, task_queue=tool_queue, max_per_second=rate)
    return tools


CHAIN = {
    "steps": [
        {"id": "find", "tool": "find", "args": {"n": 1}},
        {"id": "call", "tool": "call", "bind": {"n": "steps.find.n"}},
        {"id": "done", "tool": "done", "bind": {"n": "steps.call.n"}},
    ],
    "returns": ["done"],
}


def fan(calls: int) -> dict[str, Any]:
    return {"steps": [{"id": f"c{i}", "tool": "call", "args": {"n": i}} for i in range(calls)]}


@dataclass
class RateRow:
    plans: int
    ok: int
    calls: int
    span_s: float
    rate: float
    max_1s: int
    max_5s: int
    burst: float
    wall_s: float


def fitted_burst(times: Sequence[float], rate: float) -> float:
    """The least burst ``b`` for which a token bucket of ``rate`` explains the starts: in every
    window from one start to a later one, starts <= b + rate x its length."""
    return max(
        (j - i + 1) - rate * (times[j] - times[i])
        for i in range(len(times))
        for j in range(i, len(times))
    )


def most_in_window(times: Sequence[float], window_s: float) -> int:
    """The most starts within any half-open window of ``window_s`` seconds."""
    best, left = 0, 0
    for right, t in enumerate(times):
        while t - times[left] >= window_s:
            left += 1
        best = max(best, right - left + 1)
    return best


async def many_plans(
    client: Client, plan_queue: str, tools: ToolRegistry, n: int, rate: float
) -> RateRow:
    STARTS.clear()
    started = time.perf_counter()
    handles = await asyncio.gather(
        *(start_plan(client, CHAIN, task_queue=plan_queue, registry=tools) for _ in range(n))
    )
    results = await asyncio.gather(*(h.result() for h in handles))
    wall = time.perf_counter() - started
    ok = sum(1 for r in results if r.ok and r.returned.get("done") == {"n": 2})
    times = sorted(t.timestamp() for t, _ in STARTS)
    span = times[-1] - times[0] if len(times) > 1 else 0.0
    return RateRow(
        plans=n,
        ok=ok,
        calls=len(times),
        span_s=span,
        rate=(len(times) - 1) / span if span else float("nan"),
        max_1s=most_in_window(times, 1.0),
        max_5s=most_in_window(times, 5.0),
        burst=fitted_burst(times, rate),
        wall_s=wall,
    )


async def two_conversations(
    client: Client, plan_queue: str, tools: ToolRegistry
) -> tuple[float, float, float]:
    """B's wait from its start to its first and its last call, and A's whole span."""
    STARTS.clear()
    a = await start_plan(
        client, fan(30), task_queue=plan_queue, registry=tools, fairness_key="conversation-a"
    )
    await asyncio.sleep(1.0)
    b_started = time.time()
    b = await start_plan(
        client, fan(3), task_queue=plan_queue, registry=tools, fairness_key="conversation-b"
    )
    results = await asyncio.gather(a.result(), b.result())
    assert all(r.ok for r in results), results
    b_times = sorted(t.timestamp() for t, wf in STARTS if wf == b.id)
    a_times = sorted(t.timestamp() for t, wf in STARTS if wf == a.id)
    return b_times[0] - b_started, b_times[-1] - b_started, a_times[-1] - a_times[0]


async def on_server(fair: bool, args: argparse.Namespace) -> tuple[RateRow, tuple[float, ...], str]:
    config: dict[str, Any] = dict(TUNED_DYNAMIC_CONFIG)
    if fair:
        config["matching.enableFairness"] = True
    with DevServer(headless=True, dynamic_config=config) as server:
        client = await server.connect()
        plan_queue = f"bench-plans-{uuid.uuid4().hex[:6]}"
        tool_queue = f"bench-api-{uuid.uuid4().hex[:6]}"
        tools = registry(tool_queue, args.rate)
        async with (
            plan_worker(client, task_queue=plan_queue, registry=tools),
            tool_worker(client, task_queue=tool_queue, registry=tools),
        ):
            await many_plans(client, plan_queue, tools, 3, args.rate)  # warm-up
            await asyncio.sleep(2.0)  # the bucket refills: every run starts alike
            row = await many_plans(client, plan_queue, tools, args.plans, args.rate)
            await asyncio.sleep(2.0)
            waits = await two_conversations(client, plan_queue, tools)
        return row, waits, server_version(server.binary)


async def run(args: argparse.Namespace) -> None:
    load = os.getloadavg()[0]
    outcomes = {fair: await on_server(fair, args) for fair in (False, True)}
    version = outcomes[False][2]
    print(f"# {command_line('bench.routing')}")
    print(f"# {machine_line(load, version)}")
    print(f"\n{args.plans} plans at once, `call` limited to {args.rate:g} calls/s:\n")
    header = [
        "fairness",
        "plans ok",
        "calls",
        "span s",
        "calls/s",
        "max in 1 s",
        "max in 5 s",
        "burst",
        "wall s",
    ]
    rows: list[list[object]] = []
    for fair, (row, _, _) in outcomes.items():
        rows.append(
            [
                "on" if fair else "off",
                f"{row.ok}/{row.plans}",
                row.calls,
                row.span_s,
                row.rate,
                row.max_1s,
                row.max_5s,
                row.burst,
                row.wall_s,
            ]
        )
    print(markdown_table(header, rows, digits=2))
    limit = args.rate
    passed = all(
        row.ok == row.plans and row.rate <= limit and row.burst <= 2 * limit
        for row, _, _ in outcomes.values()
    )
    print(
        f"\ntarget: every plan ok; calls/s from the first start to the last at most {limit:g}; "
        f"a token bucket of {limit:g}/s explains every window with a burst of at most "
        f"{2 * limit:g} (the server's bucket starts full): " + ("PASS" if passed else "MISS")
    )
    print("\nconversation A: 30 calls; B: 3 calls, started 1 s later (seconds after B starts):\n")
    rows = [
        ["on" if fair else "off", waits[0], waits[1], waits[2]]
        for fair, (_, waits, _) in outcomes.items()
    ]
    print(
        markdown_table(["fairness", "B's first call", "B's last call", "A's span"], rows, digits=2)
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.routing", description=__doc__)
    parser.add_argument("--plans", type=int, default=50)
    parser.add_argument("--rate", type=float, default=5.0)
    asyncio.run(run(parser.parse_args(argv)))


if __name__ == "__main__":
    main()
