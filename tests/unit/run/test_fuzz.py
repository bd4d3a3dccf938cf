"""Fuzz suite: hostile, model-written plans never surprise the caller or stall a worker.

A plan is written by a model, so everything in it is untrusted: its shape, its
sizes, its numbers and its JSONata. For every input:

* ``check_plan`` returns a ``CheckedPlan`` or raises ``PlanRejected``, nothing else;
* ``execute_plan`` returns a ``PlanResult`` or raises ``PlanRejected``; when it
  raises, no tool was invoked; every ledger status is ok, failed, skipped or
  not_taken; and the result is plain JSON (``json.dumps(..., allow_nan=False)``);
* each case uses less than a generous ``CASE_TIMEOUT_S`` of CPU time (the real
  bound is measured by ``python -m bench.fuzz``), and a child still running after
  ``HANG_TIMEOUT_S`` of wall clock is killed: a hang. CPU time, because a case's wall
  clock is its neighbours' as much as its own: the heaviest named cases use about 6 s
  of CPU, and took over 10 s of wall clock while other test workers shared the cores.

Every example runs in a forked child with a memory limit and a kill timer, so a
hang, a runaway allocation or a crash is a failing example with its input, never
a hung or killed test session.

The generators, the oracles and the isolation live in ``tests/support/fuzz_harness.py``,
which ``bench/fuzz.py`` imports too, so the bench draws the very same cases from a
seed; Hypothesis draws the seed (``st.randoms`` would bias every choice toward the
first) and does not shrink: a failing example is reported with the call that makes
it again. Named cases (``HOSTILE_EXPRESSIONS``, ``BUDGET_BLIND``, ``NAMED_PLANS``)
pin each known attack as its own test, its jobs run two children at a time.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from durable_plan.language.plan import DEFAULT_MAX_STEPS
from tests.support.fuzz_harness import (
    BIG_MAX_STEPS,
    BUDGET_BLIND,
    CASE_TIMEOUT_S,
    HOSTILE_EXPRESSIONS,
    HOSTILE_FAMILIES,
    SOURCE_ARGS,
    FuzzCase,
    Job,
    JsonObject,
    Opaque,
    Outcome,
    check_case,
    cyclic_list,
    deep_value,
    evaluate_case,
    execute_case,
    explain,
    generate_case,
    run_isolated,
    run_isolated_many,
)
from tests.support.helpers import examples

# --------------------------------------------------------------------------------------------
# The tests.
# --------------------------------------------------------------------------------------------

FUZZ = settings(
    max_examples=examples(150),
    deadline=None,
    database=None,
    # No shrinking: a case is one seed's worth of draws, and a failing example can take the
    # whole CASE_TIMEOUT_S; the first failure, explained in full, is the useful report.
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
HANG_TIMEOUT_S = 3 * CASE_TIMEOUT_S
"""Wall clock after which a forked case is killed and fails as a hang (``timeout``)."""
NAMED_PARALLEL = 2
"""Named cases run two forked children at a time (the suite's target machine has 2 cores)."""


@st.composite
def cases(draw: st.DrawFn, families: tuple[str, ...] | None = None) -> FuzzCase:
    """One generated case per seed (``st.randoms`` would bias every choice toward the first)."""
    seed = draw(st.integers(0, 2**64 - 1))
    case = generate_case(random.Random(seed), families)
    return replace(case, origin=f"generate_case(random.Random({seed}), {families!r})")


def assert_outcome(case: FuzzCase, outcome: Outcome) -> None:
    assert outcome.ok, explain(case, outcome)
    assert outcome.cpu_seconds < CASE_TIMEOUT_S, explain(case, outcome)


def assert_holds(oracle: Callable[[FuzzCase], Outcome], case: FuzzCase) -> None:
    assert_outcome(case, run_isolated(oracle, case, timeout_s=HANG_TIMEOUT_S))


@FUZZ
@given(cases())
def test_check_plan_returns_or_rejects(case: FuzzCase) -> None:
    assert_holds(check_case, case)


@FUZZ
@given(cases())
def test_execute_plan_returns_json_or_rejects_without_invoking(case: FuzzCase) -> None:
    assert_holds(execute_case, case)


@FUZZ
@given(cases(HOSTILE_FAMILIES))
def test_hostile_expressions_end_in_bounded_time(case: FuzzCase) -> None:
    assert_holds(evaluate_case, case)


def expression_plan(source: str, place: str = "bind") -> JsonObject:
    step_b: JsonObject = {"id": "b", "tool": "echo", "after": ["a"]}
    step_b[place] = {"v": source} if place == "bind" else source
    return {"steps": [{"id": "a", "tool": "echo", "args": dict(SOURCE_ARGS)}, step_b]}


def _named_plans() -> dict[str, Any]:
    """Hostile plan shapes worth a fixed, named regression each."""
    one = {"id": "a", "tool": "echo"}
    huge = 10**5000

    def text_with(value: str) -> str:
        return '{"steps": [{"id": "a", "tool": "echo", "args": {"v": ' + value + "}}]}"

    def many_bindings(source: str, count: int) -> JsonObject:
        """``count`` evaluations of ``source``, spread over independent steps that all run."""
        per_step = -(-count // DEFAULT_MAX_STEPS)
        steps = [
            {"id": f"s{i}", "tool": "echo", "bind": {f"v{k}": source for k in range(per_step)}}
            for i in range(-(-count // per_step))
        ]
        return {"steps": steps, "on_error": "continue"}

    def with_step(**fields: Any) -> JsonObject:
        return {"steps": [{**one, **fields}]}

    chain = [{"id": "s0", "tool": "echo", "args": {"x": 0}}] + [
        {"id": f"s{i}", "tool": "echo", "bind": {"x": f"steps.s{i - 1}.x"}} for i in range(1, 3000)
    ]
    return {
        "json_text_5000_digit_number": text_with("9" * 5000),
        "json_text_nested_100000": text_with("[" * 100_000 + "]" * 100_000),
        "json_text_nan": '{"steps": [{"id": "a", "tool": "echo", "args": {"v": NaN}}]}',
        "args_huge_int": with_step(args={"n": huge}),
        "args_huge_int_nested": with_step(args={"n": [{"m": -huge}]}),
        "retries_huge_int": with_step(retries=huge),
        "timeout_huge_int": with_step(timeout_s=huge),
        "max_parallel_huge_int": {"steps": [one], "max_parallel": huge},
        "id_huge_int": {"steps": [{"id": huge, "tool": "echo"}]},
        "final_huge_int": {"steps": [one], "final": huge},
        "unknown_field_huge_int": {"steps": [one], "extra": huge},
        "args_deep_list_20000": with_step(args={"v": deep_value(20_000)}),
        "args_deep_dict_5000": with_step(args={"v": deep_value(5_000, "dict")}),
        "args_deep_list_300": with_step(args={"v": deep_value(300)}),
        "steps_deep_20000": {"steps": deep_value(20_000)},
        "unknown_field_deep": {"steps": [one], "extra": deep_value(20_000)},
        "timeout_nan": with_step(timeout_s=math.nan),
        "args_nan": with_step(args={"v": math.nan}),
        "args_infinity": with_step(args={"v": [math.inf]}),
        "max_parallel_nan": {"steps": [one], "max_parallel": math.nan},
        "args_set": with_step(args={"v": {1, 2}}),
        "args_bytes": with_step(args={"v": b"x"}),
        "args_object": with_step(args={"v": Opaque()}),
        "args_tuple": with_step(args={"v": (1, 2)}),
        "args_int_key": with_step(args={"v": {1: "x"}}),
        "args_cyclic": with_step(args={"v": cyclic_list()}),
        "plan_int_key": {"steps": [one], 1: "x"},
        "step_tuple_key": {"steps": [{**one, ("t",): 1}]},
        "steps_tuple": {"steps": (one,)},
        "bind_not_string": with_step(bind={"v": {1, 2}}),
        "id_million_chars": {"steps": [{"id": "a" * 1_000_000, "tool": "echo"}]},
        "expression_deep_parens": with_step(bind={"v": "(" * 5000 + "1" + ")" * 5000}),
        "expression_long_sum": with_step(bind={"v": "+".join(["1"] * 20_000)}),
        "expression_long_and": with_step(when=" and ".join(["true"] * 5_000)),
        "expression_deep_lambda": with_step(bind={"v": "function($x){" * 500 + "1" + "}" * 500}),
        "expression_million_chars": with_step(bind={"v": "'" + "a" * 1_000_000 + "'"}),
        "steps_5000_default_limit": {
            "steps": [{"id": f"s{i}", "tool": "echo"} for i in range(5000)]
        },
        "steps_5000_cycle": {
            "steps": [
                {"id": f"s{i}", "tool": "echo", "after": [f"s{(i + 1) % 5000}"]}
                for i in range(5000)
            ]
        },
        "steps_5000_duplicates": {"steps": [one] * 5000},
        "chain_3000_executed": {"steps": chain},
        "result_huge_int": {"steps": [{"id": "a", "tool": "huge_int"}]},
        "result_nan": {"steps": [{"id": "a", "tool": "nan"}]},
        "result_set": {"steps": [{"id": "a", "tool": "a_set"}]},
        "result_deep": {"steps": [{"id": "a", "tool": "deep"}]},
        "result_cyclic": {"steps": [{"id": "a", "tool": "cyclic"}]},
        "tool_error_unprintable": {"steps": [{"id": "a", "tool": "boom_unprintable"}]},
        "result_deep_read": {
            "steps": [
                {"id": "a", "tool": "deep"},
                {"id": "b", "tool": "echo", "bind": {"v": "steps.a"}},
            ]
        },
        "schema_ref_tool": {"steps": [{"id": "a", "tool": "move", "args": {"to": {"x": "no"}}}]},
        "dense_cycles_64": {
            "steps": [
                {"id": f"s{i}", "tool": "echo", "after": [f"s{j}" for j in range(64) if j != i]}
                for i in range(64)
            ]
        },
        # A native call the evaluation budget barely charges, repeated in one step's bindings.
        **{
            f"repeated_{name}": many_bindings(source, count)
            for name, (source, count) in BUDGET_BLIND.items()
        },
    }


NAMED_PLANS = _named_plans()


def run_jobs(jobs: list[Job]) -> list[tuple[FuzzCase, Outcome]]:
    """The jobs of one named case, ``NAMED_PARALLEL`` forked children at a time."""
    outcomes = run_isolated_many(jobs, parallel=NAMED_PARALLEL, timeout_s=HANG_TIMEOUT_S)
    return [(case, outcome) for (_, case), outcome in zip(jobs, outcomes, strict=True)]


def named_expression_jobs(source: str) -> list[Job]:
    """A named expression in a binding: checked and run, and checked for a durable plan."""
    return [
        (evaluate_case, FuzzCase("named", expression_plan(source), False, True, 32)),
        (check_case, FuzzCase("named", expression_plan(source), True, True, 32)),
    ]


def named_plan_jobs(raw: Any) -> list[Job]:
    """Checked and run; checked as a durable plan; run with a large step limit if it needs one."""
    jobs: list[Job] = [
        (evaluate_case, FuzzCase("named", raw, False, True, DEFAULT_MAX_STEPS)),
        (check_case, FuzzCase("named", raw, True, True, DEFAULT_MAX_STEPS)),
    ]
    steps = raw.get("steps") if isinstance(raw, dict) else None
    if isinstance(steps, list | tuple) and len(steps) > DEFAULT_MAX_STEPS:
        jobs.append((evaluate_case, FuzzCase("named", raw, False, True, BIG_MAX_STEPS)))
    return jobs


@pytest.mark.parametrize("name", sorted(HOSTILE_EXPRESSIONS))
def test_named_hostile_expression(name: str) -> None:
    """One named hostile expression (conditions get the same ones from the generators)."""
    for case, outcome in run_jobs(named_expression_jobs(HOSTILE_EXPRESSIONS[name])):
        assert_outcome(case, outcome)


@pytest.mark.parametrize("name", sorted(NAMED_PLANS))
def test_named_hostile_plan(name: str) -> None:
    for case, outcome in run_jobs(named_plan_jobs(NAMED_PLANS[name])):
        assert_outcome(case, outcome)
