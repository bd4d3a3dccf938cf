"""Throughput: many 8-step plans of instant tools at once on one worker, beside bare Temporal.

    python -m bench.throughput                       # 1, 10, 100, 200 at once; about 2-4 minutes
    python -m bench.throughput --quick               # 1, 10, 100; fewer repeats
    python -m bench.throughput --untuned             # the dev server as `start-dev` ships it
    python -m bench.throughput --in-memory           # no db file (default: a WAL sqlite file)
    python -m bench.throughput --worker-opt max_cached_workflows=100   # try a worker option
    python -m bench.throughput --no-gc-freeze        # the collector as Python ships it

The shape (8 steps, 5 levels): s0 -> a0, a1, a2 -> b0(a0, a1), b1(a1, a2) -> j(b0, b1) -> t.
Four arms, each on a fresh worker process (so its CPU time and peak RSS are its own):

  plan      ``PlanWorkflow``, a regular activity per step
  plan-l    the same with ``"local": true`` on every step
  bare      ``BareDag`` (bench/_baseline.py): the same shape as plain no-op activities
  bare-l    the same as local activities

For each concurrency N the client starts N workflows at once and waits for all:
plans/s and steps/s are N (and 8N) over the wall time from the first start to the
last result; worker CPU is the worker process's user+system seconds in that window;
peak RSS is the worker's high-water mark over its whole life (one arm, all N), and GC
CPU per step its garbage collections' CPU from when it polled (after start-up) per step it
ran. Each worker is set
up as ``worker.py`` sets up its own: start-up objects frozen (``server/long_lived.py``).
Arms are interleaved per repeat and the median repeat is shown. Prints only.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from temporalio.client import Client

from bench._baseline import BareDag, BareDagInput
from bench._report import command_line, machine_line, server_version
from bench._throughput_worker import REGISTRY
from durable_plan.server.connection import exit_now
from durable_plan.server.devserver import DevServer
from durable_plan.temporal.client.start import start_plan

ARMS = ("plan", "plan-l", "bare", "bare-l")
STEPS = 8
TARGET_RATIO = 0.9  # plans/s of a plan arm at least 90 % of its bare arm's (issue 31)
HISTORY_RATIO = 1.5  # history bytes per step at most 1.5x bare's (issue 31)
CPU_EXTRA_MS = 0.5  # worker CPU per step at most bare's + 0.5 ms (issue 31)
CPU_TARGET_FROM = 10  # plans at once: one plan's 8 steps are 2-4 ticks of the 10 ms CPU clock


def plan(local: bool) -> dict[str, Any]:
    def s(step_id: str, tool: str, **bind: str) -> dict[str, Any]:
        out: dict[str, Any] = {"id": step_id, "tool": tool}
        if bind:
            out["bind"] = bind
        else:
            out["args"] = {"n": 0}
        if local:
            out["local"] = True
        return out

    steps = [
        s("s0", "step"),
        *(s(f"a{i}", "step", n="steps.s0.n") for i in range(3)),
        s("b0", "join", values="[steps.a0.n, steps.a1.n]"),
        s("b1", "join", values="[steps.a1.n, steps.a2.n]"),
        s("j", "join", values="[steps.b0.n, steps.b1.n]"),
        s("t", "step", n="steps.j.n"),
    ]
    return {"steps": steps, "returns": ["t"]}


EXPECTED_T = 9  # s0 1; a0-a2 2; b0, b1 4; j 8; t 9 (the bare arm computes the same)


@dataclass
class Sample:
    wall_s: float
    cpu_s: float
    python_cpu_s: float
    """Of ``cpu_s``, the worker's Python threads' (the rest is the SDK core's Rust threads)."""
    workflow_ids: list[str] = field(default_factory=list)


@dataclass
class GcReport:
    """A worker's garbage collections since it polled, by generation, and their CPU."""

    collections: list[int]
    seconds: list[float]

    def ms_per_step(self, steps: int) -> float:
        return sum(self.seconds) * 1000 / steps if steps else float("nan")


class WorkerProcess:
    """One worker process (bench/_throughput_worker.py) for one arm."""

    def __init__(self, proc: subprocess.Popen[bytes], task_queue: str) -> None:
        self.proc = proc
        self.steps = 0
        """Plan (or bare DAG) steps this worker ran, warm-up included: what its GC is per."""
        self.task_queue = task_queue

    @classmethod
    def start(cls, address: str, options: dict[str, Any]) -> WorkerProcess:
        task_queue = f"bench-tp-{uuid.uuid4().hex[:8]}"
        command = ["-m", "bench._throughput_worker", address, task_queue, json.dumps(options)]
        proc = subprocess.Popen(
            [sys.executable, *command],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            cwd=Path(__file__).resolve().parent.parent,
        )
        assert proc.stdout is not None
        line = proc.stdout.readline().decode().strip()
        if line != "READY":
            proc.kill()
            raise RuntimeError(f"the worker did not start (said {line!r})")
        return cls(proc, task_queue)

    def cpu_s(self) -> float:
        return _cpu_s(Path(f"/proc/{self.proc.pid}/stat"))

    def cpu_by_thread_kind(self) -> dict[str, float]:
        """CPU seconds so far of the worker's Python threads (the event loop and the
        workflow threads: named like the process) and of the SDK core's Rust threads
        (named by their runtime, ``tokio-runtime-w``...). Threads that ended are left out."""
        process_name = Path(f"/proc/{self.proc.pid}/comm").read_text().strip()
        split = {"python": 0.0, "core": 0.0}
        for task in Path(f"/proc/{self.proc.pid}/task").iterdir():
            try:
                name = (task / "comm").read_text().strip()
                cpu = _cpu_s(task / "stat")
            except OSError:  # the thread ended meanwhile
                continue
            split["python" if name == process_name else "core"] += cpu
        return split

    def peak_rss_mib(self) -> float:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def stop(self) -> GcReport | None:
        """Stop the worker; its garbage collections since it polled (None if it said none)."""
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return None
        assert self.proc.stdout is not None
        for line in self.proc.stdout.read().decode().splitlines():
            if line.startswith("GC "):
                return GcReport(**json.loads(line[3:]))
        return None


async def one_round(client: Client, worker: WorkerProcess, arm: str, n: int) -> Sample:
    local = arm.endswith("-l")
    cpu0 = worker.cpu_s()
    python0 = worker.cpu_by_thread_kind()["python"]
    started = time.perf_counter()
    if arm.startswith("bare"):
        ids = [f"bare-{uuid.uuid4()}" for _ in range(n)]
        results = await asyncio.gather(
            *(
                client.execute_workflow(
                    BareDag.run,
                    BareDagInput(local),
                    id=workflow_id,
                    task_queue=worker.task_queue,
                )
                for workflow_id in ids
            )
        )
        bad = [r for r in results if r != EXPECTED_T]
    else:
        the_plan = plan(local)
        handles = await asyncio.gather(
            *(
                start_plan(client, the_plan, task_queue=worker.task_queue, registry=REGISTRY)
                for _ in range(n)
            )
        )
        outcomes = await asyncio.gather(*(h.result() for h in handles))
        bad = [o for o in outcomes if not o.ok or o.returned.get("t") != {"n": EXPECTED_T}]
        ids = [h.id for h in handles]
    wall = time.perf_counter() - started
    cpu = worker.cpu_s() - cpu0
    python = worker.cpu_by_thread_kind()["python"] - python0
    if bad:
        raise RuntimeError(f"{arm}: {len(bad)} of {n} workflows gave a wrong result: {bad[:1]}")
    worker.steps += n * STEPS
    return Sample(wall, cpu, python, ids)


async def history_bytes_per_step(client: Client, workflow_ids: Sequence[str]) -> float:
    """Mean bytes of history per step (every event's encoded size) over these workflows."""
    sizes = []
    for workflow_id in workflow_ids:
        history = await client.get_workflow_handle(workflow_id).fetch_history()
        sizes.append(sum(e.ByteSize() for e in history.events))
    return sum(sizes) / len(sizes) / STEPS


def _cpu_s(stat: Path) -> float:
    fields = stat.read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def _median_sample(samples: Sequence[Sample]) -> Sample:
    ordered = sorted(samples, key=lambda s: s.wall_s)
    return ordered[len(ordered) // 2]


async def run(args: argparse.Namespace) -> None:
    levels: list[int] = args.concurrency or ([1, 10, 100] if args.quick else [1, 10, 100, 200])
    repeats: int = args.repeats or (2 if args.quick else 3)
    options: dict[str, Any] = {}
    for item in args.worker_opt or ():
        key, _, value = item.partition("=")
        options[key] = json.loads(value)
    if args.no_gc_freeze:
        options["gc_freeze"] = False
    db_dir = tempfile.mkdtemp(prefix="bench-throughput-")
    server_kwargs: dict[str, Any] = {"headless": True}
    if not args.in_memory:
        server_kwargs["db_filename"] = Path(db_dir) / "bench.db"
    if args.untuned:
        server_kwargs.update(dynamic_config={}, sqlite_pragmas={})
    load_before = os.getloadavg()[0]
    t0 = time.perf_counter()
    samples: dict[tuple[str, int], list[Sample]] = defaultdict(list)
    peak: dict[str, float] = {}
    gc_ms: dict[str, float] = {}
    gc_counts: dict[str, str] = {}
    with DevServer(**server_kwargs) as server:
        client = await server.connect()
        version = server_version(server.binary)
        workers = {arm: WorkerProcess.start(server.target, options) for arm in ARMS}
        try:
            for arm in ARMS:  # warm-up: imports, connections, caches
                await one_round(client, workers[arm], arm, 5)
            rng = random.Random(7)
            for n in levels:
                for _ in range(repeats):
                    order = list(ARMS)
                    rng.shuffle(order)
                    for arm in order:
                        samples[arm, n].append(await one_round(client, workers[arm], arm, n))
            peak = {arm: w.peak_rss_mib() for arm, w in workers.items()}
            # Histories of the workflows of one round at the smallest level above 1, per arm.
            level = next((n for n in levels if n > 1), levels[0])
            history_bytes = {
                arm: await history_bytes_per_step(client, samples[arm, level][-1].workflow_ids)
                for arm in ARMS
            }
        finally:
            for arm, w in workers.items():
                report = w.stop()
                gc_ms[arm] = report.ms_per_step(w.steps) if report else float("nan")
                gc_counts[arm] = "/".join(map(str, report.collections)) if report else "?"
    elapsed = time.perf_counter() - t0
    gc_by_arm = {arm: (gc_ms[arm], gc_counts[arm]) for arm in gc_ms}
    timing = (version, load_before, elapsed)
    _report(args, levels, repeats, samples, peak, *timing, history_bytes, gc_by_arm)


def _report(
    args: argparse.Namespace,
    levels: Sequence[int],
    repeats: int,
    samples: dict[tuple[str, int], list[Sample]],
    peak: dict[str, float],
    version: str,
    load_before: float,
    elapsed: float,
    history_bytes: dict[str, float],
    gc_by_arm: dict[str, tuple[float, str]],
) -> None:
    """``gc_by_arm``: per arm, its worker's GC CPU ms per step and collections by generation."""
    storage = "in memory" if args.in_memory else "sqlite file"
    tuning = "untuned (start-dev defaults)" if args.untuned else "tuned (DevServer defaults)"
    print("## Throughput: concurrent 8-step plans of instant tools, one worker\n")
    print(f"`{command_line('bench.throughput')}`\n")
    options = json.dumps(args.worker_opt) if args.worker_opt else "plan_worker defaults"
    options += ", the collector set up as worker.py does" if not args.no_gc_freeze else ""
    print(
        machine_line(
            load_before,
            version,
            extra=f"dev server {storage}, {tuning}; worker options: {options}; "
            f"{repeats} repeats (median shown), {elapsed:.0f} s",
        )
        + "\n"
    )
    print(
        "| plans at once | arm | wall s | plans/s | steps/s | worker CPU s | CPU ms/step "
        "| of it Python ms/step |"
    )
    print("| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for n in levels:
        for arm in ARMS:
            s = _median_sample(samples[arm, n])
            print(
                f"| {n} | {arm} | {s.wall_s:.2f} | {n / s.wall_s:.1f} | "
                f"{n * STEPS / s.wall_s:.0f} | {s.cpu_s:.2f} | "
                f"{s.cpu_s * 1000 / (n * STEPS):.2f} | "
                f"{s.python_cpu_s * 1000 / (n * STEPS):.2f} |"
            )
    print(
        "\n| arm | worker peak RSS MiB | history bytes per step | GC CPU ms per step "
        "| collections, generation 0/1/2 |"
    )
    print("| --- | ---: | ---: | ---: | ---: |")
    for arm in ARMS:
        gc_ms, counts = gc_by_arm.get(arm, (float("nan"), "?"))
        print(
            f"| {arm} | {peak.get(arm, float('nan')):.0f} | {history_bytes[arm]:.0f} "
            f"| {gc_ms:.3f} | {counts} |"
        )
    for arm, bare in (("plan", "bare"), ("plan-l", "bare-l")):
        ratio = history_bytes[arm] / history_bytes[bare]
        verdict = "PASS" if ratio <= HISTORY_RATIO else "MISS"
        print(f"  {verdict}  history bytes per step, {arm}: {ratio:.2f}x {bare}'s")
    print(
        "\nplan vs bare, plans/s (median; target: at least "
        f"{TARGET_RATIO:.0%} of bare at every concurrency):"
    )
    for n in levels:
        for arm, bare in (("plan", "bare"), ("plan-l", "bare-l")):
            ours = n / _median_sample(samples[arm, n]).wall_s
            base = n / _median_sample(samples[bare, n]).wall_s
            ratio = ours / base
            verdict = "PASS" if ratio >= TARGET_RATIO else "MISS"
            low, high = paired_range(samples[arm, n], samples[bare, n])
            print(
                f"  {verdict}  N={n:<4} {arm:<7} {ratio:.2f} of {bare} "
                f"(repeat by repeat {low:.2f}-{high:.2f})"
            )
    print(
        f"\nworker CPU per step, plan - bare (target: at most {CPU_EXTRA_MS} ms from "
        f"{CPU_TARGET_FROM} plans at once; fewer are a few clock ticks of CPU):"
    )
    for n in levels:
        for arm, bare in (("plan", "bare"), ("plan-l", "bare-l")):
            extra = _cpu_ms_per_step(samples[arm, n], n) - _cpu_ms_per_step(samples[bare, n], n)
            python = _cpu_ms_per_step(samples[arm, n], n, python=True) - _cpu_ms_per_step(
                samples[bare, n], n, python=True
            )
            verdict = "PASS" if extra <= CPU_EXTRA_MS else "MISS"
            if n < CPU_TARGET_FROM:  # 8 steps' CPU is a few 10 ms clock ticks: no verdict
                verdict = "----"
            print(
                f"  {verdict}  N={n:<4} {arm:<7} {extra:+.2f} ms "
                f"(Python threads {python:+.2f}, the SDK core's {extra - python:+.2f})"
            )


def paired_range(ours: Sequence[Sample], bare: Sequence[Sample]) -> tuple[float, float]:
    """The lowest and highest plans/s ratio of a plan round and the bare round of the same
    repeat (each repeat runs every arm once, in shuffled order): how far this machine moved
    the verdict's median between repeats."""
    ratios = [b.wall_s / o.wall_s for o, b in zip(ours, bare, strict=True)]
    return min(ratios), max(ratios)


def _cpu_ms_per_step(samples: Sequence[Sample], n: int, *, python: bool = False) -> float:
    """The median round's worker CPU per step (CPU is less noisy than wall time, but not
    immune: rounds are interleaved with the other arms'); ``python``: its Python threads'."""
    cpu = [s.python_cpu_s if python else s.cpu_s for s in samples]
    return statistics.median(cpu) * 1000 / (n * STEPS)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeats", type=int)
    parser.add_argument("--concurrency", type=int, action="append")
    parser.add_argument("--in-memory", action="store_true")
    parser.add_argument("--untuned", action="store_true")
    parser.add_argument(
        "--no-gc-freeze",
        action="store_true",
        help="the collector as Python ships it (worker.py freezes start-up objects and "
        "collects young objects every 10,000)",
    )
    parser.add_argument("--worker-opt", action="append", metavar="KEY=JSON")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    exit_now(main())  # no interpreter finalization: temporalio/sdk-python#300
