"""Per-step overhead of the in-process executor: checks + bindings + scheduling.

    python -m bench.engine               # about 10-20 s
    python -m bench.engine --repeats 5   # quicker, noisier

Tools are instant (an async function that returns a small dict at once), so
everything measured is the engine's own cost. Plans of 8, 32 and 256 steps
are built from one realistic 8-step block (a source, a fan-out of three, a
step after two of them, an inline-array join, a tail), blocks chained tail to
source; every step has one or two JSONata bindings.

Columns (best and median over the repeats, after a warm-up; a full garbage
collection before each sample, so every sample starts from the same heap):
  check      check_plan alone (schema, JSONata parse + AST analysis, graph)
  total      execute_plan end to end (check + run)
  run        total - check (bindings, scheduling, ledger, asyncio)
  per step   total / steps: the number the target is about
  check/step check / steps: flat across sizes when checking is linear

A second table checks the same plans against a catalogue that knows ``calc``'s input
schema, without and with its declared return shape (``output_schema``): the cost of the
return-shape check (every path walked through the shape, every bound value's type held
against its argument's), per step.

Targets: per-step overhead under 1 ms (median) at every size, and check time
linear in plan size (check/step at 256 steps within 2x of 8 steps).
Prints only; never asserts.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import gc
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bench._report import command_line, machine_line, markdown_table
from durable_plan.check import ToolCatalog, ToolSpec, check_plan
from durable_plan.local.runner import execute_plan

SIZES = (8, 32, 256)
MAX_STEPS = 256
TARGET_MS_PER_STEP = 1.0
LINEARITY_LIMIT = 2.0


def block(n: int, previous_tail: str | None) -> list[dict[str, Any]]:
    """Eight steps: src -> fan-out x3 -> a step after two of them -> join (inline array) -> tail."""
    src: dict[str, Any] = {"id": f"src_{n}", "tool": "calc", "args": {"seed": n}}
    if previous_tail:
        src["bind"] = {"x": f"steps.{previous_tail}.total"}
    steps = [src]
    for k in range(3):
        steps.append(
            {
                "id": f"fan_{n}_{k}",
                "tool": "calc",
                "args": {"k": k},
                "bind": {"x": f"steps.src_{n}.x"},
            }
        )
    for k in range(2):
        steps.append(
            {
                "id": f"step_{n}_{k}",
                "tool": "calc",
                "bind": {"x": f"steps.fan_{n}_{k}.v", "label": f"steps.src_{n}.label"},
            }
        )
    steps.append(
        {
            "id": f"join_{n}",
            "tool": "calc",
            "bind": {"values": f"[steps.step_{n}_0.v, steps.step_{n}_1.v, steps.fan_{n}_2.v]"},
        }
    )
    steps.append(
        {
            "id": f"tail_{n}",
            "tool": "calc",
            "bind": {"x": f"steps.join_{n}.total", "y": f"steps.src_{n}.x"},
        }
    )
    return steps


def make_plan(size: int) -> dict[str, Any]:
    steps: list[dict[str, Any]] = []
    tail: str | None = None
    for n in range(size // 8):
        steps += block(n, tail)
        tail = f"tail_{n}"
    assert len(steps) == size
    return {"steps": steps, "returns": [tail], "final": True}


_INT = {"type": "integer"}
CALC_INPUT = {
    "type": "object",
    "properties": {
        "seed": _INT,
        "k": _INT,
        "x": _INT,
        "y": _INT,
        "label": {"type": "string"},
        "values": {"type": "array", "items": _INT},
    },
}
CALC_SHAPE = {
    "type": "object",
    "properties": {"x": _INT, "v": _INT, "total": _INT, "label": {"type": "string"}},
    "required": ["x", "v", "total", "label"],
    "additionalProperties": False,
}
"""What ``instant`` returns, declared (as a TypedDict or a docstring would)."""
WITHOUT_SHAPES = ToolCatalog({"calc": ToolSpec("calc", CALC_INPUT)})
WITH_SHAPES = ToolCatalog({"calc": ToolSpec("calc", CALC_INPUT, output_schema=CALC_SHAPE)})


async def instant(name: str, args: dict[str, Any]) -> dict[str, Any]:
    """The instant tool: a small, fixed-shape result."""
    return {"x": 1, "v": 2, "total": 6, "label": "ok"}


@dataclass
class Timing:
    best: float
    median: float


def _timed(samples: list[float]) -> Timing:
    return Timing(min(samples), statistics.median(samples))


def measure_sync(fn: Callable[[], object], repeats: int) -> Timing:
    samples = []
    for _ in range(repeats):
        gc.collect()
        started = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - started) * 1000)
    return _timed(samples)


async def measure_run(plan: dict[str, Any], repeats: int) -> Timing:
    samples = []
    for _ in range(repeats):
        gc.collect()
        started = time.perf_counter()
        result = await execute_plan(plan, instant, max_steps=MAX_STEPS)
        samples.append((time.perf_counter() - started) * 1000)
        assert result.ok, result.failures
    return _timed(samples)


@dataclass
class Row:
    steps: int
    depth: int
    check: Timing
    total: Timing
    catalog_check: Timing | None = None
    shaped_check: Timing | None = None

    @property
    def run(self) -> Timing:
        return Timing(
            max(self.total.best - self.check.best, 0.0),
            max(self.total.median - self.check.median, 0.0),
        )

    @property
    def per_step(self) -> Timing:
        return Timing(self.total.best / self.steps, self.total.median / self.steps)

    @property
    def check_per_step(self) -> Timing:
        return Timing(self.check.best / self.steps, self.check.median / self.steps)


async def bench(repeats: int) -> list[Row]:
    rows = []
    for size in SIZES:
        plan = make_plan(size)
        depth = len(check_plan(plan, max_steps=MAX_STEPS).levels)
        n = repeats if size <= 32 else max(3, repeats // 3)
        # warm-up: imports, caches, the event loop
        await measure_run(plan, 2)
        check = measure_sync(functools.partial(check_plan, plan, max_steps=MAX_STEPS), n)
        total = await measure_run(plan, n)
        catalogs = [
            measure_sync(
                functools.partial(check_plan, plan, catalog=catalog, max_steps=MAX_STEPS), n
            )
            for catalog in (WITHOUT_SHAPES, WITH_SHAPES)
        ]
        rows.append(Row(size, depth, check, total, *catalogs))
    return rows


def _fmt(t: Timing, scale: float = 1.0) -> str:
    return f"{t.best * scale:.2f} / {t.median * scale:.2f}"


def report(rows: list[Row], load_start: float, elapsed_s: float) -> bool:
    print("## In-process executor overhead, instant tools\n")
    print(f"`{command_line('bench.engine')}`\n")
    print(machine_line(load_start, extra=f"no server; {elapsed_s:.1f} s") + "\n")
    print("best / median of the samples; times in ms, check per step in us\n")
    table = [
        [
            r.steps,
            r.depth,
            _fmt(r.check),
            _fmt(r.total),
            _fmt(r.run),
            _fmt(r.per_step),
            _fmt(r.check_per_step, 1000),
        ]
        for r in rows
    ]
    header = ["steps", "depth", "check ms", "total ms", "run ms", "per step ms", "check/step us"]
    print(markdown_table(header, table) + "\n")
    shaped = [
        [
            r.steps,
            _fmt(Timing(r.catalog_check.best / r.steps, r.catalog_check.median / r.steps), 1000),
            _fmt(Timing(r.shaped_check.best / r.steps, r.shaped_check.median / r.steps), 1000),
            f"{r.shaped_check.median / r.catalog_check.median - 1:+.0%}",
        ]
        for r in rows
        if r.catalog_check is not None and r.shaped_check is not None
    ]
    print("check against a catalogue (calc's input schema), per step in us:\n")
    header = ["steps", "without return shape", "with return shape", "median"]
    print(markdown_table(header, shaped) + "\n")
    worst = max(r.per_step.median for r in rows)
    overhead_ok = worst < TARGET_MS_PER_STEP
    print(
        f"{'PASS' if overhead_ok else 'MISS'}  per-step overhead: worst median "
        f"{worst:.3f} ms/step (target < {TARGET_MS_PER_STEP:g} ms)"
    )
    small, big = rows[0], rows[-1]
    ratio = big.check_per_step.best / small.check_per_step.best
    linear_ok = ratio < LINEARITY_LIMIT
    print(
        f"{'PASS' if linear_ok else 'MISS'}  check time linear: per-step check at {big.steps} "
        f"steps is {ratio:.2f}x that at {small.steps} (limit {LINEARITY_LIMIT:g}x)"
    )
    return overhead_ok and linear_ok


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--repeats", type=int, default=15, help="samples per size (default 15)")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    load_start = os.getloadavg()[0]
    rows = asyncio.run(bench(max(1, args.repeats)))
    report(rows, load_start, time.perf_counter() - started)


if __name__ == "__main__":
    main()
