"""``bench.throughput``'s worker: its CPU split into its Python threads' and the rest, its
garbage collections reported, its start-up objects frozen as worker.py freezes its own."""

from __future__ import annotations

import subprocess
import sys

from temporalio.client import Client

from bench.throughput import STEPS, Sample, WorkerProcess, one_round, paired_range

SPIN = """
import sys, threading, time
def spin(seconds):
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass
t = threading.Thread(target=spin, args=(0.3,))
t.start(); t.join()          # a Python thread of its own, named like the process
spin(0.3)
print("spun", flush=True)
sys.stdin.read()
"""


def test_python_threads_cpu_is_counted_and_nothing_else() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", SPIN],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    worker = WorkerProcess(proc, "unused")
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == b"spun"
        split = worker.cpu_by_thread_kind()
        assert split["python"] >= 0.25  # the main thread's spin
        assert split["core"] == 0.0  # no Rust core here
        # The ended thread's CPU is the process's, but no live thread's: a round's figure
        # is a difference of two samples of the worker's threads, which live as long as it.
        assert worker.cpu_s() - split["python"] >= 0.25
    finally:
        proc.kill()
        proc.wait()


async def test_a_bench_worker_reports_its_collections_per_step(
    client: Client, temporal_target: str
) -> None:
    """The bench's worker runs plans and bare DAGs, and says on the way out how many
    collections of each generation it ran and their CPU, which the bench divides by the
    steps it gave that worker. (Without the worker's collector settings: at Python's 700
    objects a young collection is sure to run in 24 steps; at 50,000 it may not.)"""
    worker = WorkerProcess.start(temporal_target, {"gc_freeze": False})
    try:
        await one_round(client, worker, "plan", 2)
        await one_round(client, worker, "bare-l", 1)
    finally:
        report = worker.stop()
    assert worker.steps == 3 * STEPS
    assert report is not None
    assert len(report.collections) == len(report.seconds) == 3
    assert report.collections[0] > 0  # 24 steps of plans and a DAG allocate past 700 objects
    assert sum(report.seconds) > 0


async def test_a_bench_worker_takes_its_freeze_switch_out_of_the_worker_options(
    client: Client, temporal_target: str
) -> None:
    """``gc_freeze`` is the bench's own option: popped before the rest reach ``plan_worker``
    (which would refuse an unknown keyword), with or without the freeze."""
    worker = WorkerProcess.start(temporal_target, {"gc_freeze": False})
    try:
        await one_round(client, worker, "bare", 1)
    finally:
        report = worker.stop()
    assert report is not None and worker.steps == STEPS


FREEZE = """
import gc, sys
from durable_plan.server.long_lived import YOUNG_GENERATION, freeze_startup_objects
before = int(sys.argv[1])
gc.set_threshold(before, 10, 10)
frozen = freeze_startup_objects()
class Cycle:
    pass
a, b = Cycle(), Cycle()
a.other, b.other = b, a
del a, b
found = gc.collect()
print(frozen, gc.get_freeze_count() == frozen, found, gc.get_threshold()[0], YOUNG_GENERATION)
"""


def _freeze_in_a_process(threshold_before: int) -> list[str]:
    return subprocess.run(
        [sys.executable, "-c", FREEZE, str(threshold_before)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.split()


def test_start_up_objects_are_frozen_and_later_cycles_still_collected() -> None:
    """In a process of its own: freezing is for the whole process (worker.py's set-up)."""
    out = _freeze_in_a_process(700)  # Python's default before 3.13
    assert int(out[0]) > 1000  # the interpreter's and the package's objects
    assert out[1] == "True"
    assert int(out[2]) >= 2  # the two objects of a cycle made afterwards
    assert int(out[3]) == int(out[4]) == 50_000  # young objects collected in larger batches


def test_the_young_generation_threshold_is_only_raised() -> None:
    """A process that chose a larger batch (or disabled collection: 0) keeps its choice."""
    assert int(_freeze_in_a_process(80_000)[3]) == 80_000
    assert int(_freeze_in_a_process(0)[3]) == 0


def test_the_spread_pairs_each_repeats_two_rounds() -> None:
    """Repeat by repeat, bare's wall time over the plan's (plans/s of the plan over bare's),
    never a plan round against another repeat's bare round."""
    ours = [Sample(2.0, 0, 0), Sample(1.0, 0, 0), Sample(4.0, 0, 0)]
    bare = [Sample(1.8, 0, 0), Sample(1.0, 0, 0), Sample(2.0, 0, 0)]
    assert paired_range(ours, bare) == (0.5, 1.0)
