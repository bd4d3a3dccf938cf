"""Instructions per plan step of the whole worker under load: workflows, activities, the
SDK's core and the garbage collector, counted by Callgrind.

    python -m bench.worker_instructions                  # 4 rounds of 10 plans per arm, ~3 min
    python -m bench.worker_instructions --rounds 2 --arm plan --arm bare

``bench.instructions`` counts the workflow side alone (recorded histories replayed); this
counts what ``bench.throughput``'s worker process does, all of it: each arm's worker
(``bench._throughput_worker``, set up as ``worker.py`` sets up its own) runs under
``valgrind --tool=callgrind --instr-atstart=no``; after one warm-up round the client
switches counting on (``callgrind_control -i on``), runs ``--rounds`` rounds of ``--plans``
8-step plans at once (as ``bench.throughput``), and switches it off. The dev server and
the client run outside valgrind. Two runs of the same code agree within about 0.2 % (the
worker's idle polling is the part that moves), where ``bench.throughput``'s CPU times move
by a third of the plan's extra. What the count leaves out: cache misses and the memory the
collector walks cost time an instruction count does not show, so the throughput bench stays
the judge of the targets. Needs valgrind; without it the bench says so and exits 2. Prints
only.
"""

from __future__ import annotations

import argparse
import os
import select
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from temporalio.client import Client

from bench._report import command_line, machine_line, server_version
from bench.instructions import collected, print_counts, valgrind_found
from bench.throughput import ARMS, STEPS, WorkerProcess, one_round
from durable_plan.server.connection import run_script
from durable_plan.server.devserver import DevServer

STOP_TIMEOUT_S = 300  # a worker under valgrind drains and writes its counts slowly
START_TIMEOUT_S = 600  # its imports run about fifty times slower there


def _control(pid: int, switch: str) -> None:
    subprocess.run(["callgrind_control", "-i", switch, str(pid)], capture_output=True, check=True)


def start_counted_worker(address: str, scratch: Path, arm: str) -> WorkerProcess:
    """``WorkerProcess.start``'s worker, under Callgrind with counting off."""
    task_queue = f"bench-wi-{uuid.uuid4().hex[:8]}"
    with (scratch / f"{arm}.valgrind.txt").open("w") as valgrind_output:
        proc = _start(address, scratch, arm, task_queue, valgrind_output)
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], START_TIMEOUT_S)
    line = proc.stdout.readline().decode().strip() if ready else "(nothing in time)"
    if line != "READY":
        proc.kill()
        proc.wait()
        raise RuntimeError(f"the {arm} worker did not start under valgrind (said {line!r})")
    return WorkerProcess(proc, task_queue)


def _start(
    address: str, scratch: Path, arm: str, task_queue: str, stderr: Any
) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            *("valgrind", "--tool=callgrind", "--instr-atstart=no"),
            f"--callgrind-out-file={scratch}/callgrind.{arm}.out",
            *(sys.executable, "-m", "bench._throughput_worker", address, task_queue, "{}"),
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=stderr,
        cwd=Path(__file__).resolve().parent.parent,
    )


async def count_arm(
    client: Client, address: str, scratch: Path, arm: str, args: argparse.Namespace
) -> float:
    """Instructions per step of ``arm``'s worker over the counted rounds."""
    worker = start_counted_worker(address, scratch, arm)
    try:
        await one_round(client, worker, arm, args.plans)  # warm-up: imports, caches
        _control(worker.proc.pid, "on")
        for _ in range(args.rounds):
            await one_round(client, worker, arm, args.plans)
        _control(worker.proc.pid, "off")
    finally:
        worker.proc.terminate()
        worker.proc.wait(timeout=STOP_TIMEOUT_S)
    report = (scratch / f"{arm}.valgrind.txt").read_text()
    instructions = collected(report)
    if not instructions:  # None or 0: counting never switched on
        raise RuntimeError(f"no count from the {arm} worker under valgrind:\n{report[-2000:]}")
    return float(instructions) / (int(args.rounds) * int(args.plans) * STEPS)


async def main(args: argparse.Namespace) -> int:
    if not valgrind_found("bench.worker_instructions"):
        return 2
    arms = args.arm or list(ARMS)
    started = time.perf_counter()
    load_start = os.getloadavg()[0]
    per_step: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as scratch, DevServer(headless=True) as server:
        version = server_version(server.binary)
        client = await Client.connect(server.target)
        for arm in arms:  # one at a time: a worker's idle polling counts too
            per_step[arm] = await count_arm(client, server.target, Path(scratch), arm, args)
    print("## Instructions per plan step, whole worker under load (Callgrind)")
    print()
    print(f"`{command_line('bench.worker_instructions')}`")
    print()
    extra = f"{args.rounds} rounds of {args.plans} plans at once per arm"
    print(
        f"{machine_line(load_start, version, extra=extra)}; {time.perf_counter() - started:.0f} s"
    )
    print_counts(per_step)
    return 0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arm", action="append", choices=ARMS, help="arms to count (all)")
    parser.add_argument("--plans", type=int, default=10, help="plans at once per round")
    parser.add_argument("--rounds", type=int, default=4, help="counted rounds per arm")
    return parser.parse_args(argv)


if __name__ == "__main__":
    run_script(main(parse_args()))
