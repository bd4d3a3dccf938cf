"""The compact wire forms a plan's history carries read back exactly: every tool option
that differs from its default survives the tool table, and a step request with its bounds
at their defaults reads back with those bounds. (A default that says "nothing" may stay off
the wire; one that says something, like ``reuse=True``, never.)"""

from __future__ import annotations

import dataclasses
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from durable_plan.language.options import ToolOptions
from durable_plan.temporal.messages import (
    DEFAULT_MAX_RESULT_BYTES,
    DEFAULT_MAX_STORED_BYTES,
    PlanInput,
    StepRequest,
)

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
    assert set(wire) == {"timeout_s", "retries", "reuse", "kind"}


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
    back = StepRequest.from_wire(request.to_wire())
    if not stores:  # the store's bounds travel only with a store
        request = dataclasses.replace(request, max_stored_bytes=DEFAULT_MAX_STORED_BYTES)
    assert back == request
