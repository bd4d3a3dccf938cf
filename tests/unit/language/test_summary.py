"""What people and models see: the summary, the model's result, the tool schema and description."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

from durable_plan.check import check_plan
from durable_plan.language.errors import PlanRejected
from durable_plan.language.plan import PlanResult, StepOutcome
from durable_plan.language.schema import PLAN_TOOL_NAME, plan_input_schema, plan_tool_description
from durable_plan.local.runner import execute_plan
from durable_plan.run.summary import failure_text, result_for_model, summarize
from tests.support.case_tools import case_invoker
from tests.support.plan_cases import CASES_BY_NAME, PLAN_CASES, PlanCase


async def run(name: str) -> PlanResult:
    return await execute_plan(CASES_BY_NAME[name].plan, case_invoker)


# -- summarize --------------------------------------------------------------------------


@pytest.mark.parametrize("case", PLAN_CASES, ids=lambda c: c.name)
async def test_summary_lists_every_step_and_status(case: PlanCase) -> None:
    result = await execute_plan(case.plan, case_invoker)
    text = summarize(result)
    lines = text.splitlines()
    assert len(lines) == 1 + len(result.ledger) + 1
    for outcome in result.ledger:
        line = next(ln for ln in lines[1:-1] if ln.split()[1] == outcome.id)
        assert outcome.tool in line
        assert outcome.status in line
        assert f"L{outcome.level} " in line
        if outcome.error:
            assert outcome.error in line
    assert lines[-1].startswith("returned: ")


async def test_summary_header() -> None:
    ok = summarize(await run("when_threshold_0_8_escalates"))
    assert ok.splitlines()[0] == (
        "plan ok: 4 steps (3 ok, 1 not_taken), 3 levels, 3 model round trips saved, final"
    )
    assert ok.splitlines()[-1] == "returned: escalate"
    failed = summarize(await run("continue_skips_only_dependents"))
    assert failed.startswith("plan FAILED: 5 steps (3 ok, 1 failed, 1 skipped)")
    nothing = summarize(await run("join_any_when_every_input_not_taken"))
    assert nothing.splitlines()[-1] == "returned: nothing"


async def test_summary_is_ordered_by_level() -> None:
    text = summarize(await run("after_only_ordering"))
    ids = [line.split()[1] for line in text.splitlines()[1:-1]]
    assert ids == ["first", "second", "third"]


def test_summary_mentions_attempts() -> None:
    result = PlanResult(
        returned={},
        ledger=[StepOutcome(id="a", tool="t", status="ok", level=0, attempts=3)],
        levels=[["a"]],
        inference_passes_saved=0,
        final=False,
    )
    assert "(3 attempts)" in summarize(result)


# -- result_for_model -----------------------------------------------------------------


async def test_result_for_model_when_everything_ran() -> None:
    report = result_for_model(await run("chain_returns_subset"))
    assert report == {
        "status": "ok",
        "returned": {"damage": {"hp_after": 1, "defeated": False}},
        "inference_passes_saved": 3,
    }
    json.dumps(report)


async def test_result_for_model_lists_steps_that_did_not_run_ok() -> None:
    report = result_for_model(await run("binding_matched_no_value"))
    assert report["status"] == "failed"
    assert report["returned"] == {"lookup": {"name": "goblin", "hp": 7, "armour": 15}}
    assert report["not_ok"] == [
        {
            "step": "attack",
            "tool": "roll_attack",
            "status": "failed",
            "error": "binding 'armour' matched no value: steps.lookup has keys name, hp, armour",
        },
        {
            "step": "damage",
            "tool": "apply_damage",
            "status": "skipped",
            "error": "plan stopped after 'attack' failed (on_error=fail_fast)",
        },
    ]
    json.dumps(report)


async def test_result_for_model_a_branch_not_taken_is_still_ok() -> None:
    report = result_for_model(await run("when_threshold_0_5_refunds"))
    assert report["status"] == "ok"
    assert report["not_ok"] == [
        {
            "step": "escalate",
            "tool": "escalate_to_human",
            "status": "not_taken",
            "error": "when was false",
        }
    ]


async def test_failure_text() -> None:
    text = failure_text(await run("continue_skips_only_dependents"))
    lines = text.splitlines()
    assert lines[0] == "Plan ran but did not complete:"
    assert "- step 'bad' (echo) failed: binding 'value' matched no value" in text
    assert "- after_bad: skipped (depends on failed step 'bad')" in lines
    assert lines[-1] == "Results of steps that ran: ['after_sibling', 'sibling', 'src']"


# -- the schema the model sees ------------------------------------------------------------


def _walk(node: Any) -> list[Any]:
    found = [node]
    if isinstance(node, dict):
        for v in node.values():
            found += _walk(v)
    elif isinstance(node, list):
        for v in node:
            found += _walk(v)
    return found


def _descriptions(schema: dict[str, Any]) -> str:
    return "\n".join(
        n["description"]
        for n in _walk(schema)
        if isinstance(n, dict) and isinstance(n.get("description"), str)
    )


def test_schema_has_no_refs_and_is_valid() -> None:
    schema = plan_input_schema()
    assert "$ref" not in json.dumps(schema)
    assert "$defs" not in schema
    jsonschema.Draft202012Validator.check_schema(schema)
    steps = schema["properties"]["steps"]
    assert steps["items"] == {"type": "object", "required": ["id", "tool"]}
    # A step is one line, its fields from the model (the rare ones left out), "?": optional.
    assert steps["description"] == (
        "Each {id, tool, args?: {arg: literal}, bind?: {arg: expression}, e.g. "
        '{"armour": "steps.lookup.armour"}, after?: [id], when?: expression, exactly true or '
        'false (false: it and its dependents end not_taken), join?: all|any ("any": run if '
        "one dependency ran ok)}"
    )
    assert set(schema["properties"]) == {"steps", "returns", "final", "on_error"}


# The schema sent on every call is a relaxed view of the plan model: every plan the model
# accepts validates against it, and what it no longer refuses the check does, saying the rule.

RARE = {
    "steps": [{"id": "a", "tool": "t", "timeout_s": 5, "retries": 2, "local": True}],
    "max_parallel": 2,
}


@pytest.mark.parametrize("case", PLAN_CASES, ids=lambda c: c.name)
def test_schema_accepts_every_shared_case(case: PlanCase) -> None:
    jsonschema.validate(case.plan, plan_input_schema())


async def test_the_rare_fields_left_out_of_the_schema_still_work() -> None:
    jsonschema.validate(RARE, plan_input_schema())
    checked = check_plan(RARE)
    step = checked.plan.steps[0]
    assert (step.timeout_s, step.retries, step.local) == (5, 2, True)
    assert checked.plan.max_parallel == 2
    plan = {"steps": [{"id": "a", "tool": "echo", "args": {"value": 1}, "timeout_s": 5}]}
    result = await execute_plan({**plan, "max_parallel": 1}, case_invoker)
    assert result.ok and result.returned == {"a": 1}


@pytest.mark.parametrize(
    ("plan", "said"),
    [
        (
            {"steps": [{"id": "a", "tool": "t", "bnid": {}}]},
            "step 'a', field 'bnid': unknown field 'bnid'. Fix: did you mean 'bind'?",
        ),
        (
            {"steps": [{"id": "a", "tool": "t"}], "max_paralel": 2},
            "field 'max_paralel': unknown field 'max_paralel'. Fix: did you mean 'max_parallel'?",
        ),
        (
            {"steps": [{"id": "A", "tool": "t"}]},
            "'A' is not a valid step id. Fix: start with a lowercase letter; use lowercase "
            "letters, digits and '_' (at most 32 characters)",
        ),
        ({"steps": []}, "the plan has no steps. Fix: add at least one step"),
        (
            {"steps": [{"id": "a", "tool": "t", "retries": 11}]},
            "field 'retries': Input should be less than or equal to 10 (got 11). Fix: "
            "'retries': Retries after a failed attempt",
        ),
        (
            {"steps": [{"id": "a", "tool": "t", "local": "yes"}], "max_parallel": 0},
            "field 'local': Input should be a valid boolean (got \"yes\"). Fix: 'local': true: "
            "run as a local activity",
        ),
        (
            {"steps": [{"id": "a", "tool": "t"}], "max_parallel": 0},
            "Fix: 'max_parallel': At most this many steps run at once (1 to 256)",
        ),
        (
            {
                "steps": [
                    {
                        "id": "a",
                        "tool": "map",
                        "args": {"over": [1], "do": {"tool": "t", "retries": 11}},
                    }
                ]
            },
            "field 'args.do.retries': Input should be less than or equal to 10. Fix: 'retries': "
            "Retries after a failed attempt",
        ),
    ],
)
def test_the_check_refuses_what_the_relaxed_schema_lets_through(
    plan: dict[str, Any], said: str
) -> None:
    jsonschema.validate(plan, plan_input_schema())  # the schema no longer refuses it
    with pytest.raises(PlanRejected) as raised:
        check_plan(plan)
    assert said in str(raised.value)


def test_schema_still_refuses_a_wrong_enum() -> None:
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(
            {"steps": [{"id": "a", "tool": "t"}], "on_error": "stop"}, plan_input_schema()
        )


def test_schema_descriptions_teach_the_language() -> None:
    # The spec says each rule once: the description the expressions, the schema the fields.
    fields = _descriptions(plan_input_schema())
    text = fields + "\n" + plan_tool_description()
    assert "= not ==" in text and text.count("==") == 1
    assert "$not(" in text
    assert "steps.<id>" in text
    assert '{"armour": "steps.lookup.armour"}' in fields
    assert "not_taken" in fields
    assert "matches nothing fails the step" in text
    assert "fail_fast" in fields and "continue" in fields


def test_tool_description() -> None:
    text = plan_tool_description(["look_up_monster", "roll_attack"], max_steps=16)
    assert PLAN_TOOL_NAME == "submit_workflow_plan"
    assert "$not(" in text
    assert "= not ==" in text
    assert "for a single call, call the tool directly" in text
    assert "at most 16 steps" in text
    assert "Tools you can plan: look_up_monster, roll_attack." in text
    # The step kinds by name; each one's form comes with a rejection (test_spec_size.py).
    assert "step kind: agent (" in text and "map, reduce or exit;" in text
    assert "Tools you can plan" not in plan_tool_description()
