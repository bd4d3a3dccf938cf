"""Chaos at a larger count: mixed plans, random worker SIGKILLs, one server restart.

    python -m bench.chaos [--plans 60] [--kills 12] [--seed 0] [--no-restart]

Runs ``tests/chaos_harness.run_chaos`` (the CI test runs it small) and prints what
happened: plans completed / failed / lost (must be 0), steps retried, duplicate
side effects with and without the exactly-once helper (with it: must be 0), and
the time from each kill until a step runs on the replacement worker.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
from pathlib import Path

from bench._report import command_line, key_value_table, machine_line
from tests.support.chaos_harness import run_chaos


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plans", type=int, default=60)
    parser.add_argument("--kills", type=int, default=12)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-restart", action="store_true", help="no server restart")
    args = parser.parse_args()
    load_start = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="durable-plan-chaos-") as tmp:
        report = asyncio.run(
            run_chaos(
                Path(tmp),
                plans=args.plans,
                kills=args.kills,
                restart_server=not args.no_restart,
                seed=args.seed,
            )
        )
    print(f"## Chaos: {args.plans} mixed plans, {args.kills} worker kills, seed {args.seed}\n")
    print(f"`{command_line('bench.chaos')}`\n")
    restart = "restarted once" if not args.no_restart else "not restarted"
    print(machine_line(load_start, extra=f"dev server with a db file, {restart}") + "\n")
    print(key_value_table(report.lines()) + "\n")
    bad = (
        report.lost
        or report.workflows_failed
        or report.duplicate_effects_once
        or report.rerun_after_recorded
    )
    print(
        "PASS" if not bad else "FAIL",
        " nothing lost, no failed workflow, no duplicate effect with the exactly-once helper",
    )
    return 1 if bad else 0


if __name__ == "__main__":
    from durable_plan.server.connection import exit_now

    exit_now(main())  # no interpreter finalization: temporalio/sdk-python#300
