"""Schemas applied to values a model or a person controls: RE2 regexes, a bounded budget.

Issue 22 (6): an agent step's ``output_schema`` was validated with Python's ``re``, so
``{"pattern": "^(a|a)+$"}`` and an answer of forty ``a`` and a ``!`` froze a worker; a plan
file's inputs schema hung ``durable-plan run`` the same way; ``{"$ref": "#"}`` was a
2,000-line RecursionError. Every schema now goes through ``durable_plan.check.json_schema``.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from durable_plan.check import check_plan
from durable_plan.check.json_schema import MAX_SCHEMA_STEPS, validator_for
from durable_plan.check.plan_file.inputs import resolve_inputs
from durable_plan.check.plan_file.reading import load_plan_file
from durable_plan.check.plan_file.records import PlanFileError
from durable_plan.check.usable_schema import schema_problems
from durable_plan.language.errors import PlanRejected
from durable_plan.run.agent_loop import output_model

BACKTRACKING = "^(a|a)+$"
EVIL = "a" * 40 + "!"  # Python's re needs about 2**40 steps for this


def quick(call: object) -> float:
    started = time.perf_counter()
    assert callable(call)
    call()
    return time.perf_counter() - started


def test_patterns_run_on_re2() -> None:
    validator = validator_for({"type": "string", "pattern": BACKTRACKING})
    assert validator is not None
    error = validator.first_error(EVIL)
    assert error is not None and "does not match" in error.message
    assert validator.first_error("aaaa") is None


def test_pattern_properties_and_additional_properties_run_on_re2() -> None:
    schema = {
        "type": "object",
        "patternProperties": {BACKTRACKING: {"type": "integer"}},
        "additionalProperties": False,
    }
    validator = validator_for(schema)
    assert validator is not None
    messages = [e.message for e in validator.errors({EVIL: 1, "aa": "x"})]
    assert any("additional properties are not allowed" in m and EVIL in m for m in messages)
    assert any("is not of type 'integer'" in m for m in messages)
    assert validator.is_valid({"aaa": 3})


def test_a_regex_re2_cannot_run_is_a_schema_problem() -> None:
    [problem] = schema_problems({"type": "string", "pattern": "(a)\\1"})
    assert "RE2" in problem
    [problem] = schema_problems({"type": "object", "patternProperties": {"(?=x)": {}}})
    assert "RE2" in problem
    # An owner's schema (a tool's arguments): the regex is skipped, the tool checks later.
    assert schema_problems({"type": "string", "pattern": "(a)\\1"}, strict_patterns=False) == []


@pytest.mark.parametrize(
    "schema",
    [
        {"$ref": "#"},
        {
            "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"allOf": [{"$ref": "#/$defs/a"}]}},
            "$ref": "#/$defs/a",
        },
        {"type": "object", "anyOf": [{"not": {"$ref": "#"}}]},
    ],
)
def test_a_reference_loop_that_never_reaches_a_value_is_refused(schema: dict[str, object]) -> None:
    [problem] = schema_problems(schema)
    assert "loop" in problem
    assert validator_for(schema) is None


def test_references_that_descend_are_fine() -> None:
    tree = {"type": "object", "properties": {"children": {"type": "array", "items": {"$ref": "#"}}}}
    assert schema_problems(tree) == []
    validator = validator_for(tree)
    assert validator is not None
    assert validator.is_valid({"children": [{"children": []}]})
    assert not validator.is_valid({"children": [{"children": 3}]})


def test_remote_and_dangling_references_are_refused() -> None:
    [problem] = schema_problems({"$ref": "http://169.254.169.254/latest"})
    assert "only local references" in problem
    [problem] = schema_problems({"type": "object", "properties": {"x": {"$ref": "#/nowhere"}}})
    assert "does not resolve" in problem


def test_an_exponential_schema_stops_at_the_budget() -> None:
    defs: dict[str, object] = {"a0": False}
    for n in range(1, 40):
        defs[f"a{n}"] = {"anyOf": [{"$ref": f"#/$defs/a{n - 1}"}, {"$ref": f"#/$defs/a{n - 1}"}]}
    schema = {"$defs": defs, "$ref": "#/$defs/a39"}  # 2**39 evaluations unbounded
    assert schema_problems(schema) == []
    validator = validator_for(schema)
    assert validator is not None
    error = validator.first_error(1)
    assert error is not None and f"{MAX_SCHEMA_STEPS:,} steps" in error.message


def test_unique_items_is_linear() -> None:
    validator = validator_for({"type": "array", "uniqueItems": True})
    assert validator is not None
    assert validator.is_valid([{"a": n} for n in range(5_000)])
    assert not validator.is_valid([{"a": 1}, {"b": 2}, {"a": 1.0}])
    assert validator.is_valid([1, True])  # true is not 1 in JSON Schema


def test_an_agent_steps_answer_is_checked_on_re2() -> None:
    """The structured-output model of an agent step: a backtracking pattern and the answer
    that would freeze Python's re take no time, and the miss goes back to the model."""
    schema = {"type": "object", "properties": {"word": {"type": "string", "pattern": BACKTRACKING}}}
    answer = output_model(schema)
    with pytest.raises(ValueError, match="does not match"):
        answer.model_validate({"word": EVIL})
    assert answer.model_validate({"word": "aa"}).data == {"word": "aa"}  # type: ignore[attr-defined]


def test_an_agent_step_with_an_unusable_output_schema_is_rejected_at_check() -> None:
    plan = {
        "steps": [
            {
                "id": "ask",
                "tool": "agent",
                "args": {
                    "prompt": "p",
                    "model": "m",
                    "output_schema": {"type": "object", "properties": {"x": {"$ref": "#/x"}}},
                },
            }
        ]
    }
    with pytest.raises(PlanRejected) as caught:
        check_plan(plan)
    [problem] = caught.value.problems
    assert problem.field == "args.output_schema"
    assert "does not resolve" in problem.message


def test_a_plan_files_inputs_schema_is_bounded(tmp_path: Path) -> None:
    """`durable-plan run` with an inputs schema whose pattern backtracks used to hang, and
    one whose $ref loops was a RecursionError that validate had called OK."""
    good = tmp_path / "plan.yaml"
    good.write_text(
        "inputs:\n"
        "  type: object\n"
        "  properties:\n"
        "    name: {type: string, pattern: '^(a|a)+$'}\n"
        "steps:\n"
        "  - {id: a, tool: t, bind: {x: inputs.name}}\n"
    )
    pf = load_plan_file(good)
    assert pf.problems == ()
    with pytest.raises(PlanFileError) as caught:
        resolve_inputs(pf, {"name": EVIL})
    assert "does not match" in str(caught.value)
    assert resolve_inputs(pf, {"name": "aaa"}) == {"name": "aaa"}

    looping = tmp_path / "loop.yaml"
    looping.write_text('inputs: {type: object, $ref: "#"}\nsteps:\n  - {id: a, tool: t}\n')
    problems = load_plan_file(looping).problems
    assert any("loop" in p.message for p in problems)
