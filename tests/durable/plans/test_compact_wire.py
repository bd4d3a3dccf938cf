"""The compact wire forms of issue 31 read back exactly (the only forms since 0.1.0's retired).

A step request without its step id, the run's own chain or the default store threshold; a
tool's reply as ``[result, duration_ms(, attempt)]`` in the tool's own key order; a plan
result without ``status: "ok"``, ``attempts: 1``, each line's level, ``final: false`` and
the rounds saved the ledger already says; a tool table and settings without the defaults
``COMPACT_TOOL_DEFAULTS`` fixes. On the real dev server: a plan's history holds those forms,
and its result reads back as the in-process runner's.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.common import RawValue
from temporalio.converter import (
    CompositePayloadConverter,
    JSONPlainPayloadConverter,
    default,
)

from durable_plan import plan_worker, start_plan
from durable_plan.language.options import DEFAULT_RETRIES, DEFAULT_TIMEOUT_S, ToolOptions
from durable_plan.language.plan import PlanResult, StepOutcome
from durable_plan.local.runner import execute_plan
from durable_plan.temporal.wire.messages import StepRequest, StepResponse, json_payload
from durable_plan.temporal.wire.plan_settings import (
    DEFAULT_MAX_RESULT_BYTES,
    DEFAULT_MAX_STORED_BYTES,
    Visibility,
)
from durable_plan.temporal.wire.result_form import compact_result, expand_result, plan_result_of
from durable_plan.temporal.wire.tool_table import COMPACT_TOOL_DEFAULTS
from durable_plan.temporal.wire.workflow_inputs import PlanInput
from durable_plan.tools.registry import ToolRegistry

CONVERTER = default().payload_converter
RUN_ID = "0197a5c4-0000-7000-8000-00000000abcd"

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=6),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=4)
    ),
    max_leaves=12,
)


# -- step requests ---------------------------------------------------------------------


@given(
    st.booleans(),
    st.one_of(st.none(), st.integers(0, 5)),
    st.sampled_from([None, DEFAULT_MAX_RESULT_BYTES, 64]),
    st.sampled_from([None, RUN_ID, "another-run"]),
)
def test_a_compact_step_request_reads_back_exactly(
    bounds_at_default: bool, retries: int | None, store_over: int | None, chain: str | None
) -> None:
    request = StepRequest(
        "rolls[2]",
        {"a": 1},
        DEFAULT_MAX_RESULT_BYTES if bounds_at_default else 1000,
        retries,
        store_over,
        DEFAULT_MAX_STORED_BYTES if bounds_at_default else 2000,
        chain if store_over is not None else None,
    )
    wire = json.loads(json.dumps(request.to_compact_wire(RUN_ID)))  # as the converter sends it
    back = StepRequest.from_wire(wire, "rolls[2]", RUN_ID)
    if store_over is None:  # the store's bounds travel only with a store
        request = dataclasses.replace(request, max_stored_bytes=DEFAULT_MAX_STORED_BYTES)
    assert back == request
    # A plain step's request is three keys: the step id is the activity's own.
    assert "step_id" not in wire


def test_a_plain_steps_compact_request_is_its_arguments_and_retries() -> None:
    request = StepRequest("s0", {"n": 0}, retries=2, store_over_bytes=DEFAULT_MAX_RESULT_BYTES)
    request = dataclasses.replace(request, store_chain=RUN_ID)
    assert request.to_compact_wire(RUN_ID) == {"v": 2, "args": {"n": 0}, "retries": 2}


def test_the_activity_reads_its_raw_argument_in_every_encoding() -> None:
    """The wrapper takes its argument raw: the request as the workflow encodes it once, as
    the converter encodes it (keys sorted), and a payload a converter of the user's own
    wrote (read through that converter). Anything else is refused, never half-read (the
    full form 0.1.0 sent, with its ``step_id``, included)."""
    request = StepRequest("s0", {"n": 0}, retries=2)
    compact = json_payload(request.to_compact_wire(RUN_ID))
    [sorted_keys] = CONVERTER.to_payloads([request.to_compact_wire(RUN_ID)])
    # A converter of the user's own: JSON under another encoding name.
    tagged_converter = CompositePayloadConverter(JSONPlainPayloadConverter(encoding="json/tagged"))
    [tagged] = tagged_converter.to_payloads([request.to_compact_wire(RUN_ID)])
    assert tagged.metadata["encoding"] == b"json/tagged"
    read = [
        StepRequest.from_payload(RawValue(compact), CONVERTER, "s0", RUN_ID),
        StepRequest.from_payload(RawValue(sorted_keys), CONVERTER, "s0", RUN_ID),
        StepRequest.from_payload(RawValue(tagged), tagged_converter, "s0", RUN_ID),
    ]
    assert [(r.step_id, r.args, r.retries) for r in read] == [("s0", {"n": 0}, 2)] * 3
    for bad in ([1], {"step_id": "s0", "args": {"n": 0}}):
        with pytest.raises(TypeError, match="not a plan step request"):
            StepRequest.from_payload(RawValue(json_payload(bad)), CONVERTER, "s0", RUN_ID)


# -- step replies ----------------------------------------------------------------------


@given(
    json_values, st.integers(1, 9), st.floats(0, 1e6, allow_nan=False).map(lambda f: round(f, 3))
)
def test_a_compact_reply_reads_back_in_the_tools_key_order(
    result: Any, attempt: int, duration_ms: float
) -> None:
    text = json.dumps(result, separators=(",", ":"))
    payload = StepResponse.compact(text, attempt, duration_ms)
    back = StepResponse.from_payload(RawValue(payload), CONVERTER)
    assert (back.result, back.attempt, back.duration_ms) == (result, attempt, duration_ms)
    assert json.dumps(back.result, separators=(",", ":")) == text  # order kept
    assert back.size == len(payload.data)
    # Read outside a worker (a history, ``recovery``): the converter decodes it as a list.
    assert StepResponse.from_wire(CONVERTER.from_payload(payload)).result == result


@pytest.mark.parametrize(
    "bad",
    [[], [1], [1, "x"], [1, 2, 3, 4], {"result": 1}, "x", {"result_json": "1", "attempt": 1}],
)
def test_a_reply_of_another_shape_is_a_clear_error(bad: Any) -> None:
    with pytest.raises(TypeError, match="not a plan step response"):
        StepResponse.from_wire(bad)


# -- the plan's result -----------------------------------------------------------------

STATUSES = ["ok", "failed", "skipped", "not_taken"]


@st.composite
def plan_results(draw: st.DrawFn) -> PlanResult:
    n = draw(st.integers(1, 6))
    ids = [f"s{i}" for i in range(n)]
    level_of = {sid: draw(st.integers(0, 3)) for sid in ids}
    levels = [[sid for sid in ids if level_of[sid] == lvl] for lvl in range(4)]
    levels = [level for level in levels if level]
    level_of = {sid: i for i, level in enumerate(levels) for sid in level}
    ledger = [
        StepOutcome(
            id=sid,
            tool=draw(st.sampled_from(["roll", "look"])),
            status=draw(st.sampled_from(STATUSES)),
            level=level_of[sid],
            duration_ms=draw(st.sampled_from([0.0, 1.25])),
            error=draw(st.sampled_from([None, "boom"])),
            attempts=draw(st.integers(0, 3)),
        )
        for sid in ids
    ]
    return PlanResult(
        returned={},
        ledger=ledger,
        levels=levels,
        inference_passes_saved=draw(st.integers(0, 4)),
        final=draw(st.booleans()),
    )


def _payload(result: PlanResult) -> dict[str, Any]:
    """The full form, as ``bounded_payload`` builds it."""
    payload = result.model_dump(mode="json")
    payload["ledger"] = [
        {k: v for k, v in line.items() if v is not None} for line in payload["ledger"]
    ]
    payload.pop("exited", None)
    return payload


@given(plan_results())
def test_a_compact_result_reads_back_exactly(result: PlanResult) -> None:
    full = _payload(result)
    compact = json.loads(json.dumps(compact_result(full)))
    assert plan_result_of(compact) == result
    assert plan_result_of(full) == result  # the full form reads too
    assert expand_result(full) == {**full, "ledger": [dict(line) for line in full["ledger"]]}


def test_a_compact_result_leaves_off_what_every_reader_knows() -> None:
    result = PlanResult(
        returned={"b": 2},
        ledger=[
            StepOutcome(id="a", tool="t", status="ok", level=0, duration_ms=1.5, attempts=1),
            StepOutcome(id="b", tool="t", status="failed", level=1, error="x", attempts=3),
        ],
        levels=[["a"], ["b"]],
        inference_passes_saved=0,
        final=False,
    )
    compact = compact_result(_payload(result))
    assert compact["ledger"] == [
        {"id": "a", "tool": "t", "duration_ms": 1.5},
        {
            "id": "b",
            "tool": "t",
            "status": "failed",
            "duration_ms": 0.0,
            "error": "x",
            "attempts": 3,
        },
    ]
    assert "final" not in compact and "inference_passes_saved" not in compact


# -- the tool table and settings -------------------------------------------------------


def test_the_compact_tool_defaults_are_todays_defaults() -> None:
    """Fixed in the wire module so a table in flight keeps its rules; equal to today's
    ``ToolOptions`` defaults (a change there must leave these as they are)."""
    fresh = ToolOptions()
    assert dict(COMPACT_TOOL_DEFAULTS) == {
        "kind": fresh.kind,
        "reuse": fresh.reuse,
        "retries": DEFAULT_RETRIES,
        "timeout_s": DEFAULT_TIMEOUT_S,
    }


@pytest.mark.parametrize("ui", ["summary", "details", "full"])
def test_a_compact_input_reads_back_exactly(ui: str) -> None:
    tools = {"t": ToolOptions(), "u": ToolOptions(retries=0, timeout_s=5.0, reuse=False)}
    request = PlanInput(plan={"steps": []}, tools=tools, visibility=Visibility(ui_metadata=ui))
    wire = json.loads(json.dumps(request.to_wire()))
    assert PlanInput.from_wire(wire) == request
    assert wire["tools"]["t"] == {}
    assert ("ui_metadata" in wire["settings"]) == (ui != "summary")


# -- on the server ---------------------------------------------------------------------


def _payload_json(payloads: Any) -> Any:
    return json.loads(payloads.payloads[0].data)


REGISTRY = ToolRegistry()


async def count(n: int) -> dict[str, Any]:
    """Counts on; its keys are not in sorted order (the reply keeps the tool's order)."""
    return {"z": n + 1, "a": n}


REGISTRY.add(count, allow_local=True)


PLAN = {
    "steps": [
        {"id": "first", "tool": "count", "args": {"n": 0}},
        {"id": "second", "tool": "count", "bind": {"n": "steps.first.z"}, "local": True},
        {"id": "third", "tool": "count", "bind": {"n": "steps.second.z"}},
    ],
    "final": True,
}


@pytest.mark.server
async def test_a_plans_history_holds_the_compact_forms(client: Client, task_queue: str) -> None:
    async with plan_worker(client, task_queue=task_queue, registry=REGISTRY):
        handle = await start_plan(client, PLAN, task_queue=task_queue, registry=REGISTRY)
        durable = await handle.result()
        history = await handle.handle.fetch_history()
    in_process = await execute_plan(PLAN, REGISTRY)
    assert [(o.id, o.status, o.attempts, o.level) for o in durable.ledger] == [
        (o.id, o.status, o.attempts, o.level) for o in in_process.ledger
    ]
    assert (durable.final, durable.inference_passes_saved) == (True, 3)
    assert durable.returned == in_process.returned

    scheduled = [
        _payload_json(e.activity_task_scheduled_event_attributes.input)
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]
    assert scheduled == [
        {"v": 2, "args": {"n": 0}, "retries": 2},
        {"v": 2, "args": {"n": 2}, "retries": 2},
    ]
    completed = [
        e.activity_task_completed_event_attributes.result.payloads[0].data
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED
    ]
    assert [json.loads(c)[0] for c in completed] == [{"z": 1, "a": 0}, {"z": 3, "a": 2}]
    assert all(c.startswith(b'[{"z":') for c in completed)  # not re-encoded, not sorted
    [done] = [
        e.workflow_execution_completed_event_attributes
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED
    ]
    result = _payload_json(done.result)
    assert all(set(line) == {"id", "tool", "duration_ms"} for line in result["ledger"])
    assert "final" in result and "inference_passes_saved" not in result
    assert plan_result_of(result).ledger == durable.ledger
