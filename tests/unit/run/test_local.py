"""The in-process runner: every shared case, plus what only an in-process run can show."""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from durable_plan.language.errors import PlanRejected
from durable_plan.language.plan import Plan, PlanResult
from durable_plan.local.runner import execute_plan
from tests.support.case_tools import CASE_TOOLS, case_invoker
from tests.support.plan_cases import CASES_BY_NAME, PLAN_CASES, PlanCase

Invoker = Callable[[str, dict[str, Any]], Awaitable[Any]]


def assert_case(case: PlanCase, result: PlanResult) -> None:
    """What every runner must agree on for a shared case."""
    assert [o.id for o in result.ledger] == [s["id"] for s in case.plan["steps"]]
    assert {o.id: o.status for o in result.ledger} == case.statuses
    if case.returned is not None:
        assert result.returned == case.returned
    assert result.final is case.final
    if case.levels is not None:
        assert result.levels == case.levels
    for step_id, fragments in case.errors.items():
        error = result.outcome(step_id).error or ""
        for fragment in fragments:
            assert fragment in error, f"{step_id}: {fragment!r} not in {error!r}"
    for outcome in result.ledger:
        if outcome.status in ("failed", "skipped"):
            assert outcome.error, f"{outcome.id} is {outcome.status} without a reason"
        if outcome.status == "ok":
            assert outcome.error is None
    tools = {s["id"]: s["tool"] for s in case.plan["steps"]}
    assert {o.id: o.tool for o in result.ledger} == tools


class Recorder:
    """Wraps an invoker; records calls, start/end times and concurrency."""

    def __init__(self, inner: Invoker = case_invoker) -> None:
        self.inner = inner
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.events: list[tuple[str, str, float]] = []
        self.active = 0
        self.max_active = 0

    async def __call__(self, name: str, args: dict[str, Any]) -> Any:
        self.calls.append((name, args))
        self.active += 1
        self.max_active = max(self.max_active, self.active)
        label = str(args.get("value", name))
        self.events.append(("start", label, time.perf_counter()))
        try:
            return await self.inner(name, args)
        finally:
            self.active -= 1
            self.events.append(("end", label, time.perf_counter()))

    def at(self, kind: str, label: str) -> float:
        return next(t for k, n, t in self.events if k == kind and n == label)


# -- the shared table --------------------------------------------------------------


@pytest.mark.parametrize("case", PLAN_CASES, ids=lambda c: c.name)
async def test_plan_case(case: PlanCase) -> None:
    result = await execute_plan(case.plan, case_invoker)
    assert_case(case, result)


@pytest.mark.parametrize("case", PLAN_CASES, ids=lambda c: c.name)
async def test_plan_case_tools_only_called_for_steps_that_ran(case: PlanCase) -> None:
    recorder = Recorder()
    result = await execute_plan(case.plan, recorder)
    invoked = sorted(name for name, _ in recorder.calls)
    ran = sorted(
        o.tool
        for o in result.ledger
        if o.status == "ok" or (o.status == "failed" and o.attempts > 0)
    )
    assert invoked == ran


def test_case_table_uses_only_case_tools() -> None:
    for case in PLAN_CASES:
        for step in case.plan["steps"]:
            assert step["tool"] in CASE_TOOLS, (case.name, step["tool"])
        json.dumps(case.plan)  # plain JSON, so a durable runner can ship it


# -- seed behaviours, in detail --------------------------------------------------------


async def test_chain_passes_bound_values_to_tools() -> None:
    recorder = Recorder()
    await execute_plan(CASES_BY_NAME["chain_of_3"].plan, recorder)
    assert recorder.calls == [
        ("look_up_monster", {"name": "goblin"}),
        ("roll_attack", {"armour": 15}),
        ("apply_damage", {"monster": "goblin", "damage": 6}),
    ]


async def test_fan_in_builds_one_array_from_three_steps() -> None:
    recorder = Recorder()
    await execute_plan(CASES_BY_NAME["fan_out_fan_in_inline_array"].plan, recorder)
    assert ("total", {"damages": [6, 0, 6]}) in recorder.calls


async def test_combat_round_shape() -> None:
    case = CASES_BY_NAME["combat_round_three_players"]
    recorder = Recorder()
    result = await execute_plan(case.plan, recorder)
    assert len(result.ledger) == 12
    assert len(result.levels) == 6
    assert [len(level) for level in result.levels] == [1, 3, 3, 3, 1, 1]
    assert ("tally_round", {"damages": [8, 10, 0]}) in recorder.calls
    # ten of the twelve results never reach the model
    assert sorted(result.returned) == ["narrate", "tally"]


async def test_inference_passes_saved() -> None:
    final = await execute_plan(CASES_BY_NAME["chain_of_3"].plan, case_invoker)
    assert final.inference_passes_saved == 3  # a plain loop needs 4 round trips, the plan 1
    not_final = await execute_plan(CASES_BY_NAME["chain_not_final"].plan, case_invoker)
    assert not_final.inference_passes_saved == 2


async def test_result_properties() -> None:
    ok = await execute_plan(CASES_BY_NAME["when_threshold_0_8_escalates"].plan, case_invoker)
    assert ok.ok and ok.failures == []
    bad = await execute_plan(CASES_BY_NAME["binding_matched_no_value"].plan, case_invoker)
    assert not bad.ok
    assert [o.id for o in bad.failures] == ["attack"]
    with pytest.raises(KeyError):
        bad.outcome("nope")


async def test_misspelled_field_inside_a_comparison_runs_neither_side() -> None:
    """JSONata alone says `missing = "x"` is false and would run the other branch."""
    plan = CASES_BY_NAME["when_matched_no_value_runs_neither_side"].plan
    steps = [dict(s) for s in plan["steps"]]
    steps[2]["when"] = 'steps.triage.dept = "treasury"'
    steps[3]["when"] = '$not(steps.triage.dept = "treasury")'
    result = await execute_plan({**plan, "steps": steps}, case_invoker)
    assert result.outcome("escalate").status == "failed"
    assert result.outcome("refund").status == "failed"
    assert "when matched no value: steps.triage has keys desk" in (
        result.outcome("refund").error or ""
    )


async def test_misspelled_field_inside_an_array_fails_instead_of_dropping() -> None:
    plan = {
        "steps": [
            {"id": "a", "tool": "echo", "args": {"value": {"damage": 6}}},
            {"id": "b", "tool": "echo", "args": {"value": {"damage": 4}}},
            {"id": "t", "tool": "total", "bind": {"damages": "[steps.a.damage, steps.b.dmg]"}},
        ]
    }
    result = await execute_plan(plan, case_invoker)
    assert result.outcome("t").status == "failed"
    assert "steps.b has keys damage" in (result.outcome("t").error or "")


async def test_conditionals_and_exists_may_read_absent_fields() -> None:
    plan = {
        "steps": [
            {"id": "a", "tool": "echo", "args": {"value": {"damage": 6}}},
            {"id": "b", "tool": "echo", "bind": {"value": "steps.a.bonus ?: 0"}},
            {"id": "c", "tool": "echo", "bind": {"value": "$exists(steps.a.bonus)"}},
            {"id": "d", "tool": "echo", "bind": {"value": "steps.a.bonus ? 1 : 2"}},
        ]
    }
    result = await execute_plan(plan, case_invoker)
    assert result.returned == {"a": {"damage": 6}, "b": 0, "c": False, "d": 2}


# -- input forms ---------------------------------------------------------------------


async def test_accepts_a_plan_object_a_dict_and_a_json_string() -> None:
    raw = CASES_BY_NAME["chain_of_3"].plan
    results = [
        await execute_plan(Plan.model_validate(raw), case_invoker),
        await execute_plan(raw, case_invoker),
        await execute_plan(json.dumps(raw), case_invoker),
    ]
    assert results[0].returned == results[1].returned == results[2].returned


async def test_accepts_any_async_callable() -> None:
    class Tools:
        async def __call__(self, name: str, args: dict[str, Any]) -> Any:
            return {"tool": name, **args}

    result = await execute_plan({"steps": [{"id": "a", "tool": "t", "args": {"x": 1}}]}, Tools())
    assert result.returned == {"a": {"tool": "t", "x": 1}}


async def test_rejected_plan_invokes_nothing() -> None:
    recorder = Recorder()
    plan = {
        "steps": [
            {"id": "a", "tool": "echo", "args": {"value": 1}},
            {"id": "b", "tool": "echo", "bind": {"value": "steps.nope"}},
        ]
    }
    with pytest.raises(PlanRejected) as info:
        await execute_plan(plan, recorder)
    assert info.value.codes == ["dangling_reference"]
    assert recorder.calls == []


async def test_rejected_for_an_unknown_tool_with_a_catalog() -> None:
    recorder = Recorder()
    plan = {"steps": [{"id": "a", "tool": "ecko", "args": {"value": 1}}]}
    with pytest.raises(PlanRejected) as info:
        await execute_plan(plan, recorder, catalog=CASE_TOOLS)
    assert "did you mean 'echo'" in str(info.value)
    assert recorder.calls == []


async def test_unknown_tool_without_a_catalog_fails_the_step() -> None:
    result = await execute_plan({"steps": [{"id": "a", "tool": "ecko"}]}, case_invoker)
    assert result.outcome("a").status == "failed"
    assert "KeyError" in (result.outcome("a").error or "")


async def test_step_limit_is_configurable() -> None:
    steps = [{"id": f"s{n}", "tool": "echo", "args": {"value": n}} for n in range(40)]
    with pytest.raises(PlanRejected, match="limit is 32"):
        await execute_plan({"steps": steps}, case_invoker)
    result = await execute_plan({"steps": steps}, case_invoker, max_steps=40)
    assert result.ok and len(result.returned) == 40


async def test_in_process_allows_now() -> None:
    plan = {"steps": [{"id": "a", "tool": "echo", "bind": {"value": "$now()"}}]}
    result = await execute_plan(plan, case_invoker)
    value = result.returned["a"]
    assert isinstance(value, str) and value.startswith("20")


async def test_eval_refused() -> None:
    plan = {"steps": [{"id": "a", "tool": "echo", "bind": {"value": "$eval('1+1')"}}]}
    with pytest.raises(PlanRejected, match=r"\$eval"):
        await execute_plan(plan, case_invoker)


# -- results that are not JSON ----------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ({1, 2}, "set"),
        (math.nan, "nan"),
        (math.inf, "inf"),
        ({1: "a"}, "not a string"),
        ({"deep": [object()]}, "object"),
        (b"bytes", "bytes"),
    ],
    ids=["set", "nan", "inf", "int-key", "nested-object", "bytes"],
)
async def test_non_json_results_fail_the_step(value: Any, fragment: str) -> None:
    async def invoker(name: str, args: dict[str, Any]) -> Any:
        return value

    result = await execute_plan({"steps": [{"id": "a", "tool": "t"}]}, invoker)
    outcome = result.outcome("a")
    assert outcome.status == "failed"
    assert "non-JSON" in (outcome.error or "")
    assert fragment in (outcome.error or "")
    assert result.returned == {}


async def test_tuples_become_lists() -> None:
    async def invoker(name: str, args: dict[str, Any]) -> Any:
        return {"pair": (1, 2)}

    result = await execute_plan({"steps": [{"id": "a", "tool": "t"}]}, invoker)
    assert result.returned == {"a": {"pair": [1, 2]}}


async def test_tool_exception_is_a_step_failure_with_class_and_message() -> None:
    result = await execute_plan(
        {"steps": [{"id": "a", "tool": "fail", "args": {"message": "kaput"}}]}, case_invoker
    )
    assert result.outcome("a").error == "RuntimeError: kaput"


async def test_tools_own_timeout_error_is_an_ordinary_failure() -> None:
    async def invoker(name: str, args: dict[str, Any]) -> Any:
        raise TimeoutError("db read timed out")

    result = await execute_plan({"steps": [{"id": "a", "tool": "t"}]}, invoker)
    assert result.outcome("a").error == "TimeoutError: db read timed out"


# -- concurrency and barrier-free scheduling -------------------------------------------


def _sleep(sid: str, seconds: float, **fields: Any) -> dict[str, Any]:
    return {
        "id": sid,
        "tool": "sleep_echo",
        "args": {"seconds": seconds, "value": sid},
        **fields,
    }


async def test_independent_steps_run_concurrently() -> None:
    started = time.perf_counter()
    result = await execute_plan({"steps": [_sleep("a", 0.2), _sleep("b", 0.2)]}, case_invoker)
    assert time.perf_counter() - started < 0.35
    assert result.ok
    assert result.outcome("a").duration_ms >= 150


async def test_barrier_free_a_slow_branch_does_not_delay_a_fast_chain() -> None:
    recorder = Recorder()
    plan = {
        "steps": [
            _sleep("slow", 0.3),
            _sleep("fast1", 0.01),
            _sleep("fast2", 0.01, after=["fast1"]),
            _sleep("fast3", 0.01, after=["fast2"]),
            _sleep("join", 0.0, after=["slow", "fast3"]),
        ]
    }
    result = await execute_plan(plan, recorder)
    assert result.ok
    assert result.levels == [["slow", "fast1"], ["fast2"], ["fast3"], ["join"]]
    # fast2 is level 1 but does not wait for the rest of level 0 (slow).
    assert recorder.at("start", "fast2") < recorder.at("end", "slow")
    assert recorder.at("end", "fast3") < recorder.at("end", "slow")
    assert recorder.at("start", "join") >= recorder.at("end", "slow")


async def test_max_parallel_is_respected() -> None:
    recorder = Recorder()
    steps = [_sleep(f"s{n}", 0.02) for n in range(6)]
    result = await execute_plan({"steps": steps, "max_parallel": 2}, recorder)
    assert result.ok
    assert recorder.max_active == 2
    unbounded = Recorder()
    await execute_plan({"steps": steps}, unbounded)
    assert unbounded.max_active == 6


async def test_max_parallel_one_runs_in_plan_order() -> None:
    recorder = Recorder()
    steps = [_sleep(f"s{n}", 0.0) for n in range(5)]
    await execute_plan({"steps": steps, "max_parallel": 1}, recorder)
    assert [label for kind, label, _ in recorder.events if kind == "start"] == [
        f"s{n}" for n in range(5)
    ]
    assert recorder.max_active == 1


async def test_fail_fast_lets_running_steps_finish_and_skips_the_rest() -> None:
    plan = {
        "steps": [
            {"id": "boom", "tool": "fail", "args": {"message": "kaput"}},
            _sleep("running", 0.05),
            _sleep("later", 0.0, after=["running"]),
        ]
    }
    result = await execute_plan(plan, case_invoker)
    assert {o.id: o.status for o in result.ledger} == {
        "boom": "failed",
        "running": "ok",
        "later": "skipped",
    }


# -- bounds: timeouts and cancellation -----------------------------------------------------


async def test_step_timeout_fails_a_hung_step() -> None:
    started = time.perf_counter()
    plan = {"steps": [_sleep("hung", 30, timeout_s=0.05), _sleep("fine", 0.0)]}
    result = await execute_plan({**plan, "on_error": "continue"}, case_invoker)
    assert time.perf_counter() - started < 2
    assert result.outcome("hung").status == "failed"
    assert "timed out after 0.05 s" in (result.outcome("hung").error or "")
    assert result.outcome("fine").status == "ok"


async def test_per_tool_default_timeout() -> None:
    started = time.perf_counter()
    result = await execute_plan(
        {"steps": [_sleep("hung", 30)]}, case_invoker, tool_timeouts={"sleep_echo": 0.05}
    )
    assert time.perf_counter() - started < 2
    assert "timed out" in (result.outcome("hung").error or "")


async def test_global_default_timeout() -> None:
    result = await execute_plan(
        {"steps": [_sleep("hung", 30)]}, case_invoker, default_timeout_s=0.05
    )
    assert "timed out" in (result.outcome("hung").error or "")


async def test_step_timeout_overrides_tool_default() -> None:
    result = await execute_plan(
        {"steps": [_sleep("patient", 0.1, timeout_s=5)]},
        case_invoker,
        tool_timeouts={"sleep_echo": 0.01},
    )
    assert result.outcome("patient").status == "ok"


async def test_cancelling_execute_plan_cancels_running_steps() -> None:
    started = asyncio.Event()
    cancelled: list[str] = []

    async def invoker(name: str, args: dict[str, Any]) -> Any:
        started.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.append(name)
            raise
        return None

    plan = {"steps": [{"id": "a", "tool": "one"}, {"id": "b", "tool": "two"}]}
    task = asyncio.create_task(execute_plan(plan, invoker))
    await asyncio.wait_for(started.wait(), 2)
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert sorted(cancelled) == ["one", "two"]


async def test_durations_are_measured() -> None:
    result = await execute_plan({"steps": [_sleep("a", 0.05)]}, case_invoker)
    assert result.outcome("a").duration_ms >= 40
    assert result.outcome("a").attempts == 1


async def test_dynamic_reads_see_exactly_the_steps_listed_in_after() -> None:
    plan = {
        "steps": [
            {"id": "a", "tool": "echo", "args": {"value": 1}},
            {"id": "b", "tool": "echo", "args": {"value": 2}},
            {"id": "c", "tool": "echo", "args": {"value": 3}, "after": ["a", "b"]},
            {"id": "d", "tool": "echo", "bind": {"value": "$count($keys(steps))"}, "after": ["c"]},
            {"id": "e", "tool": "echo", "bind": {"value": "$sum(steps.*)"}, "after": ["a", "c"]},
        ],
        "returns": ["d", "e"],
    }
    result = await execute_plan(plan, case_invoker)
    # a and b have landed too, but d declared only c: what it reads cannot depend on timing
    assert result.returned == {"d": 1, "e": 4}


async def test_a_binding_explains_with_the_steps_it_depends_on() -> None:
    plan = {
        "steps": [
            {"id": "a", "tool": "echo", "args": {"value": {"k": 1}}},
            {"id": "b", "tool": "echo", "args": {"value": 2}},
            {"id": "c", "tool": "echo", "bind": {"value": "steps.a.q"}, "after": ["b"]},
        ]
    }
    result = await execute_plan(plan, case_invoker)
    assert result.outcome("c").error == "binding 'value' matched no value: steps.a has keys k"
