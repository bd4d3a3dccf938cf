"""Hostile plans run in-process: every evaluation bounded, every run ends in a ledger.

One test per defect of issue 8 that shows without a server: catastrophic regexes,
runaway JSONata, deep values, huge integers, NaN, oversized values; plus the
determinism of the ``steps`` scope's key order. Each asserts the step failed
with a message naming the field and the bound, that later steps behaved as the
plan said, and that the event loop stayed free (a concurrent ticker kept going).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import math
from typing import Any

import pytest

from durable_plan.language.plan import PlanResult
from durable_plan.language.plan_limits import MAX_ERROR_CHARS, ExpressionLimits
from durable_plan.local.runner import execute_plan

CALLS: list[tuple[str, dict[str, Any]]] = []


async def invoker(name: str, args: dict[str, Any]) -> Any:
    CALLS.append((name, args))
    if name == "echo":
        return args.get("value")
    if name == "huge_int":
        return {"n": 10**5000}
    if name == "nan":
        return {"x": math.nan}
    if name == "deep":
        value: Any = 1
        for _ in range(12_000):
            value = [value]
        return value
    if name == "shout":
        raise RuntimeError("x" * 200_000)
    raise KeyError(name)


async def run(plan: dict[str, Any]) -> PlanResult:
    CALLS.clear()
    return await execute_plan(plan, invoker)


def one_binding(source: str, **extra: Any) -> dict[str, Any]:
    return {
        "steps": [
            {"id": "seed", "tool": "echo", "args": {"value": {"n": 1}}},
            {"id": "x", "tool": "echo", "bind": {"value": source}, **extra},
            {"id": "after_x", "tool": "echo", "bind": {"value": "steps.x"}},
        ],
        "on_error": "continue",
    }


HOSTILE = {
    "catastrophic regex": "$contains('" + "a" * 3000 + "!', /^(a+)+$/) and steps.seed.n = 1",
    "tail call forever": "($f := function($n){$f($n+1)}; $f(steps.seed.n))",
    "sum of a 10M range": "$sum([steps.seed.n..10000000])",
    "string doubling": "$reduce([1..40], function($a, $x){$a & $a}, $string(steps.seed.n))",
    "pad to a gigabyte": "$pad($string(steps.seed.n), 1000000000)",
    "integer explosion": "$reduce([1..2000], function($a, $x){$a * $a}, steps.seed.n + 2)",
    "deep value": "$reduce([1..12000], function($a, $x){{'a': $a}}, steps.seed.n)",
    "join of shared refs": "($s := $pad('', 900000, 'x'); $join([$s, $s], $string(steps.seed.n)))",
    "nan": "$number('NaN') + steps.seed.n",
    "distinct of a big array": "$count($distinct([steps.seed.n..40000]))",
}

EXPECTED = {
    "catastrophic regex": "ok",  # RE2: linear time, the answer is simply false
    "distinct of a big array": "ok",  # linear $distinct: 40,000 items (quadratic: 1.6e9 steps)
}


async def ticker(stop: asyncio.Event, ticks: list[float]) -> None:
    loop = asyncio.get_running_loop()
    while not stop.is_set():
        ticks.append(loop.time())
        await asyncio.sleep(0.01)


@pytest.mark.parametrize("name", list(HOSTILE))
async def test_hostile_expression_ends_the_step_not_the_process(name: str) -> None:
    stop, ticks = asyncio.Event(), []  # type: ignore[var-annotated]
    tick = asyncio.create_task(ticker(stop, ticks))
    result = await run(one_binding(HOSTILE[name]))
    stop.set()
    await tick
    outcome = result.outcome("x")
    assert outcome.status == EXPECTED.get(name, "failed"), outcome
    if outcome.status == "failed":
        assert outcome.error is not None
        assert "binding 'value'" in outcome.error or "value" in outcome.error
        assert "limit" in outcome.error or "JSON number" in outcome.error, outcome.error
        assert result.outcome("after_x").status == "skipped"
    else:
        assert result.outcome("after_x").status == "ok"
    # The loop kept running: no single evaluation blocked it for seconds.
    gaps = [b - a for a, b in itertools.pairwise(ticks)]
    assert not gaps or max(gaps) < 3.0
    json.dumps(result.model_dump(mode="json"))


async def test_the_budget_is_plan_wide() -> None:
    # Each binding alone is within max_steps; together they exceed max_plan_steps.
    loop = "$reduce([1..20000], function($a, $x){$a + $x}, steps.seed.n)"
    steps = [{"id": "seed", "tool": "echo", "args": {"value": {"n": 1}}}]
    steps += [{"id": f"s{i}", "tool": "echo", "bind": {"value": loop}} for i in range(12)]
    result = await execute_plan({"steps": steps, "on_error": "continue"}, invoker)
    statuses = [result.outcome(f"s{i}").status for i in range(12)]
    assert statuses[0] == "ok"
    assert "failed" in statuses
    failed = next(o for o in result.ledger if o.status == "failed")
    assert "plan's limit" in (failed.error or "")


async def test_limits_are_configurable_per_run() -> None:
    from durable_plan.check import check_plan
    from durable_plan.run.engine import PlanRun

    checked = check_plan(one_binding("$sum([1..500])"))
    run_ = PlanRun(checked, ExpressionLimits(max_array=100))
    [call] = run_.next_calls()
    run_.record_result(call.step_id, {"n": 1})
    assert run_.next_calls() == []
    assert "array of" in (run_.progress()[1].error or "")


# -- results that are not JSON ------------------------------------------------------------


@pytest.mark.parametrize(
    ("tool", "words"),
    [("huge_int", "64 bits"), ("nan", "finite number"), ("deep", "nested more than")],
)
async def test_a_non_json_result_fails_its_step_and_the_run_returns_a_ledger(
    tool: str, words: str
) -> None:
    plan = {
        "steps": [
            {"id": "a", "tool": tool},
            {"id": "b", "tool": "echo", "bind": {"value": "steps.a"}},
        ]
    }
    result = await run(plan)
    assert result.outcome("a").status == "failed"
    assert words in (result.outcome("a").error or ""), result.outcome("a").error
    assert result.outcome("b").status == "skipped"
    json.dumps(result.model_dump(mode="json"))


async def test_a_long_error_is_cut_in_the_ledger() -> None:
    result = await run({"steps": [{"id": "a", "tool": "shout"}]})
    error = result.outcome("a").error or ""
    assert len(error) <= MAX_ERROR_CHARS
    assert "characters cut" in error
    assert error.startswith("RuntimeError: xxx")


async def test_nan_from_jsonata_never_reaches_a_tool() -> None:
    result = await run(one_binding("$number('NaN')"))
    assert result.outcome("x").status == "failed"
    assert all(name != "echo" or "value" not in a or a["value"] == {"n": 1} for name, a in CALLS)


# -- 7. the steps scope is ordered by the plan, not by a hash seed ------------------------


async def test_the_steps_scope_follows_plan_order() -> None:
    ids = ["zeta", "alpha", "mid", "beta", "omega", "kappa"]
    steps: list[dict[str, Any]] = [{"id": i, "tool": "echo", "args": {"value": i}} for i in ids]
    steps.append(
        {
            "id": "keys",
            "tool": "echo",
            "after": ids,
            "bind": {"value": "{'keys': $keys(steps), 'first': steps.*[0]}"},
        }
    )
    result = await execute_plan({"steps": steps}, invoker)
    assert result.returned["keys"] == {"keys": ids, "first": "zeta"}


async def test_a_tool_raising_cancelled_error_fails_its_step() -> None:
    async def invoke(name: str, args: dict[str, Any]) -> Any:
        if name == "inner":
            raise asyncio.CancelledError()
        return args

    plan = {
        "steps": [{"id": "a", "tool": "inner"}, {"id": "b", "tool": "echo"}],
        "on_error": "continue",
    }
    result = await execute_plan(plan, invoke)
    assert result.outcome("a").status == "failed"
    assert "CancelledError" in (result.outcome("a").error or "")
    assert result.outcome("b").status == "ok"


async def test_cancelling_the_plan_still_cancels_it() -> None:
    started = asyncio.Event()

    async def invoke(name: str, args: dict[str, Any]) -> Any:
        started.set()
        await asyncio.sleep(30)

    task = asyncio.create_task(execute_plan({"steps": [{"id": "a", "tool": "slow"}]}, invoke))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
