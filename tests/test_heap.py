"""A worker process freezes its start-up objects out of the collector's full passes.

Run in a child interpreter: freezing is process-wide, and the test process must not be.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PROBE = textwrap.dedent(
    """
    import gc

    import durable_plan.temporal.worker  # what a worker process imports
    from durable_plan.server.heap import freeze_startup_objects

    class Node:
        pass

    def cycle():
        a, b = Node(), Node()
        a.other, b.other = b, a

    cycle()  # start-up garbage: collected first, not frozen forever
    frozen = freeze_startup_objects()
    assert frozen == gc.get_freeze_count() > 10_000, frozen
    assert not [o for o in gc.get_objects() if type(o).__name__ == "Node"]
    cycle()  # made later: collected as before
    assert gc.collect() >= 2
    assert gc.get_freeze_count() == frozen
    print("ok", frozen)
    """
)


def test_start_up_objects_are_frozen_and_later_garbage_still_collected() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ok ")


def test_every_worker_entry_point_freezes_before_polling() -> None:
    """worker.py, the command line's worker and the benchmark's worker (the figures in the
    README are a worker's as users run it)."""
    for path in ("worker.py", "src/durable_plan/cli/commands/worker.py"):
        text = (ROOT / path).read_text()
        assert text.index("freeze_startup_objects()") < text.index("async with worker:"), path
    bench = (ROOT / "bench/_throughput_worker.py").read_text()
    assert "freeze_startup_objects()" in bench
