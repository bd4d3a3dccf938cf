"""Where a worker's CPU goes under load: py-spy over ``bench.throughput``'s worker process.

    python -m bench.profile_throughput                      # plan and bare, 100 at once
    python -m bench.profile_throughput --arm plan --plans 100 --rounds 6
    python -m bench.profile_throughput --svg docs/profiles  # flame graphs too (a second run)

For each arm a fresh worker process (``bench._throughput_worker``) runs ``--rounds`` rounds
of ``--plans`` 8-step plans at once (as ``bench.throughput`` does) while ``py-spy record``
samples it (idle threads left out). Prints, per arm, the CPU time per step and the top
frames by inclusive share (the share of busy samples with the frame on the stack) and by
self share, and a table by area (our code, the SDK's workflow instance, payload conversion,
protobuf, asyncio...). Needs ``py-spy`` (``pip install py-spy``), not a dependency.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from bench._report import command_line, machine_line, markdown_table, server_version
from bench.throughput import STEPS, WorkerProcess, one_round
from durable_plan.server.connection import exit_now
from durable_plan.server.devserver import DevServer

AREAS: tuple[tuple[str, str], ...] = (
    ("durable_plan/", "durable-plan"),
    ("jsonata", "jsonata"),
    ("temporalio/worker/_workflow_instance", "SDK workflow instance"),
    ("temporalio/worker/_workflow", "SDK workflow worker"),
    ("temporalio/worker/_activity", "SDK activity worker"),
    ("temporalio/converter", "SDK payload conversion"),
    ("temporalio/bridge", "SDK bridge (Rust core calls)"),
    ("google/protobuf", "protobuf"),
    ("temporalio/", "SDK other"),
    ("asyncio/", "asyncio"),
    ("json/", "json"),
    ("pydantic", "pydantic"),
)


def area_of(frame: str) -> str | None:
    for needle, name in AREAS:
        if needle in frame:
            return name
    return None


def read_raw(path: Path) -> Counter[tuple[str, ...]]:
    """py-spy's raw output: ``frame;frame;... count`` per line, root first."""
    stacks: Counter[tuple[str, ...]] = Counter()
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if stack and count.isdigit():
            stacks[tuple(stack.split(";"))] += int(count)
    return stacks


def summarize(stacks: Counter[tuple[str, ...]], top: int) -> tuple[str, str, str]:
    total = sum(stacks.values()) or 1
    inclusive: Counter[str] = Counter()
    own: Counter[str] = Counter()
    areas: Counter[str] = Counter()
    for stack, count in stacks.items():
        for frame in set(stack):
            inclusive[frame] += count
        own[stack[-1]] += count
        # A sample belongs to the innermost frame of a known area (the leaf's own code,
        # or what called into a library): the areas partition the samples.
        owner = next((a for a in map(area_of, reversed(stack)) if a is not None), "other")
        areas[owner] += count

    def rows(counter: Counter[str]) -> list[list[object]]:
        return [[_short(frame), 100.0 * n / total] for frame, n in counter.most_common(top)]

    return (
        markdown_table(["frame (inclusive)", "% of samples"], rows(inclusive)),
        markdown_table(["frame (self)", "% of samples"], rows(own)),
        markdown_table(
            ["area (self)", "% of samples"],
            [[name, 100.0 * n / total] for name, n in areas.most_common()],
        ),
    )


def _short(frame: str) -> str:
    """``func (path/to/module.py:12)`` -> ``func (module.py:12)``, pipes escaped."""
    name, _, where = frame.partition(" (")
    where = where.rstrip(")")
    path, _, line = where.rpartition(":")
    return f"{name} ({Path(path).name}:{line})".replace("|", "\\|")


async def profile_arm(
    address: str, arm: str, args: argparse.Namespace, out_dir: Path
) -> tuple[float, Path, Path | None]:
    """CPU ms per step over the profiled rounds, the raw stacks file, the flame graph."""
    worker = WorkerProcess.start(address, {})
    from temporalio.client import Client

    client = await Client.connect(address)
    try:
        await one_round(client, worker, arm, 5)  # warm-up: imports, caches
        await one_round(client, worker, arm, args.plans)
        raw = out_dir / f"{arm}.raw.txt"
        spy = _spy(worker.proc.pid, raw, "raw", args.rate)
        time.sleep(0.5)
        cpu = 0.0
        for _ in range(args.rounds):
            cpu += (await one_round(client, worker, arm, args.plans)).cpu_s
        _stop(spy)
        svg: Path | None = None
        if args.svg is not None:
            svg = Path(args.svg) / f"throughput-{arm}.svg"
            svg.parent.mkdir(parents=True, exist_ok=True)
            spy = _spy(worker.proc.pid, svg, "flamegraph", args.rate)
            time.sleep(0.5)
            for _ in range(args.rounds):
                await one_round(client, worker, arm, args.plans)
            _stop(spy)
    finally:
        worker.stop()
    return cpu * 1000 / (args.rounds * args.plans * STEPS), raw, svg


def _spy(pid: int, out: Path, fmt: str, rate: int) -> subprocess.Popen[bytes]:
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    return subprocess.Popen(
        # --gil: only the thread holding the GIL (Python's CPU, not threads waiting on a
        # queue or epoll); --nonblocking: the worker is not paused to be read.
        [
            *(spy, "record", "--pid", str(pid), "--format", fmt, "--rate", str(rate)),
            *("--gil", "--nonblocking", "-o", str(out)),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _stop(spy: subprocess.Popen[bytes]) -> None:
    spy.send_signal(2)  # SIGINT: py-spy writes its output and exits
    spy.wait(timeout=60)


async def run(args: argparse.Namespace) -> None:
    load = __import__("os").getloadavg()[0]
    out_dir = Path(tempfile.mkdtemp(prefix="bench-profile-"))
    results: dict[str, tuple[float, Path, Path | None]] = {}
    with DevServer(headless=True, db_filename=out_dir / "bench.db") as server:
        version = server_version(server.binary)
        for arm in args.arm or ["plan", "bare"]:
            results[arm] = await profile_arm(server.target, arm, args, out_dir)
    print(f"## Worker profile under load\n\n`{command_line('bench.profile_throughput')}`\n")
    print(
        machine_line(
            load, version, extra=f"{args.plans} plans at once x {args.rounds} rounds per arm"
        )
    )
    for arm, (cpu_ms, raw, svg) in results.items():
        print(f"\n### {arm}: {cpu_ms:.2f} ms of worker CPU per step")
        if svg is not None:
            print(f"\nflame graph: {svg}")
        inclusive, own, areas = summarize(read_raw(raw), args.top)
        print(f"\n{areas}\n\n{inclusive}\n\n{own}")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.profile_throughput", description=__doc__)
    parser.add_argument("--arm", action="append", choices=["plan", "plan-l", "bare", "bare-l"])
    parser.add_argument("--plans", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--rate", type=int, default=200, help="samples per second")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--svg", metavar="DIR", help="also record a flame graph per arm here")
    asyncio.run(run(parser.parse_args(argv)))


if __name__ == "__main__":
    exit_now(main())
