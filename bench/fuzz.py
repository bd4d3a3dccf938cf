"""Fuzz the checker and the in-process runner with hostile, model-written plans.

    python -m bench.fuzz                                  # 10,000 cases, seed 0
    python -m bench.fuzz --count 500 --seed 7 --timeout-s 5 --memory-mib 1024
    python -m bench.fuzz --seed 7 --only 123              # re-run one case, show it whole
    python -m bench.fuzz --family hostile_expression      # one generator family only

Cases come from the generators in ``tests/support/fuzz_harness.py``: case ``i`` of seed ``S``
is ``case_for_seed(S, i)``, the same on every run and in every worker. Each case
runs ``check_plan`` (durable or not, with or without a catalog) and then
``execute_plan`` with tools that return huge integers, NaN, sets, 12,000-deep
lists or raise, in one of ``--workers`` long-lived worker processes whose address
space is capped at ``--memory-mib`` (RLIMIT_AS), under a wall clock of
``--timeout-s`` per case. A worker that times out, crashes or runs out of memory
is replaced; the case is a failure.

A case fails when anything but ``PlanRejected`` escapes, a tool runs for a
rejected plan, a ledger status is unknown, the result is not plain JSON
(``json.dumps(..., allow_nan=False)``), check and run disagree, the wall clock
runs out, or memory does (``MemoryError``, or the worker killed). Prints a table
(cases, ok, failures by kind, seconds per case, peak RSS, per family) and the
first failing inputs; exits 1 if any case failed.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import multiprocessing
import os
import resource
import signal
import statistics
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from multiprocessing.context import ForkProcess

from bench._report import command_line, machine_line, markdown_table
from tests.support.fuzz_harness import (
    FAMILIES,
    FuzzCase,
    Outcome,
    address_space_bytes,
    case_for_seed,
    describe,
    evaluate_case,
    limit_memory,
    signal_name,
    timed,
)

MIB = 1024 * 1024
RECYCLE = ("timeout", "memory", "crash")
"""Failures after which a worker is not trusted with another case."""


def worker_main(conn: Connection, memory_mib: int, families: tuple[str, ...] | None) -> None:
    """Evaluate cases by (seed, index) until told to stop; one outcome back per case."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C
    limit_memory(memory_mib * MIB)
    while True:
        try:
            task = conn.recv()
        except (EOFError, OSError):
            return
        if task is None:
            return
        seed, index = task
        try:
            case = case_for_seed(seed, index, families)
        except Exception as exc:  # a bug in the generators: reported, never a dead worker
            conn.send((index, Outcome("failed", "generator", f"{type(exc).__name__}: {exc}")))
            continue
        conn.send((index, timed(evaluate_case, case)))


@dataclass
class Worker:
    process: ForkProcess
    conn: Connection
    index: int | None = None
    started: float = 0.0


def start_worker(memory_mib: int, families: tuple[str, ...] | None) -> Worker:
    context = multiprocessing.get_context("fork")
    parent_end, child_end = context.Pipe()
    process = context.Process(
        target=worker_main, args=(child_end, memory_mib, families), daemon=True
    )
    process.start()
    child_end.close()
    return Worker(process, parent_end)


def stop_worker(worker: Worker, *, kill: bool) -> int | None:
    """End the worker (killing it if asked) and return its exit code."""
    if kill and worker.process.is_alive():
        worker.process.kill()
    else:
        with contextlib.suppress(BrokenPipeError, OSError):
            worker.conn.send(None)
    worker.process.join(timeout=5)
    if worker.process.is_alive():
        worker.process.kill()
        worker.process.join()
    worker.conn.close()
    return worker.process.exitcode


def exit_outcome(exitcode: int | None, seconds: float) -> Outcome:
    """The failure of a worker that died without answering."""
    if exitcode is not None and exitcode < 0:
        number = -exitcode
        name = signal_name(number)
        kind = "memory" if number in (signal.SIGKILL, signal.SIGABRT, signal.SIGSEGV) else "crash"
        detail = f"the worker died of {name} (memory limit, stack overflow or a crash)"
        return Outcome("failed", kind, detail, seconds)
    return Outcome("failed", "crash", f"the worker exited with status {exitcode}", seconds)


def run_cases(
    indices: Sequence[int],
    *,
    seed: int,
    workers: int,
    timeout_s: float,
    memory_mib: int,
    families: tuple[str, ...] | None,
    progress: bool,
) -> dict[int, Outcome]:
    """Every case's outcome, by index; the pool is fed one case per worker at a time."""
    todo = list(reversed(indices))
    results: dict[int, Outcome] = {}
    pool = [start_worker(memory_mib, families) for _ in range(max(1, workers))]
    step = max(1, len(indices) // 10)
    try:
        while len(results) < len(indices):
            for worker in pool:
                if worker.index is None and todo:
                    worker.index = todo.pop()
                    worker.started = time.perf_counter()
                    worker.conn.send((seed, worker.index))
            busy = [w for w in pool if w.index is not None]
            if not busy:
                break
            now = time.perf_counter()
            wait_s = max(0.0, min(w.started + timeout_s - now for w in busy))
            ready = wait([w.conn for w in busy], timeout=wait_s)
            for slot, worker in enumerate(pool):
                index = worker.index
                if index is None:
                    continue
                elapsed = time.perf_counter() - worker.started
                replace_it = False
                if worker.conn in ready:
                    try:
                        _, outcome = worker.conn.recv()
                        replace_it = outcome.failure in RECYCLE
                        kill = False
                    except (EOFError, OSError):  # died mid-case
                        worker.process.join(timeout=5)
                        outcome = exit_outcome(worker.process.exitcode, elapsed)
                        replace_it = kill = True
                elif elapsed >= timeout_s:
                    outcome = Outcome("failed", "timeout", f"over {timeout_s:g} s", elapsed)
                    replace_it = kill = True
                else:
                    continue
                results[index] = outcome
                worker.index = None
                if replace_it:
                    stop_worker(worker, kill=kill)
                    pool[slot] = start_worker(memory_mib, families)
                if progress and len(results) % step == 0:
                    failed = sum(1 for o in results.values() if not o.ok)
                    print(
                        f"  {len(results)}/{len(indices)} cases, {failed} failed",
                        file=sys.stderr,
                        flush=True,
                    )
    finally:
        for worker in pool:
            stop_worker(worker, kill=worker.index is not None)
    return results


def safe_case(seed: int, index: int, families: tuple[str, ...] | None) -> FuzzCase | None:
    try:
        return case_for_seed(seed, index, families)
    except Exception:
        return None


def percentile(values: Sequence[float], fraction: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return 0.0
    return ordered[min(len(ordered) - 1, max(0, math.ceil(fraction * len(ordered)) - 1))]


def report(
    results: dict[int, Outcome],
    *,
    seed: int,
    families: tuple[str, ...] | None,
    show: int,
    wall_s: float,
    header: str,
) -> int:
    """Print the table; the number of failed cases."""
    outcomes = list(results.values())
    failed = {i: o for i, o in sorted(results.items()) if not o.ok}
    verdicts = Counter(o.verdict for o in outcomes if o.ok)
    kinds = Counter(o.failure for o in failed.values())
    seconds = [o.seconds for o in outcomes]
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    max_rss_kib = max([children, *(o.max_rss_kib for o in outcomes)])
    ok = len(outcomes) - len(failed)

    print(header)
    print()
    summary: list[list[object]] = [
        ["cases tried", len(outcomes)],
        ["ok", f"{ok} (checked {verdicts['checked']}, rejected {verdicts['rejected']})"],
        ["failed", len(failed)],
        *([f"failed: {kind}", count] for kind, count in kinds.most_common()),
        [
            "seconds per case",
            f"max {max(seconds, default=0):.3f}, p99 {percentile(seconds, 0.99):.3f}, "
            f"median {statistics.median(seconds) if seconds else 0:.4f}",
        ],
        ["max RSS", f"{max_rss_kib / 1024:.0f} MiB"],
        [
            "largest output",
            f"{max((o.output_chars for o in outcomes), default=0)} chars "
            "(a rejection's text or a result's JSON)",
        ],
        ["wall clock", f"{wall_s:.1f} s"],
    ]
    print(markdown_table(["", "value"], summary))

    by_family: dict[str, list[tuple[FuzzCase | None, Outcome]]] = defaultdict(list)
    for index, outcome in results.items():
        case = safe_case(seed, index, families)
        by_family[case.family if case else "(generator bug)"].append((case, outcome))
    print()
    table = [
        [
            family,
            len(rows),
            sum(1 for _, o in rows if o.ok and o.verdict == "checked"),
            sum(1 for _, o in rows if o.ok and o.verdict == "rejected"),
            sum(1 for _, o in rows if not o.ok),
            max(o.seconds for _, o in rows),
        ]
        for family, rows in sorted(by_family.items())
    ]
    header_row = ["family", "cases", "checked", "rejected", "failed", "max s"]
    print(markdown_table(header_row, table, digits=2))

    if failed:
        # One input per distinct failure first (kind and error text), then the next ones.
        firsts: dict[tuple[str | None, str], int] = {}
        for index, outcome in failed.items():
            firsts.setdefault((outcome.failure, outcome.detail[:80]), index)
        shown = list(firsts.values())[:show]
        shown += [i for i in failed if i not in shown][: show - len(shown)]
        print()
        print(
            f"failing inputs ({len(shown)} of {len(failed)}; {len(firsts)} distinct errors, "
            "one of each first):"
        )
        for index in sorted(shown):
            outcome = failed[index]
            case = safe_case(seed, index, families)
            where = (
                f"{case.family}, durable={case.durable}, catalog={case.with_catalog}, "
                f"max_steps={case.max_steps}"
                if case
                else "generator bug"
            )
            print(f"- case {index} [{where}] {outcome.failure} after {outcome.seconds:.2f} s")
            print(f"    error: {outcome.detail[:500]}")
            print(f"    input: {describe(case.raw, 400) if case else '-'}")
            print(f"    again: python -m bench.fuzz --seed {seed} --only {index}")
    return len(failed)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--count", type=int, default=10_000, help="cases to run (10,000)")
    parser.add_argument("--seed", type=int, default=0, help="case seed (0)")
    parser.add_argument("--timeout-s", type=float, default=5.0, help="wall clock per case (5)")
    parser.add_argument("--memory-mib", type=int, default=1024, help="RLIMIT_AS per worker")
    parser.add_argument("--workers", type=int, default=2, help="worker processes (2)")
    parser.add_argument("--show", type=int, default=5, help="failing inputs to print (5)")
    parser.add_argument("--only", type=int, action="append", help="run only this case index")
    parser.add_argument(
        "--family", action="append", choices=sorted(FAMILIES), help="only these generators"
    )
    parser.add_argument("--quiet", action="store_true", help="no progress lines")
    args = parser.parse_args(argv)
    families = tuple(args.family) if args.family else None
    indices = list(args.only) if args.only else list(range(args.count))

    baseline_mib = address_space_bytes() / MIB
    if baseline_mib > args.memory_mib / 2:
        print(
            f"warning: the worker starts at {baseline_mib:.0f} MiB of address space, "
            f"over half of --memory-mib {args.memory_mib}",
            file=sys.stderr,
        )
    started = time.perf_counter()
    load_start = os.getloadavg()[0]
    results = run_cases(
        indices,
        seed=args.seed,
        workers=args.workers,
        timeout_s=args.timeout_s,
        memory_mib=args.memory_mib,
        families=families,
        progress=not args.quiet and len(indices) >= 100,
    )
    header = (
        "## Fuzz: hostile plans, each in a limited process\n\n"
        f"`{command_line('bench.fuzz', argv)}`\n\n"
        + machine_line(
            load_start,
            extra=f"{len(indices)} cases, seed {args.seed}, {args.workers} workers, per case "
            f"{args.timeout_s:g} s and {args.memory_mib} MiB (workers start at "
            f"{baseline_mib:.0f} MiB)",
        )
    )
    if args.only:
        for index in indices:
            print(f"case {index}: {describe(case_for_seed(args.seed, index, families).raw, 4000)}")
        print()
    failures = report(
        results,
        seed=args.seed,
        families=families,
        show=len(indices) if args.only else args.show,
        wall_s=time.perf_counter() - started,
        header=header,
    )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
