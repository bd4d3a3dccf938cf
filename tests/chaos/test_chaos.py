"""A CI-sized chaos run: mixed plans, random worker kills, one server restart.

``python -m bench.chaos`` runs the same harness with larger counts and prints the report.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.chaos_harness import run_chaos

pytestmark = pytest.mark.chaos


async def test_chaos_loses_nothing_and_the_helper_keeps_effects_single(tmp_path: Path) -> None:
    report = await run_chaos(tmp_path, plans=12, kills=3, restart_server=True, seed=7)
    print("\n".join(report.lines()))
    assert report.lost == 0 and report.workflows_failed == {}
    assert report.completed_ok == 10
    assert report.completed_with_failed_steps == {"failing": 2}, "only the broken tool fails"
    assert report.duplicate_effects_once == 0
    assert report.rerun_after_recorded == 0
    assert report.kills == 3 and report.server_restarts == 1
