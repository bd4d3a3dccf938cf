"""Load: many mixed plans at once on one worker all complete (``bench/load.py`` runs 200)."""

from __future__ import annotations

from durable_plan.server.devserver import DevServer
from tests.support.load_harness import run_load


async def test_forty_mixed_plans_at_once_all_complete(
    dev_server: DevServer, task_queue: str
) -> None:
    report = await run_load(dev_server, 40, task_queue)
    print("\n".join(report.lines()))
    assert report.completed_ok == 40 and report.stuck == 0
