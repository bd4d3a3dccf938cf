"""The checker: every problem found before a side effect, all at once, with step, field, fix."""

from __future__ import annotations

import json
from typing import Any, get_args

import pytest

from durable_plan.check import CheckedPlan, ToolCatalog, ToolSpec, check_plan
from durable_plan.language.errors import REJECTION_HEADER, PlanRejected, Problem, ProblemCode
from durable_plan.language.plan import DEFAULT_MAX_STEPS, Plan
from tests.support.case_tools import CASE_TOOLS
from tests.support.plan_cases import CASES_BY_NAME, PLAN_CASES


def step(sid: str, tool: str = "echo", **fields: Any) -> dict[str, Any]:
    return {"id": sid, "tool": tool, **fields}


def reject(raw: Any, **kwargs: Any) -> PlanRejected:
    with pytest.raises(PlanRejected) as info:
        check_plan(raw, **kwargs)
    rejection = info.value
    assert str(rejection).startswith(REJECTION_HEADER)
    assert rejection.problems, "a rejection always lists its problems"
    for problem in rejection.problems:
        assert problem.message and problem.fix
        assert str(problem) in str(rejection)
    return rejection


def only(rejection: PlanRejected, code: str) -> Problem:
    assert rejection.codes == [code], rejection.render()
    return rejection.problems[0]


def problem(rejection: PlanRejected, code: str, step_id: str | None = None) -> Problem:
    found = [p for p in rejection.problems if p.code == code and p.step == step_id]
    assert found, f"no {code} problem for step {step_id!r} in:\n{rejection.render()}"
    return found[0]


CATALOG = ToolCatalog.of(
    [
        ToolSpec(
            "echo",
            {
                "type": "object",
                "properties": {"value": {}},
                "required": ["value"],
                "additionalProperties": False,
            },
        ),
        ToolSpec(
            "add",
            {
                "type": "object",
                "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
                "required": ["a", "b"],
            },
        ),
        ToolSpec("anything"),
        ToolSpec("delete_files", refused="it needs a human's approval"),
    ]
)


# -- valid plans ------------------------------------------------------------------------


@pytest.mark.parametrize("case", PLAN_CASES, ids=lambda c: c.name)
def test_every_shared_case_passes_the_checks(case: Any) -> None:
    checked = check_plan(case.plan, catalog=CASE_TOOLS, durable=True)
    assert isinstance(checked, CheckedPlan)
    assert list(checked.steps) == [s["id"] for s in case.plan["steps"]]


def test_checked_plan_carries_deps_levels_and_returns() -> None:
    checked = check_plan(CASES_BY_NAME["fan_out_fan_in_inline_array"].plan)
    assert checked.levels == [["src"], ["a", "b", "c"], ["sum"]]
    assert checked.steps["sum"].deps == {"a", "b", "c"}
    assert checked.steps["a"].deps == {"src"}
    assert checked.steps["src"].deps == frozenset()
    assert [checked.steps[s].level for s in ("src", "a", "sum")] == [0, 1, 2]
    assert set(checked.steps["sum"].bind) == {"damages"}
    assert checked.returns == ["sum"]
    assert check_plan({"steps": [step("x"), step("y")]}).returns == ["x", "y"]


def test_levels_are_longest_paths() -> None:
    checked = check_plan(
        {
            "steps": [
                step("d", after=["a", "c"]),
                step("a"),
                step("b", after=["a"]),
                step("c", bind={"v": "steps.b"}),
                step("e"),
            ]
        }
    )
    assert checked.levels == [["a", "e"], ["b"], ["c"], ["d"]]
    assert checked.steps["d"].level == 3


def test_when_and_after_create_edges() -> None:
    checked = check_plan(
        {"steps": [step("a"), step("b"), step("c", when="steps.a.ok", after=["b"])]}
    )
    assert checked.steps["c"].deps == {"a", "b"}
    assert checked.steps["c"].when is not None


def test_accepts_plan_object_dict_and_json_string() -> None:
    raw = CASES_BY_NAME["chain_of_3"].plan
    a = check_plan(raw)
    b = check_plan(Plan.model_validate(raw))
    c = check_plan(json.dumps(raw))
    assert a.levels == b.levels == c.levels == [["lookup"], ["attack"], ["damage"]]
    assert a.plan == b.plan == c.plan


def test_seed_defaults() -> None:
    plan = check_plan({"steps": [step("a")]}).plan
    assert plan.final is False
    assert plan.on_error == "fail_fast"
    assert plan.returns is None
    assert plan.max_parallel is None
    s = plan.steps[0]
    assert (s.args, s.bind, s.after, s.when, s.join) == ({}, {}, [], None, "all")
    assert DEFAULT_MAX_STEPS == 32


# -- every problem code -------------------------------------------------------------------


def test_every_problem_code_is_tested() -> None:
    tested = {
        "schema",
        "step_limit",
        "duplicate_id",
        "unknown_tool",
        "not_plannable",
        "bad_argument",
        "syntax",
        "forbidden_function",
        "dangling_reference",
        "self_reference",
        "dynamic_reference",
        "returns",
        "cycle",
        "limit",  # tests/unit/check/test_hostile_check.py
        "unknown_name",  # tests/unit/check/test_hostile_check.py
        "owner_rule",  # tests/durable/plans/test_owner_rules.py
        "prior_reference",  # tests/durable/plans/test_reuse.py
        "unknown_input",  # below
        "no_field",  # tests/unit/check/test_return_shapes.py
        "wrong_type",  # tests/unit/check/test_return_shapes.py
    }
    assert tested == set(get_args(ProblemCode))


def test_a_read_of_an_input_the_file_does_not_declare_is_a_problem() -> None:
    """Found by the expression analysis (bindings, conditions and prompt placeholders),
    not by searching the text: a string literal 'inputs.x' reads nothing."""
    plan = {
        "steps": [
            {"id": "a", "tool": "t", "bind": {"x": "inputs.ticket", "y": "'inputs.nope'"}},
            {
                "id": "b",
                "tool": "agent",
                "args": {
                    "prompt": "Ticket {{ inputs.tickt }}",
                    "output_schema": {"type": "object"},
                    "model": "m",
                },
            },
        ]
    }
    with pytest.raises(PlanRejected) as caught:
        check_plan(plan, inputs={}, input_names=["ticket"])
    [problem] = [p for p in caught.value.problems if p.code == "unknown_input"]
    assert (problem.step, problem.field) == ("b", "args.prompt")
    assert "reads inputs.tickt, but the file declares no input 'tickt'" in problem.message
    assert "read one of: ticket" in problem.fix
    check_plan({"steps": plan["steps"][:1]}, inputs={}, input_names=["ticket"])


def test_schema_misspelled_step_field_suggests_the_right_one() -> None:
    p = only(reject({"steps": [step("a", bnid={"x": "1"})]}), "schema")
    assert (p.step, p.field) == ("a", "bnid")
    assert "unknown field 'bnid'" in p.message
    assert "did you mean 'bind'?" in p.fix


def test_schema_misspelled_plan_field() -> None:
    p = only(reject({"steps": [step("a")], "retruns": ["a"]}), "schema")
    assert (p.step, p.field) == (None, "retruns")
    assert "did you mean 'returns'?" in p.fix


@pytest.mark.parametrize("bad_id", ["A", "1a", "a-b", "_a", "a" * 33, ""])
def test_schema_bad_step_id(bad_id: str) -> None:
    p = only(reject({"steps": [step(bad_id)]}), "schema")
    assert p.field == "id"
    assert "not a valid step id" in p.message
    assert "lowercase letter" in p.fix


@pytest.mark.parametrize("good_id", ["a", "a" * 32, "x1", "get_character_2"])
def test_step_id_pattern_accepts(good_id: str) -> None:
    check_plan({"steps": [step(good_id)]})


def test_schema_missing_and_wrong_types() -> None:
    rejection = reject(
        {
            "steps": [
                step("a", bind={"x": 1}),
                {"id": "b"},
                {"tool": "echo"},
                5,
                step("c", join="some", timeout_s=-1, retries=99),
            ],
            "on_error": "stop",
            "max_parallel": 0,
        }
    )
    assert set(rejection.codes) == {"schema"}
    where = {(p.step, p.field) for p in rejection.problems}
    assert {
        ("a", "bind.x"),
        ("b", "tool"),
        ("#3", "id"),
        ("#4", None),
        ("c", "join"),
        ("c", "timeout_s"),
        ("c", "retries"),
        (None, "on_error"),
        (None, "max_parallel"),
    } <= where
    assert "required field 'tool' is missing" in problem(rejection, "schema", "b").message


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        ({"steps": []}, "no steps"),
        ({}, "'steps' is missing"),
        ({"steps": "abc"}, "valid list"),
        ([1, 2], "must be an object"),
        ('{"steps": [', "not valid JSON"),
        ("[]", "must be an object"),
    ],
)
def test_schema_top_level(raw: Any, fragment: str) -> None:
    p = only(reject(raw), "schema")
    assert fragment in p.message


def test_step_limit_default_32() -> None:
    check_plan({"steps": [step(f"s{n}") for n in range(32)]})
    p = only(reject({"steps": [step(f"s{n}") for n in range(33)]}), "step_limit")
    assert p.field == "steps"
    assert "33 steps" in p.message and "limit is 32" in p.message
    assert "split" in p.fix


def test_step_limit_configurable() -> None:
    steps = [step(f"s{n}") for n in range(5)]
    only(reject({"steps": steps}, max_steps=4), "step_limit")
    check_plan({"steps": [step(f"s{n}") for n in range(100)]}, max_steps=100)


def test_duplicate_ids() -> None:
    p = only(reject({"steps": [step("a"), step("b"), step("a")]}), "duplicate_id")
    assert (p.step, p.field) == ("a", "id")
    assert "more than once" in p.message


def test_unknown_tool_lists_plannable_tools() -> None:
    p = only(
        reject({"steps": [step("a", "ehco", args={"value": 1})]}, catalog=CATALOG), "unknown_tool"
    )
    assert (p.step, p.field) == ("a", "tool")
    assert "unknown tool 'ehco'" in p.message
    assert "did you mean 'echo'?" in p.fix
    assert "plannable tools: add, anything, echo" in p.fix
    assert "delete_files" not in p.fix


def test_catalog_may_be_a_list_of_names() -> None:
    p = only(reject({"steps": [step("a", "zzz")]}, catalog=["echo", "add"]), "unknown_tool")
    assert "plannable tools: add, echo" in p.fix


def test_not_plannable_tool_says_call_it_directly() -> None:
    p = only(reject({"steps": [step("a", "delete_files")]}, catalog=CATALOG), "not_plannable")
    assert (p.step, p.field) == ("a", "tool")
    assert "it needs a human's approval" in p.message
    assert "call 'delete_files' directly" in p.fix


def test_bad_argument_unknown_missing_and_wrong_type() -> None:
    rejection = reject(
        {
            "steps": [
                step("a", "echo", args={"vlaue": 1}),
                step("b", "add", args={"a": "x"}),
                step("c", "add", args={"a": 1}, bind={"a": "steps.a", "b": "steps.a"}),
                step("d", "anything", args={"whatever": 1}),
            ]
        },
        catalog=CATALOG,
    )
    assert set(rejection.codes) == {"bad_argument"}
    by_field = {(p.step, p.field): p for p in rejection.problems}
    unknown = by_field[("a", "args.vlaue")]
    assert "has no argument 'vlaue'" in unknown.message
    assert "did you mean 'value'?" in unknown.fix
    assert "needs argument 'value'" in by_field[("a", "args")].message
    assert "needs argument 'b'" in by_field[("b", "args")].message
    wrong = by_field[("b", "args.a")]
    assert "not of type 'number'" in wrong.message
    assert "in both args and bind" in by_field[("c", "bind.a")].message
    assert not any(p.step == "d" for p in rejection.problems)


def test_schema_with_properties_is_closed_unless_it_says_otherwise() -> None:
    plan = {"steps": [step("a", "add", args={"a": 1, "b": 2, "c": 3})]}
    p = only(reject(plan, catalog=CATALOG), "bad_argument")
    assert (p.field, p.fix) == ("args.c", "its arguments are: a, b")
    schema = {"type": "object", "properties": {"a": {}}, "additionalProperties": True}
    check_plan(plan, catalog=[ToolSpec("add", schema)])


def test_bound_arguments_satisfy_required() -> None:
    check_plan(
        {
            "steps": [
                step("a", "echo", args={"value": 1}),
                step("b", "add", args={"a": 1}, bind={"b": "steps.a"}),
            ]
        },
        catalog=CATALOG,
    )


def test_syntax_error_in_bind_and_when() -> None:
    rejection = reject(
        {
            "steps": [
                step("a"),
                step("b", bind={"v": "steps.a.x +"}, when="steps.a.x == 1"),
            ]
        }
    )
    assert rejection.codes == ["syntax", "syntax"]
    fields = [p.field for p in rejection.problems]
    assert fields == ["bind.v", "when"]
    when = rejection.problems[1]
    assert "steps.a.x == 1" in when.message
    assert "= not ==" in when.fix
    assert "$not(...)" in when.fix


@pytest.mark.parametrize(
    "source", ["!steps.a.ok", "not steps.a.ok", "steps.a.x == 1", "(", "'open"]
)
def test_common_model_mistakes_are_syntax_errors(source: str) -> None:
    p = only(reject({"steps": [step("a"), step("b", when=source)]}), "syntax")
    assert (p.step, p.field) == ("b", "when")
    assert source in p.message


def test_eval_is_always_forbidden() -> None:
    for durable in (False, True):
        p = only(
            reject({"steps": [step("a", bind={"v": "$eval('1 + 1')"})]}, durable=durable),
            "forbidden_function",
        )
        assert (p.step, p.field) == ("a", "bind.v")
        assert "$eval is not allowed" in p.message


@pytest.mark.parametrize("fn", ["$now()", "$millis()", "$random()", "$shuffle([1, 2])"])
def test_durable_refuses_clock_and_random(fn: str) -> None:
    plan = {"steps": [step("a", when=f"$exists({fn})")]}
    p = only(reject(plan, durable=True), "forbidden_function")
    assert (p.step, p.field) == ("a", "when")
    assert "replay" in p.fix
    check_plan(plan)  # in-process is fine


def test_function_names_are_read_from_the_ast_not_the_text() -> None:
    check_plan({"steps": [step("a", bind={"v": "'call $eval() or $now() later'"})]}, durable=True)


def test_dangling_reference_in_bind_when_and_after() -> None:
    rejection = reject(
        {
            "steps": [
                step("lookup"),
                step("b", bind={"v": "steps.lookpu.armour"}, when="steps.nope", after=["gone"]),
            ]
        }
    )
    assert rejection.codes == ["dangling_reference"] * 3
    assert [p.field for p in rejection.problems] == ["bind.v", "when", "after"]
    assert "did you mean 'lookup'?" in rejection.problems[0].fix
    assert "no step has id 'lookpu'" in rejection.problems[0].message


def test_returns_dangling() -> None:
    p = only(reject({"steps": [step("lookup")], "returns": ["lookup", "lookpu"]}), "returns")
    assert (p.step, p.field) == (None, "returns")
    assert "'lookpu'" in p.message
    assert "did you mean 'lookup'?" in p.fix


def test_self_reference() -> None:
    rejection = reject(
        {"steps": [step("a", bind={"v": "steps.a.x"}, when="$lookup(steps, 'a')", after=["a"])]}
    )
    assert rejection.codes == ["self_reference"] * 3
    assert [p.field for p in rejection.problems] == ["bind.v", "when", "after"]
    assert all(p.step == "a" for p in rejection.problems)


@pytest.mark.parametrize(
    "source",
    [
        "steps.*",
        "$lookup(steps, $x)",
        "$keys(steps)",
        "$count(steps.*)",
        "steps.**.x",
        "*.a",
        "$$.*.a",
        "$string($)",
        "$lookup($$, 'steps').a",
    ],
)
def test_dynamic_reads_need_after(source: str) -> None:
    p = only(reject({"steps": [step("a"), step("b", bind={"v": source})]}), "dynamic_reference")
    assert (p.step, p.field) == ("b", "bind.v")
    assert "does not name" in p.message
    assert "after" in p.fix
    checked = check_plan({"steps": [step("a"), step("b", bind={"v": source}, after=["a"])]})
    assert checked.steps["b"].deps == {"a"}


def test_cycle_named_as_a_path_and_downstream_steps_not_reported() -> None:
    rejection = reject(
        {
            "steps": [
                step("a", bind={"v": "steps.b"}),
                step("b", bind={"v": "steps.a"}),
                step("c", bind={"v": "steps.a"}),
                step("d", after=["c"]),
            ]
        }
    )
    p = only(rejection, "cycle")
    assert "a -> b -> a" in p.message
    assert (p.step, p.field) == ("a", "bind.v")
    assert "'c'" not in rejection.render() and "'d'" not in rejection.render()


def test_longer_cycles_each_reported_once() -> None:
    rejection = reject(
        {
            "steps": [
                step("a", bind={"v": "steps.c"}),
                step("b", bind={"v": "steps.a"}),
                step("c", bind={"v": "steps.b"}),
                step("x", after=["y"]),
                step("y", when="steps.x.ok"),
            ]
        }
    )
    assert rejection.codes == ["cycle", "cycle"]
    messages = [p.message for p in rejection.problems]
    assert any("a -> c -> b -> a" in m for m in messages)
    assert any("x -> y -> x" in m for m in messages)
    assert {(p.step, p.field) for p in rejection.problems} == {("a", "bind.v"), ("x", "after")}


# -- all at once ---------------------------------------------------------------------------


def test_all_problems_reported_together() -> None:
    plan = {
        "steps": [
            step("lookup", "look_up_monster", args={"name": "goblin"}),
            step("attack", "roll_atack", bind={"armour": "steps.lookup.armour"}),
            step("attack", "roll_attack", bind={"armour": "steps.lookup.armour"}),
            step("boom", "fail", bnid={"message": "x"}),
            step("when_bad", "echo", when="steps.lookup.hp == 7"),
            step("dyn", "echo", bind={"value": "steps.*"}),
            step("ev", "echo", bind={"value": "$eval('1')"}),
            step("clock", "echo", bind={"value": "$now()"}),
            step("selfish", "echo", bind={"value": "steps.selfish"}),
            step("dangle", "echo", bind={"value": "steps.nowhere"}),
            step("p", "echo", bind={"value": "steps.q"}),
            step("q", "echo", bind={"value": "steps.p"}),
        ],
        "returns": ["ghost"],
    }
    rejection = reject(plan, catalog=CASE_TOOLS, durable=True, max_steps=10)
    assert set(rejection.codes) == {
        "schema",
        "step_limit",
        "duplicate_id",
        "unknown_tool",
        "syntax",
        "forbidden_function",
        "dangling_reference",
        "self_reference",
        "dynamic_reference",
        "returns",
        "cycle",
    }
    assert problem(rejection, "schema", "boom").field == "bnid"
    assert problem(rejection, "unknown_tool", "attack").fix.startswith(
        "did you mean 'roll_attack'?"
    )
    assert problem(rejection, "forbidden_function", "clock").field == "bind.value"
    assert "p -> q -> p" in problem(rejection, "cycle", "p").message
    rendered = rejection.render().splitlines()
    assert rendered[0] == REJECTION_HEADER
    assert len(rendered) == 1 + len(rejection.problems)


def test_a_salvaged_step_is_still_checked() -> None:
    # 'bind' has a bad value, so the step is checked without it; its when still is.
    rejection = reject({"steps": [step("a", bind={"v": 1}, when="steps.nope")]})
    assert rejection.codes == ["schema", "dangling_reference"]


def test_references_to_invalid_steps_are_not_dangling() -> None:
    # 'b' is broken (no tool), but it exists: do not also report steps.b as dangling.
    rejection = reject({"steps": [step("a", bind={"v": "steps.b"}), {"id": "b"}]})
    assert rejection.codes == ["schema"]


def test_problem_str_names_step_field_and_fix() -> None:
    p = Problem("cycle", "a message", "a fix", "s", "bind.v")
    assert str(p) == "step 's', field 'bind.v': a message. Fix: a fix"
    assert str(Problem("schema", "m", "f")) == "m. Fix: f"
    rejection = PlanRejected([p])
    assert isinstance(rejection, ValueError)
    assert rejection.codes == ["cycle"]


def test_plan_fields_are_strict_not_coerced() -> None:
    with pytest.raises(PlanRejected) as info:
        check_plan({"steps": [{"id": "a", "tool": "t", "retries": "2"}], "final": "yes"})
    fields = {(p.step, p.field) for p in info.value.problems}
    assert fields == {(None, "final"), ("a", "retries")}


def test_non_finite_numbers_in_args_are_rejected() -> None:
    with pytest.raises(PlanRejected) as info:
        check_plan({"steps": [{"id": "a", "tool": "t", "args": {"x": float("nan")}}]})
    [problem] = info.value.problems
    assert (problem.step, problem.field) == ("a", "args.x")
    assert "finite number" in problem.message
