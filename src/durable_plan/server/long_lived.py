"""A long-running worker's garbage collector: start-up objects frozen, young objects
collected in larger batches.

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

The youngest generation is then collected every ``YOUNG_GENERATION`` net allocations of
container objects instead of Python's 700. Each workflow in the worker's cache holds a few
hundred live objects between its activations, and a workflow's state becomes garbage only
when the SDK's instance, a reference cycle, is collected. A young collection walks what is
young, whether alive or garbage, and moves the living to the middle generation, which is
walked again ten young collections later, and that walk is the expensive one (50-65 ms with
a hundred plans in flight). So the threshold decides how many of a plan's objects are seen
alive: at 700 nearly all, many times; at 10,000 a plan of a hundred-at-once round still lived
through one or two young collections (0.04-0.06 ms of collection CPU per plan step, of which
half in the middle generation's walks); at 50,000 most plans have ended before the first
young collection sees them, and the middle generation stays small. ``bench.throughput`` (full
run, up to 200 plans at once): 0.018-0.033 ms per plan step at 50,000, 0.042-0.064 at 10,000,
0.09-0.12 at 700 (bare Temporal: 0.002-0.005). The price: each young collection takes about
16 ms where it took 4 (one every thousand plan steps or so at that load), and the worker's peak
resident memory is 5-20 MiB higher (171-197 MiB where 167-176, 200 plans at once).

A process-wide setting, so the library never makes it on its own: ``worker.py`` and
``durable-plan worker`` call ``freeze_startup_objects`` once their worker is built, and a
worker process of your own may do the same.
"""

from __future__ import annotations

import gc

YOUNG_GENERATION = 50_000
"""Net allocations of container objects between two collections of the youngest generation."""


def freeze_startup_objects() -> int:
    """Collect once, then freeze what is left; returns how many objects are frozen. Raises
    the youngest generation's threshold to ``YOUNG_GENERATION`` (never lowers it).

    Call it when the worker is built, before it polls: what the process imported and set
    up is what it keeps for its life."""
    young, middle, old = gc.get_threshold()
    if young and young < YOUNG_GENERATION:  # 0 is "collection disabled": left as it is
        gc.set_threshold(YOUNG_GENERATION, middle, old)
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()
