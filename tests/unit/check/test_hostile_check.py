"""Hostile plans at check time: only ``PlanRejected``, at bounded cost, with a usable fix.

Each test reproduces one defect of issue 8 (a crash other than ``PlanRejected``,
or a cost that grew with the submitted size) and the model-facing messages a
model's typical mistakes deserve.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from pydantic import BaseModel

from durable_plan.check import ToolCatalog, ToolSpec, check_plan
from durable_plan.language.errors import PlanRejected, Problem
from durable_plan.language.plan_limits import (
    MAX_EXPRESSION_CHARS,
    MAX_JSON_DEPTH,
    MAX_PLAN_BYTES,
    MAX_PLAN_EXPRESSION_CHARS,
)
from durable_plan.tools.registry import ToolRegistry


def reject(raw: Any, **kwargs: Any) -> PlanRejected:
    with pytest.raises(PlanRejected) as info:
        check_plan(raw, **kwargs)
    for problem in info.value.problems:
        assert problem.message and problem.fix
    return info.value


def codes(rejection: PlanRejected) -> list[str]:
    return rejection.codes


def nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


# -- 6. checking cost is bounded by the input's size --------------------------------------


def test_a_plan_far_over_the_step_limit_is_rejected_before_any_other_check() -> None:
    steps = [{"id": f"s{i}", "tool": "t", "bind": {"x": f"steps.s{i - 1}"}} for i in range(4000)]
    started = time.perf_counter()
    rejection = reject({"steps": steps}, max_steps=32)
    elapsed = time.perf_counter() - started
    [problem] = rejection.problems
    assert problem.code == "step_limit"
    assert "4000 steps; the limit is 32" in problem.message
    # Not a timing assertion on the machine's speed: the check examined no step at all,
    # which the single problem shows; this bound only guards a return to per-step work.
    assert elapsed < 1.0


def test_slightly_over_the_step_limit_still_reports_every_other_problem() -> None:
    steps = [{"id": f"s{i}", "tool": "t"} for i in range(5)] + [
        {"id": "bad", "tool": "t", "bind": {"x": "steps.ghost"}}
    ]
    rejection = reject({"steps": steps}, max_steps=4)
    assert set(codes(rejection)) == {"step_limit", "dangling_reference"}


def test_a_plan_text_over_the_byte_limit_is_rejected_unparsed() -> None:
    text = json.dumps({"steps": [{"id": "a", "tool": "t", "args": {"x": "y" * MAX_PLAN_BYTES}}]})
    [problem] = reject(text).problems
    assert problem.code == "limit"
    assert f"{MAX_PLAN_BYTES // 1024} KiB" in problem.message
    assert "by reference" in problem.fix


def test_a_plan_object_over_the_byte_limit_is_rejected() -> None:
    raw = {"steps": [{"id": "a", "tool": "t", "args": {"x": "y" * (MAX_PLAN_BYTES + 10)}}]}
    assert codes(reject(raw)) == ["limit"]


def test_an_expression_over_the_length_limit_is_not_parsed() -> None:
    source = "1+" * MAX_EXPRESSION_CHARS + "1"
    [problem] = reject({"steps": [{"id": "a", "tool": "t", "bind": {"x": source}}]}).problems
    assert (problem.code, problem.step, problem.field) == ("limit", "a", "bind.x")
    assert f"limit is {MAX_EXPRESSION_CHARS}" in problem.message


def test_all_expressions_together_are_bounded() -> None:
    each = "1+" * 1400 + "1"  # under the per-expression limit
    count = MAX_PLAN_EXPRESSION_CHARS // len(each) + 2
    steps = [{"id": f"s{i}", "tool": "t", "bind": {"x": each}} for i in range(count)]
    rejection = reject({"steps": steps}, max_steps=64)
    limits = [p for p in rejection.problems if p.code == "limit"]
    assert len(limits) == 1, "reported once, naming where the budget ran out"
    assert "together" in limits[0].message


# -- 8. crashes instead of clean errors --------------------------------------------------


class Armour(BaseModel):
    name: str
    value: int


def equip(armour: Armour) -> dict[str, Any]:
    """Equip armour.

    Args:
        armour: the armour to equip
    """
    return {"ok": armour.name}


def test_a_ref_schema_parameter_given_a_literal_is_checked_not_crashed() -> None:
    catalog = ToolRegistry([equip]).catalog()
    good = {"steps": [{"id": "a", "tool": "equip", "args": {"armour": {"name": "x", "value": 3}}}]}
    check_plan(good, catalog=catalog)
    bad = {"steps": [{"id": "a", "tool": "equip", "args": {"armour": {"name": "x", "value": "3"}}}]}
    [problem] = reject(bad, catalog=catalog).problems
    assert (problem.code, problem.field) == ("bad_argument", "args.armour")
    assert "'3' is not of type 'integer'" in problem.message
    assert '"value"' in problem.fix, "the fix shows the resolved schema, not a bare $ref"


@pytest.mark.parametrize("as_text", [True, False])
def test_deeply_nested_input_is_rejected(as_text: bool) -> None:
    raw: Any = {"steps": [{"id": "a", "tool": "t", "args": {"x": nested(20_000)}}]}
    if as_text:
        raw = '{"steps": [{"id": "a", "tool": "t", "args": {"x": ' + "[" * 20_000 + "]" * 20_000
        raw += "}}]}"
    [problem] = reject(raw).problems
    assert problem.code in {"limit", "schema"}
    assert "nested" in problem.message


def test_nesting_at_the_limit_is_accepted() -> None:
    check_plan({"steps": [{"id": "a", "tool": "t", "args": {"x": nested(MAX_JSON_DEPTH - 6)}}]})


@pytest.mark.parametrize("where", ["args", "text", "field"])
def test_an_integer_of_thousands_of_digits_is_rejected(where: str) -> None:
    huge = 10**5000
    raw: Any
    if where == "args":
        raw = {"steps": [{"id": "a", "tool": "t", "args": {"n": huge}}]}
    elif where == "field":
        raw = {"steps": [{"id": "a", "tool": "t", "retries": huge}]}
    else:
        raw = '{"steps": [{"id": "a", "tool": "t", "args": {"n": 1' + "0" * 5000 + "}}]}"
    [problem] = reject(raw).problems
    assert problem.code in {"limit", "schema"}
    assert "64 bits" in problem.message or "digits" in problem.message
    if where == "args":
        assert (problem.step, problem.field) == ("a", "args.n")


def test_non_json_python_values_are_rejected_with_their_place() -> None:
    [problem] = reject({"steps": [{"id": "a", "tool": "t", "args": {"x": {1, 2}}}]}).problems
    assert (problem.code, problem.step, problem.field) == ("limit", "a", "args.x")
    assert "a set is not JSON" in problem.message


# -- model-facing messages ---------------------------------------------------------------


def test_duplicate_ids_do_not_hide_the_duplicates_own_problems() -> None:
    raw = {
        "steps": [
            {"id": "a", "tool": "t"},
            {"id": "a", "tool": "t", "bind": {"x": "steps.ghost.y"}},
        ]
    }
    rejection = reject(raw)
    assert set(codes(rejection)) == {"duplicate_id", "dangling_reference"}


def test_a_duplicate_with_an_unknown_tool_is_reported() -> None:
    raw = {"steps": [{"id": "a", "tool": "echo"}, {"id": "a", "tool": "ehco"}]}
    rejection = reject(raw, catalog=ToolCatalog.of(["echo"]))
    assert set(codes(rejection)) == {"duplicate_id", "unknown_tool"}


def test_a_non_string_bind_value_says_to_use_args() -> None:
    [problem] = reject({"steps": [{"id": "a", "tool": "t", "bind": {"ticket_id": 7}}]}).problems
    assert (problem.code, problem.step, problem.field) == ("schema", "a", "bind.ticket_id")
    assert "JSONata expressions (strings)" in problem.message
    assert '"args": {"ticket_id": 7}' in problem.fix


def test_a_bare_word_in_bind_can_never_match_and_is_rejected() -> None:
    [problem] = reject({"steps": [{"id": "a", "tool": "t", "bind": {"name": "goblin"}}]}).problems
    assert (problem.code, problem.step, problem.field) == ("unknown_name", "a", "bind.name")
    assert "only steps" in problem.message
    assert '"args": {"name": "goblin"}' in problem.fix
    assert "'goblin'" in problem.fix


@pytest.mark.parametrize(
    "source",
    [
        "'goblin'",
        "steps.a.items[name = 'x']",
        "$map(steps.a.items, function($v){$v.name})",
        "steps.a.items^(price)",
        "steps.a.{'k': name}",
        "$sum(steps.a.items.(price * qty))",
    ],
)
def test_names_relative_to_a_result_are_not_bare(source: str) -> None:
    steps = [{"id": "a", "tool": "t"}, {"id": "b", "tool": "t", "bind": {"x": source}}]
    check_plan({"steps": steps})


def test_catastrophic_regex_is_checked_and_one_re2_cannot_run_is_a_syntax_error() -> None:
    fine = "$contains('" + "a" * 40 + "!', /^(a+)+$/)"
    check_plan({"steps": [{"id": "a", "tool": "t", "bind": {"x": fine}}]})
    backref = "$match('aa', /(a)\\1/)"
    [problem] = reject({"steps": [{"id": "a", "tool": "t", "bind": {"x": backref}}]}).problems
    assert problem.code == "syntax"
    assert "RE2" in problem.message


def first(rejection: PlanRejected, code: str) -> Problem:
    return next(p for p in rejection.problems if p.code == code)


def test_spec_catalog_with_broken_schema_does_not_crash() -> None:
    schema = {"type": "object", "properties": {"x": {"$ref": "#/nowhere"}}}
    catalog = ToolCatalog.of([ToolSpec("t", schema)])
    check_plan({"steps": [{"id": "a", "tool": "t", "args": {"x": 1}}]}, catalog=catalog)


def test_lambda_signatures_are_refused() -> None:
    # jsonata-python matches signatures with Python's backtracking regex engine.
    source = "($f := function($a)<" + "n+" * 16 + ":n>{1}; $f(" + "1," * 40 + "'x'))"
    [problem] = reject({"steps": [{"id": "a", "tool": "t", "bind": {"x": source}}]}).problems
    assert problem.code == "syntax"
    assert "function signatures" in problem.message
    check_plan(
        {"steps": [{"id": "a", "tool": "t", "bind": {"x": "($f := function($a){1}; $f(2))"}}]}
    )


def test_a_tools_backtracking_pattern_runs_on_re2() -> None:
    """A tool's schema may hold a regex that backtracks for ever on the string a plan gives
    it; the check runs it on RE2 (linear), in workflow code too."""
    import time

    from durable_plan.check.arguments import _schema_error

    schema = {"type": "string", "pattern": "^(a+)+$"}
    started = time.perf_counter()
    error = _schema_error("a" * 60 + "!", schema)
    assert error is not None and "does not match" in error.message
    assert time.perf_counter() - started < 5  # Python's re would take years here
    assert _schema_error("aaa", schema) is None
