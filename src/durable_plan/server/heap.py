"""A worker process's start-up objects, kept out of the garbage collector's full passes.

A worker imports Temporal, Strands, pydantic and boto3: about 145,000 objects that live
as long as the process. CPython's full (generation 2) collection walks every one of
them each time it runs, about 60 ms here, and it runs after enough objects have lived
through the younger collections, which a busy worker's in-flight workflows do all the
time. A plan step keeps more small objects alive while it runs than a bare activity (its
ledger line, its events, its binding context), so it triggers more of those passes:
``bench.throughput`` measured 0.52 s of collection in a plan worker's 8.4 s of CPU
against 0.23 s in 6.4 s for bare Temporal (issue 31).

``gc.freeze()`` moves what exists into a permanent generation the collector skips; what
is made later is collected as before. It is a process-wide setting, so the library's
worker builders (``plan_worker``, ``tool_worker``) never call it: the process's entry
point does, once, after its imports and before it polls (``worker.py``, the
``durable-plan worker`` command, the benchmark's worker). An application embedding the
plan worker can call it the same way.
"""

from __future__ import annotations

import gc

__all__ = ["freeze_startup_objects"]


def freeze_startup_objects() -> int:
    """Collect once, then freeze what is left (the imports' objects); return their count.

    Collecting first keeps garbage made during start-up out of the frozen set, which is
    never freed. Calling it again later freezes whatever lives then as well: call it once,
    before the worker starts polling."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()
