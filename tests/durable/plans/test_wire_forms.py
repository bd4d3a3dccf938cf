"""The compact wire forms a plan's history carries read back exactly: every tool option
that differs from its default survives the tool table, and a step request with its bounds
at their defaults reads back with those bounds. (A default that says "nothing" may stay off
the wire; one that says something, like ``reuse=True``, never.)"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from durable_plan.check.json_schema import SchemaValidator, without_annotations
from durable_plan.language.options import ToolOptions
from durable_plan.temporal.client.start import _prepare
from durable_plan.temporal.wire.messages import StepRequest
from durable_plan.temporal.wire.plan_settings import (
    DEFAULT_MAX_RESULT_BYTES,
    DEFAULT_MAX_STORED_BYTES,
    Visibility,
)
from durable_plan.temporal.wire.workflow_inputs import PlanInput
from durable_plan.tools.registry import ToolRegistry

NOT_DEFAULT: dict[str, Any] = {
    "timeout_s": 5.0,
    "retries": 0,
    "heartbeat_timeout_s": 2.0,
    "requires_approval": True,
    "reuse": False,
    "local": True,
    "allow_local": True,
    "input_schema": {"type": "object", "properties": {"n": {"type": "integer"}}},
    "description": "Counts.",
    "kind": "activity",
    "params": ["n"],
    "defaults": {"n": 1},
    "mcp_server": "s",
    "mcp_tool": "t",
    "mcp_task_queue": "mq",
    "task_queue": "tq",
    "max_concurrent": 2,
    "max_per_second": 1.5,
    "output_schema": {"type": "object", "properties": {"n": {"type": "integer"}}},
    "saved_plan": {"plan": {"steps": [{"id": "a", "tool": "t"}]}, "inputs": {"type": "object"}},
    "sandbox": "work",
}


def test_every_option_has_a_value_off_its_default_here() -> None:
    assert set(NOT_DEFAULT) == {f.name for f in dataclasses.fields(ToolOptions)}


@given(st.sets(st.sampled_from(sorted(NOT_DEFAULT))))
def test_a_tool_table_reads_back_exactly(changed: set[str]) -> None:
    options = ToolOptions(**{name: NOT_DEFAULT[name] for name in changed})
    request = PlanInput(plan={"steps": []}, tools={"t": options})
    assert PlanInput.from_wire(request.to_wire()).tools["t"] == options


def test_defaults_that_say_nothing_stay_off_the_wire() -> None:
    wire = PlanInput(plan={"steps": []}, tools={"t": ToolOptions()}).to_wire()["tools"]["t"]
    # Nothing: the empty values, and the defaults the wire fixes (``COMPACT_TOOL_DEFAULTS``).
    assert wire == {}


@given(
    st.booleans(),
    st.booleans(),
    st.one_of(st.none(), st.integers(0, 5)),
    st.one_of(st.none(), st.text(max_size=8)),
)
def test_a_step_request_reads_back_exactly(
    bounds_at_default: bool, stores: bool, retries: int | None, chain: str | None
) -> None:
    request = StepRequest(
        "s",
        {"a": 1},
        DEFAULT_MAX_RESULT_BYTES if bounds_at_default else 1000,
        retries,
        64 if stores else None,
        DEFAULT_MAX_STORED_BYTES if bounds_at_default else 2000,
        chain if stores else None,
    )
    back = StepRequest.from_wire(request.to_compact_wire("run"), "s", "run")
    if not stores:  # the store's bounds travel only with a store
        request = dataclasses.replace(request, max_stored_bytes=DEFAULT_MAX_STORED_BYTES)
    assert back == request


def test_a_schema_without_annotations_keeps_everything_a_validator_reads() -> None:
    schema = {
        "type": "object",
        "title": "Args",
        "description": "What the tool takes.",
        "properties": {
            # A parameter named like an annotation is a name: it stays.
            "description": {"type": "string", "description": "free text", "maxLength": 9},
            "title": {"type": "string", "title": "T", "enum": ["a", "b"]},
            "tags": {"type": "array", "items": {"type": "string", "description": "a tag"}},
            "pick": {"anyOf": [{"type": "integer", "title": "I"}, {"type": "null"}]},
        },
        "$defs": {"X": {"type": "integer", "examples": [1], "$comment": "c"}},
        "required": ["description"],
        "default": {"description": "a value, not a schema"},
    }
    assert without_annotations(schema) == {
        "type": "object",
        "properties": {
            "description": {"type": "string", "maxLength": 9},
            "title": {"type": "string", "enum": ["a", "b"]},
            "tags": {"type": "array", "items": {"type": "string"}},
            "pick": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
        },
        "$defs": {"X": {"type": "integer"}},
        "required": ["description"],
        "default": {"description": "a value, not a schema"},
    }
    for value in ({"description": "ok"}, {"description": 3}, {"title": "x"}, {}):
        full, bare = SchemaValidator(schema), SchemaValidator(without_annotations(schema))
        assert full.is_valid(value) == bare.is_valid(value)


def test_the_start_event_carries_what_the_plan_needs_and_no_more() -> None:
    """A plan no model reads: no tool descriptions, no schema annotations, no model settings;
    that its sender checked it, always."""
    registry = ToolRegistry()

    async def look(name: str, depth: int = 1) -> dict[str, Any]:
        """Looks a thing up.

        Args:
            name: The thing's name, as the index spells it.
            depth: How far to look.
        """
        return {"name": name}

    registry.add(look)
    plan = {"steps": [{"id": "a", "tool": "look", "args": {"name": "x"}}]}
    _, request = _prepare(
        plan, registry, max_steps=32, max_result_bytes=2**18, model="m", allowed_models=["m*"]
    )
    wire = request.to_wire()
    # "summary" is what the input's JSON form leaves off (``COMPACT_UI_METADATA``).
    assert wire["settings"] == {"checked_by_sender": True}
    table = wire["tools"]["look"]
    assert "description" not in table
    assert "description" not in json.dumps(table["input_schema"])
    assert table["input_schema"]["required"] == ["name"]


def test_the_input_reads_back_from_every_form() -> None:
    request = PlanInput(
        plan={"steps": []}, checked_by_sender=True, visibility=Visibility(ui_metadata="full")
    )
    flat = dataclasses.asdict(request)  # ``execute_workflow(PlanWorkflow.run, request)``
    for raw in (request, request.to_wire(), flat):
        assert PlanInput.from_wire(raw) == request
