"""Instructions per plan step, workflow side: recorded histories replayed under Callgrind.

    python -m bench.instructions                 # 30 histories per arm, about a minute
    python -m bench.instructions --plans 10      # quicker
    python -m bench.instructions --histories F   # replay histories saved before (--save F)

Why a count and not a clock: on a shared machine two runs of ``bench.replay_cost`` of the
same code differ by 0.1-0.15 ms per step, as much as a round of issue 31's changes buys.
Valgrind's Callgrind counts the instructions the process executes, the same to within
0.1 % from run to run, so a change of a few microseconds per step shows. It counts what
the replay does in Python and in the SDK's core alike (a replay is the worker's workflow
side without the server: see ``bench.replay_cost``), and nothing of the activities.

Each arm (``plan``, ``bare``, ``plan-l``, ``bare-l``, as ``bench.throughput``) replays in a
process of its own under ``valgrind --tool=callgrind --instr-atstart=no``: it replays three
histories first (imports, caches), then turns counting on (``callgrind_control -i on``),
replays every history once, and turns it off. Two arms run at once. Needs ``valgrind``
(Debian/Ubuntu: ``apt install valgrind``); without it the bench says so and exits 2.
Prints only.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer

from bench._baseline import BareDag
from bench._knockouts import take_out
from bench._report import command_line, machine_line
from bench.replay_cost import ARMS, record, replay_all
from bench.throughput import STEPS
from durable_plan.server.connection import run_script
from durable_plan.server.devserver import DevServer
from durable_plan.temporal.workflows.agent_workflow import AgentStepWorkflow
from durable_plan.temporal.workflows.plan_workflow import PlanWorkflow

WARM_UP = 3
_COLLECTED = re.compile(r"Collected\s*:\s*(\d+)")


def collected(valgrind_output: str) -> int | None:
    """The instructions Callgrind counted, from what valgrind printed (None: no count)."""
    found = _COLLECTED.findall(valgrind_output)
    return int(found[-1]) if found else None


def save(histories: dict[str, list[WorkflowHistory]], path: Path) -> None:
    path.write_text(
        json.dumps(
            {arm: [[h.workflow_id, h.to_json()] for h in hs] for arm, hs in histories.items()}
        )
    )


def load(path: Path, arm: str) -> list[WorkflowHistory]:
    return [WorkflowHistory.from_json(wid, text) for wid, text in json.loads(path.read_text())[arm]]


def _callgrind(switch: str) -> None:
    """Counting on or off for this process; nothing outside valgrind."""
    with contextlib.suppress(OSError):  # no valgrind installed: nothing to switch
        subprocess.run(
            ["callgrind_control", "-i", switch, str(os.getpid())], capture_output=True, check=False
        )


async def replay_counted(path: Path, arm: str) -> int:
    """The replay a counted process runs: warm up, count every history once. Returns the
    steps replayed while counting."""
    histories = load(path, arm)
    executor = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    replayer = Replayer(
        workflows=[PlanWorkflow, AgentStepWorkflow, BareDag], workflow_task_executor=executor
    )
    await replay_all(replayer, histories[:WARM_UP])
    _callgrind("on")
    await replay_all(replayer, histories)
    _callgrind("off")
    return len(histories) * STEPS


def count(path: Path, arm: str, without: Sequence[str] = ()) -> float:
    """Instructions per step of ``arm``'s replay, in a process of its own under Callgrind;
    ``without``: parts of the plan taken out of that process (``bench._knockouts``)."""
    with tempfile.TemporaryDirectory() as scratch:
        proc = subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                "--instr-atstart=no",
                f"--callgrind-out-file={scratch}/callgrind.out",
                sys.executable,
                "-m",
                "bench.instructions",
                "--replay",
                arm,
                "--histories",
                str(path),
                *(f"--without={part}" for part in without),
            ],
            capture_output=True,
            text=True,
            cwd=Path(__file__).resolve().parent.parent,
            check=False,
        )
    instructions = collected(proc.stderr)
    steps = re.findall(r"^STEPS (\d+)$", proc.stdout, re.MULTILINE)
    if proc.returncode != 0 or not instructions or not steps:  # 0: counting never switched on
        raise RuntimeError(f"the {arm} replay under valgrind failed:\n{proc.stderr[-2000:]}")
    return instructions / int(steps[-1])


@contextlib.asynccontextmanager
async def histories_file(args: argparse.Namespace) -> AsyncIterator[Path]:
    """The histories to replay: the file ``--histories`` names, or ``--plans`` per arm recorded
    now on a dev server of their own (copied to ``--save``'s file when asked)."""
    if args.histories:
        yield Path(args.histories)
        return
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "histories.json"
        with DevServer(headless=True) as server:
            save(await record(await server.connect(), args.plans), path)
        if args.save:
            shutil.copy(path, args.save)
        yield path


def count_all(path: Path, runs: Sequence[tuple[str, Sequence[str]]]) -> list[float]:
    """``count`` of each ``(arm, parts taken out)``, two processes at a time (two cores)."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        return list(pool.map(lambda run: count(path, run[0], run[1]), runs))


async def main(args: argparse.Namespace) -> int:
    if args.replay is not None:
        take_out(args.without)
        print(f"STEPS {await replay_counted(Path(args.histories), args.replay)}", flush=True)
        return 0
    if not valgrind_found("bench.instructions"):
        return 2
    started = time.perf_counter()
    load_start = os.getloadavg()[0]
    async with histories_file(args) as path:
        per_step = dict(zip(ARMS, count_all(path, [(arm, ()) for arm in ARMS]), strict=True))
        plans = len(json.loads(path.read_text())[ARMS[0]])
    print("## Instructions per plan step, workflow side (recorded histories under Callgrind)")
    print()
    print(f"`{command_line('bench.instructions')}`")
    print()
    print(
        f"{machine_line(load_start)}; {plans} histories per arm, "
        f"{time.perf_counter() - started:.0f} s"
    )
    print_counts(per_step)
    return 0


def valgrind_found(bench: str) -> bool:
    """True if valgrind and its control tool are on the PATH; else says what to install."""
    missing = [tool for tool in ("valgrind", "callgrind_control") if shutil.which(tool) is None]
    if missing:
        print(
            f"{bench} needs {' and '.join(missing)} (Callgrind counts the "
            "instructions): install valgrind, e.g. `apt install valgrind`",
            file=sys.stderr,
        )
    return not missing


def print_counts(per_step: dict[str, float]) -> None:
    """The table of instructions per step by arm, then each plan arm's extra over its bare
    arm (where both were counted)."""
    print()
    print("| arm | instructions per step |")
    print("| --- | ---: |")
    for arm, count in per_step.items():
        print(f"| {arm} | {count:,.0f} |")
    print()
    for plan_arm, bare_arm in (("plan", "bare"), ("plan-l", "bare-l")):
        if plan_arm in per_step and bare_arm in per_step:
            extra = per_step[plan_arm] - per_step[bare_arm]
            ratio = per_step[plan_arm] / per_step[bare_arm]
            print(f"  {plan_arm} - {bare_arm}: {extra:+,.0f} instructions per step ({ratio:.2f}x)")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plans", type=int, default=30, help="histories recorded per arm")
    parser.add_argument("--histories", help="replay these histories (a file --save wrote)")
    parser.add_argument("--save", help="keep the recorded histories in this file")
    parser.add_argument("--replay", choices=ARMS, help=argparse.SUPPRESS)
    parser.add_argument("--without", action="append", default=[], help=argparse.SUPPRESS)
    return parser.parse_args(argv)


if __name__ == "__main__":
    run_script(main(parse_args()))
