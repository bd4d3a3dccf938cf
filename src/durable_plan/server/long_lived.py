"""A long-running worker's start-up objects, kept out of every later garbage collection.

A worker imports the SDK, Strands, pydantic's schemas and the tools, then runs for days.
Python's cyclic collector scans the oldest generation again whenever enough young objects
survived, and each such scan walks every start-up object. In ``bench.throughput``'s worker
(100 plans at once) collections took 0.26 ms of CPU per plan step and 0.09 per bare
Temporal step; with the start-up objects frozen, 0.10-0.14 and 0.02 (a plan keeps more objects
alive per step than a bare activity: its ledger, its events, its checked plan, so more of
its objects survive into the older generations, each scan of which walked everything).
``gc.freeze`` moves what exists now into a generation no collection scans (CPython added
it for processes that fork, whose start-up objects should stay untouched; the same keeps a
long-lived worker's collections off them). Reference counting still frees every object as before;
only a reference cycle among the frozen objects that later became garbage would stay.

A process-wide setting, so the library never makes it on its own: ``worker.py`` and
``durable-plan worker`` call ``freeze_startup_objects`` once their worker is built, and a
worker process of your own may do the same.
"""

from __future__ import annotations

import gc


def freeze_startup_objects() -> int:
    """Collect once, then freeze what is left; returns how many objects are frozen.

    Call it when the worker is built, before it polls: what the process imported and set
    up is what it keeps for its life."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()
