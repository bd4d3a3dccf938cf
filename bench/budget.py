"""What each part of a durable plan costs its worker, per step: the part taken out, counted.

    python -m bench.budget                  # local steps (plan-l), 30 histories, ~3 minutes
    python -m bench.budget --arm plan       # activities
    python -m bench.budget --histories F    # histories bench.instructions --save wrote

``bench.instructions`` counts a replay's instructions under Callgrind; this bench replays the
same recorded histories again with one part of ``PlanWorkflow`` taken out of the replaying
process at a time (``bench._knockouts``: the check of the plan, the step events, the event
stream itself, admission, the bounded result), then with all of them out, and prints what
each removal saved per step against the plan's whole extra over bare Temporal. The patches
leave the workflow's commands as they were, so each replay still matches its history; they
exist only in the bench's replaying processes.

Why: issue 31 asks for plans at 0.9 of bare Temporal's rate. With local activities the
worker's Python thread is the bottleneck, and this table says how much of a plan's extra is
which part, so a target can be weighed against what it would take away. Needs valgrind
(``apt install valgrind``); without it, exit 2.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Sequence

from bench._knockouts import PARTS
from bench._report import command_line, machine_line
from bench.instructions import count_all, histories_file, valgrind_found
from durable_plan.server.connection import run_script

BARE = {"plan": "bare", "plan-l": "bare-l"}
LABELS = {
    "check": "the check of the sent plan",
    "events": "the step events",
    "stream": "the event stream, and so its events",
    "admission": "admission (the history guard)",
    "result": "the bounded result",
}


def rows(
    whole: float, bare: float, without: dict[tuple[str, ...], float]
) -> list[tuple[str, float, float]]:
    """Per removal (each part, then all together): what it saved per step and its share of
    the plan's extra over bare."""
    extra = whole - bare
    out = []
    for parts, counted in without.items():
        saved = whole - counted
        name = " + ".join(LABELS[p] for p in parts) if len(parts) < len(PARTS) else "all of them"
        out.append((name, saved, saved / extra if extra else float("nan")))
    return out


async def main(args: argparse.Namespace) -> int:
    if not valgrind_found("bench.budget"):
        return 2
    started = time.perf_counter()
    load_start = os.getloadavg()[0]
    arm: str = args.arm
    runs: list[tuple[str, tuple[str, ...]]] = [
        (arm, ()),
        (BARE[arm], ()),
        *((arm, (part,)) for part in PARTS),
        (arm, PARTS),
    ]
    async with histories_file(args) as path:
        counted = count_all(path, runs)
        plans = len(json.loads(path.read_text())[arm])
    whole, bare = counted[0], counted[1]
    without = {parts: n for (_, parts), n in zip(runs[2:], counted[2:], strict=True)}
    print(f"## What each part of a plan costs, per step ({arm}, workflow side under Callgrind)")
    print()
    print(f"`{command_line('bench.budget')}`")
    print()
    print(f"{machine_line(load_start)}; {plans} histories, {time.perf_counter() - started:.0f} s")
    print()
    print(f"{arm}: {whole:,.0f} instructions per step; {BARE[arm]}: {bare:,.0f}; ", end="")
    print(f"the plan's extra {whole - bare:+,.0f} ({whole / bare:.2f}x)")
    print()
    print("| taken out | instructions per step saved | of the plan's extra |")
    print("| --- | ---: | ---: |")
    for name, saved, share in rows(whole, bare, without):
        print(f"| {name} | {saved:,.0f} | {share:.0%} |")
    left = without[PARTS]
    print()
    print(
        f"With all of them out: {left:,.0f} per step, {left / bare:.2f}x {BARE[arm]}'s "
        "(binding, scheduling, the ledger, the call's stages and the activity's reply remain)."
    )
    return 0


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arm", choices=sorted(BARE), default="plan-l")
    parser.add_argument("--plans", type=int, default=30, help="histories recorded")
    parser.add_argument("--histories", help="replay these histories (a file --save wrote)")
    parser.add_argument("--save", help="keep the recorded histories in this file")
    return parser.parse_args(argv)


if __name__ == "__main__":
    run_script(main(parse_args()))
