"""A plan's settings are small records both workflow inputs share (``wire.plan_settings``): a
setting lives in one record, travels in both inputs' JSON form (flat, only when it differs
from its default) and in the dataclass form of an input built by hand, and is reached by
its flat name from ``start_plan``'s keywords and a plugin's ``plan_options``."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from temporalio.converter import DataConverter

from durable_plan.language.options import ToolOptions
from durable_plan.temporal.wire.plan_settings import (
    PLAN_OPTIONS,
    RECORDS,
    SETTING_RECORD,
    PlanSettings,
    Visibility,
)
from durable_plan.temporal.wire.workflow_inputs import AGENT_STEP_RECORDS, AgentStepInput, PlanInput


def _off_default(f: dataclasses.Field[Any]) -> Any:
    """A value of the setting's type other than its default."""
    default = f.default
    if f.name == "ui_metadata":
        return "details"
    if f.name == "return_stored":
        return "preview"
    if isinstance(default, bool):
        return not default
    if isinstance(default, int | float):
        return default + 1
    if f.name in ("hooked_tools", "allowed_models"):
        return ["look_*"]
    if f.name == "hook_bytes":
        return 4096
    if f.name == "breakpoints":
        return ("e1/agent.*/charge*", "e2")
    if f.name == "path_prefix":
        return "e4/plan.fetch"
    return f"{f.name}-value"


def _everything_set(classes: dict[str, type[Any]]) -> dict[str, Any]:
    return {
        name: cls(**{f.name: _off_default(f) for f in dataclasses.fields(cls)})
        for name, cls in classes.items()
    }


def _dataclass_form(value: Any) -> Any:
    """What ``execute_workflow(..., value)`` sends: the default converter's JSON."""
    [payload] = DataConverter.default.payload_converter.to_payloads([value])
    return json.loads(payload.data)


def test_each_setting_is_in_one_record_and_every_record_is_in_both_inputs() -> None:
    names = [f.name for cls in RECORDS.values() for f in dataclasses.fields(cls)]
    assert len(names) == len(set(names)) == len(SETTING_RECORD)
    plan_fields = {f.name for f in dataclasses.fields(PlanInput)}
    step_fields = {f.name for f in dataclasses.fields(AgentStepInput)}
    assert set(RECORDS) <= plan_fields
    assert set(AGENT_STEP_RECORDS) <= step_fields and "models" not in step_fields
    assert not (set(names) & (plan_fields | step_fields)), "no setting beside its record"


def test_every_setting_reads_back_from_both_forms_of_a_plan_input() -> None:
    request = PlanInput(
        plan={"steps": []},
        tools={"t": ToolOptions(retries=0)},
        **_everything_set(RECORDS),
        inputs={"n": 1},
        memory={"steps": []},
        checked_by_sender=True,
    )
    wire = json.loads(json.dumps(request.to_wire()))
    assert set(wire["settings"]) == set(SETTING_RECORD) | {"inputs", "memory", "checked_by_sender"}
    for raw in (wire, _dataclass_form(request), request):
        assert PlanInput.from_wire(raw) == request


def test_every_setting_reads_back_from_both_forms_of_an_agent_step_input() -> None:
    step = AgentStepInput(
        step_id="s",
        prompt="p",
        output_schema={"type": "object"},
        tools={"t": ToolOptions(timeout_s=5.0)},
        max_iterations=3,
        model="m",
        system_prompt="sp",
        **_everything_set(AGENT_STEP_RECORDS),
    )
    wire = json.loads(json.dumps(step.to_wire()))
    for raw in (wire, _dataclass_form(step), step):
        assert AgentStepInput.from_wire(raw) == step
    with pytest.raises(TypeError, match="not an agent step input"):
        AgentStepInput.from_wire({"prompt": "p"})


def test_settings_at_their_defaults_stay_off_the_wire() -> None:
    """A sender's plan (the UI gets its summary) and an agent step with nothing set carry
    no settings at all; a hand-built input gives the web UI everything, as it always did."""
    sent = PlanInput(plan={"steps": []}, **PlanSettings().records())
    assert sent.to_wire()["settings"] == {}
    by_hand = PlanInput(plan={"steps": []})
    assert by_hand.visibility == Visibility(ui_metadata="full")
    assert by_hand.to_wire()["settings"] == {"ui_metadata": "full"}
    step = AgentStepInput("s", "p", {}, visibility=Visibility(ui_metadata="summary"))
    assert step.to_wire()["settings"] == {}


def test_flat_names_reach_their_records_and_a_misspelt_one_is_refused() -> None:
    settings = PlanSettings.of({"max_result_bytes": 10, "fairness_key": "t", "ui_metadata": "full"})
    assert settings.bounds.max_result_bytes == 10
    assert settings.routing.fairness_key == "t"
    assert settings.visibility.ui_metadata == "full"
    assert PlanSettings.of({}).visibility.ui_metadata == "summary", "clients send summary"
    with pytest.raises(TypeError, match=r"unknown plan setting.*store_over; the settings are: "):
        PlanSettings.of({"store_over": 1})


def test_a_plans_sender_may_set_what_the_plugin_does_not() -> None:
    assert "store_over_bytes" in PLAN_OPTIONS and "ui_metadata" in PLAN_OPTIONS
    for set_by_plugin in ("max_steps", "task_queue", "hook_key", "default_model"):
        assert set_by_plugin not in PLAN_OPTIONS
