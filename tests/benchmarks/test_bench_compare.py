"""bench/compare.py measures real runs: its plans run right on our engine and our plugin.

Only our side (the reference needs its own Python >= 3.12 venv, which the benchmark
builds); nothing here is timed.
"""

from __future__ import annotations

from bench.compare import (
    AGENT_PLANS,
    ENGINE_PLANS,
    agent_ours,
    bench_agents,
    bench_engines,
    expected,
    run_ours,
)


async def test_engine_plans_return_the_expected_values() -> None:
    rows = await bench_engines({"ours": run_ours}, repeats=1)
    assert [r.plan for r in rows] == list(ENGINE_PLANS)
    assert all(r.correct == {"ours": True} for r in rows)
    join = expected(ENGINE_PLANS["fan-32+join"])
    assert join == {"join": {"v": 1, "total": 64, "label": "ok"}}
    assert expected(ENGINE_PLANS["chain-32"])["s31"]["v"] == 32


async def test_agent_turns_run_every_tool_and_answer_with_the_results() -> None:
    rows = await bench_agents({"ours": agent_ours}, repeats=1, tool_s=0.01)
    assert [r.plan for r in rows] == list(AGENT_PLANS)
    assert all(r.correct == {"ours": True} for r in rows)
    assert [r.critical_ms for r in rows] == [10.0, 30.0]
