"""What people and models see: the summary, the model's result, the tool schema and description."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

from durable_plan.language.plan import PlanResult, StepOutcome
from durable_plan.language.schema import PLAN_TOOL_NAME, plan_input_schema, plan_tool_description
from durable_plan.local.runner import execute_plan
from durable_plan.run.summary import failure_text, result_for_model, summarize
from tests.case_tools import case_invoker
from tests.plan_cases import CASES_BY_NAME, PLAN_CASES, PlanCase


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
    step = schema["properties"]["steps"]["items"]
    assert set(step["properties"]) >= {"id", "tool", "args", "bind", "after", "when", "join"}
    assert step["required"] == ["id", "tool"]
    assert step["properties"]["id"]["pattern"] == "^[a-z][a-z0-9_]{0,31}$"
    assert step["additionalProperties"] is False
    assert set(schema["properties"]) >= {"steps", "returns", "final", "on_error"}


@pytest.mark.parametrize("case", PLAN_CASES, ids=lambda c: c.name)
def test_schema_accepts_every_shared_case(case: PlanCase) -> None:
    jsonschema.validate(case.plan, plan_input_schema())


def test_schema_rejects_misspelled_fields_and_bad_ids() -> None:
    schema = plan_input_schema()
    bad: dict[str, Any]
    for bad in (
        {"steps": [{"id": "a", "tool": "t", "bnid": {}}]},
        {"steps": [{"id": "A", "tool": "t"}]},
        {"steps": []},
        {"steps": [{"id": "a", "tool": "t"}], "on_error": "stop"},
    ):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, schema)


def test_schema_descriptions_teach_the_language() -> None:
    # The spec says each rule once: the description the expressions, the schema the fields.
    fields = _descriptions(plan_input_schema())
    text = fields + "\n" + plan_tool_description()
    assert "= not ==" in text and text.count("==") == 1
    assert "$not(" in text
    assert "steps.<id>" in text
    assert "[steps.a.damage, steps.b.damage]" in fields
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
    for kind in ('"agent"', '"map"', '"reduce"', '"exit"'):
        assert kind in text
    assert "Tools you can plan" not in plan_tool_description()
