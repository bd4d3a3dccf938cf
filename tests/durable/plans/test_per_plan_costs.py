"""The per-plan and per-step savings of issue 31 change no value anyone reads.

Resolving the event stream's handler annotations once gives the SDK the same handler types
it read from the text before; the cached timeout and retry policy equal the ones built per
call; a reply in plain JSON is read without asking for the converter, and any other one
through it.
"""

from __future__ import annotations

import inspect
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from temporalio.common import RawValue
from temporalio.contrib.workflow_streams import WorkflowStream
from temporalio.contrib.workflow_streams._types import PollInput, PollResult, PublishInput
from temporalio.converter import (
    CompositePayloadConverter,
    JSONPlainPayloadConverter,
    PayloadConverter,
    default,
)

from durable_plan.expressions import Budget, evaluate, parse
from durable_plan.language.errors import StepError
from durable_plan.language.json_text import compact_json, sorted_json
from durable_plan.language.options import ToolOptions
from durable_plan.language.plan import PlanResult, StepOutcome
from durable_plan.language.plan_limits import ExpressionLimits, error_path, plain_json
from durable_plan.local.runner import execute_plan
from durable_plan.run.events import PlanEvent
from durable_plan.temporal.wire.messages import StepResponse, json_payload, payload_value
from durable_plan.temporal.workflows.event_stream import _resolve_handler_annotations
from durable_plan.temporal.workflows.policy import CallPolicy, retry_policy

HANDLERS = ("_on_publish", "_on_poll", "_validate_poll", "_collect_batch", "_on_offset")


def test_the_stream_handlers_read_as_the_types_their_text_names() -> None:
    """Importing ``event_stream`` resolved them; the SDK's reading of each handler (what it
    does at every registration) names the same classes the text did."""
    from temporalio.common import _type_hints_from_func

    stream = object.__new__(WorkflowStream)
    expected = {
        "_on_publish": ([PublishInput], type(None)),
        "_on_poll": ([PollInput], PollResult),
        "_validate_poll": ([PollInput], type(None)),
        "_collect_batch": ([PollInput], PollResult),
        "_on_offset": ([], int),
    }
    for name in HANDLERS:
        notes = getattr(WorkflowStream, name).__annotations__
        assert not any(isinstance(note, str) for note in notes.values()), name
        assert _type_hints_from_func(getattr(stream, name)) == expected[name]
        function = getattr(WorkflowStream, name)
        code = function.__code__
        signature = inspect.signature(getattr(stream, name))  # from __signature__, recorded
        assert [p.name for p in signature.parameters.values()] == list(
            code.co_varnames[1 : code.co_argcount]
        ), name
        assert signature.return_annotation == expected[name][1] or (
            signature.return_annotation is None and expected[name][1] is type(None)
        ), name
    assert _resolve_handler_annotations(WorkflowStream) == 0  # once is enough


def test_an_annotation_that_does_not_resolve_stays_text() -> None:
    class Stream:
        def _on_known(self, payload: int) -> None: ...

        def _on_unknown(self, payload: NotDefinedAnywhere) -> None: ...  # type: ignore[name-defined]  # noqa: F821

        def public(self, payload: int) -> None: ...

    # This module's annotations are text (``from __future__ import annotations``).
    assert _resolve_handler_annotations(Stream) == 1
    assert Stream._on_known.__annotations__ == {"payload": int, "return": type(None)}
    assert Stream._on_unknown.__annotations__["payload"] == "NotDefinedAnywhere"
    assert Stream.public.__annotations__ == {"payload": "int", "return": "None"}  # as written


def test_the_cached_timing_equals_the_one_built_per_call() -> None:
    options = ToolOptions(timeout_s=12.5, retries=3)
    policy = CallPolicy.of(options)
    first = policy.activity_options("s0", "summary", 0.25)
    second = CallPolicy.of(options).activity_options("s1", None, 0.25)
    assert first["retry_policy"] == retry_policy(policy.max_attempts, 0.25)
    assert first["start_to_close_timeout"].total_seconds() == 12.5
    assert (first["activity_id"], first["summary"]) == ("s0", "summary")
    assert (second["activity_id"], second["summary"]) == ("s1", None)
    assert second["retry_policy"] is first["retry_policy"]  # built once per rule
    other = CallPolicy.of(options, retries=1).activity_options("s2", None, 0.25)
    assert other["retry_policy"].maximum_attempts == 2 != first["retry_policy"].maximum_attempts


class _Asked:
    """A converter source that counts how often it was asked."""

    def __init__(self, converter: PayloadConverter) -> None:
        self.converter = converter
        self.asked = 0

    def __call__(self) -> PayloadConverter:
        self.asked += 1
        return self.converter


@pytest.mark.parametrize("value", [{"b": 1, "a": [1, 2.5, None]}, [1, "x"], "text", None])
def test_plain_json_is_read_without_asking_for_the_converter(value: Any) -> None:
    source = _Asked(default().payload_converter)
    assert payload_value(json_payload(value), source) == value
    assert source.asked == 0


def test_another_encoding_is_read_through_the_converter_asked_for() -> None:
    tagged = CompositePayloadConverter(JSONPlainPayloadConverter(encoding="json/tagged"))
    [payload] = tagged.to_payloads([[{"n": 1}, 0.5]])
    source = _Asked(tagged)
    response = StepResponse.from_payload(RawValue(payload), source)
    assert (response.result, response.duration_ms, response.attempt) == ({"n": 1}, 0.5, 1)
    assert source.asked == 1
    # The converter itself still serves as its own source.
    assert payload_value(payload, tagged) == [{"n": 1}, 0.5]


def test_a_compact_payload_copies_only_its_metadata() -> None:
    one, two = json_payload({"a": 1}), StepResponse.compact('{"a":2}', 1, 0.5)
    assert one.metadata["encoding"] == two.metadata["encoding"] == b"json/plain"
    assert (one.data, two.data) == (b'{"a":1}', b'[{"a":2},0.5]')
    one.metadata["encoding"] = b"changed"
    assert json_payload(None).metadata["encoding"] == b"json/plain"


# -- the sixth round (issue 31): same values, fewer steps to make them ---------------------

_LEAVES = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=8)
)
_VALUES = st.recursive(
    _LEAVES,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(max_size=4), inner, max_size=4)
        | st.tuples(inner, inner)
    ),
    max_leaves=20,
)


def _outcome(walk: Any) -> Any:
    try:
        value = walk()
    except StepError as exc:
        return type(exc).__name__, str(exc), error_path(exc)
    return "value", value, repr(value)


@given(_VALUES, st.sampled_from([None, 16, 64, 256]))
def test_plain_json_charges_leaves_as_the_walk_of_each_did(
    value: Any, max_bytes: int | None
) -> None:
    """An ``adapt`` makes ``plain_json`` walk every node itself (the way it did for leaves
    too): the leaf shortcut must give the same value, the same refusal and the same path
    to the problem, whatever the byte budget."""
    fast = _outcome(lambda: plain_json(value, max_bytes=max_bytes))
    reference = _outcome(lambda: plain_json(value, max_bytes=max_bytes, adapt=lambda v: v))
    assert fast == reference


class _NotJson:
    def __str__(self) -> str:
        return "not-json"


_ODD_LEAVES = _LEAVES | st.sampled_from([_NotJson(), frozenset({1}), b"bytes", 1 + 2j])
_ODD_KEYS = st.text(max_size=4) | st.integers(-3, 3) | st.booleans() | st.none() | st.floats()
_ODD_VALUES = st.recursive(
    _ODD_LEAVES,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(_ODD_KEYS, inner, max_size=4)
        | st.tuples(inner, inner)
    ),
    max_leaves=20,
)


def _text_or_refusal(encode: Any, value: Any) -> tuple[str, str]:
    try:
        return "text", encode(value)
    except (TypeError, ValueError) as exc:
        return "refused", type(exc).__name__


@given(_ODD_VALUES)
def test_the_prebuilt_encoders_write_what_json_dumps_writes(value: Any) -> None:
    """Byte for byte, and the same refusal (a value JSON has no form for; keys of mixed types
    that cannot be sorted), for JSON values and for anything else a caller might pass."""
    assert _text_or_refusal(compact_json, value) == _text_or_refusal(
        lambda v: json.dumps(v, separators=(",", ":")), value
    )
    assert _text_or_refusal(sorted_json, value) == _text_or_refusal(
        lambda v: json.dumps(v, separators=(",", ":"), sort_keys=True, default=str), value
    )


def test_an_event_made_with_fields_left_none_is_the_constructors() -> None:
    """``made`` stores only the fields given a value; the rest read their class default,
    so equality, hashing, the repr and the wire form are ``__init__``'s."""
    values = {"step": "a", "tool": None, "level": 2, "error": None, "detail": None}
    made = PlanEvent.made("step_started", "p", 1.25, dict(values))
    built = PlanEvent(kind="step_started", plan="p", at=1.25, **values)  # type: ignore[arg-type]
    assert made == built and hash(made) == hash(built) and repr(made) == repr(built)
    assert (
        made.to_wire()
        == built.to_wire()
        == {
            "kind": "step_started",
            "plan": "p",
            "at": 1.25,
            "step": "a",
            "level": 2,
        }
    )
    assert made.tool is None and made.offset is None


def test_a_ledger_line_has_usage_only_with_tokens() -> None:
    plain = StepOutcome(id="a", tool="t", status="ok", level=0)
    agent = StepOutcome(id="b", tool="agent", status="ok", level=1, usage={"total": 3})
    assert "usage" not in plain.model_dump() and "usage" not in plain.model_dump(mode="json")
    assert '"usage"' not in plain.model_dump_json()
    assert agent.model_dump()["usage"] == {"total": 3}
    result = PlanResult(
        returned={},
        ledger=[plain, agent],
        levels=[["a"], ["b"]],
        inference_passes_saved=0,
        final=False,
    )
    dumped = result.model_dump(mode="json")
    assert "usage" not in dumped and "usage" not in dumped["ledger"][0]
    assert dumped["ledger"][1]["usage"] == {"total": 3}
    assert PlanResult.model_validate(dumped) == result
    # The serialization schema is the model's own (a wrap serializer made it "any").
    assert "ledger" in PlanResult.model_json_schema(mode="serialization")["properties"]


def test_a_number_read_by_a_plain_path_still_meets_a_tiny_value_limit() -> None:
    scope = {"steps": {"a": {"n": 12345}}}
    matched, value = evaluate(parse("steps.a.n"), scope, deterministic=True)
    assert (matched, value) == (True, 12345)
    with pytest.raises(StepError, match="limit"):
        evaluate(
            parse("steps.a.n"),
            scope,
            deterministic=True,
            budget=Budget(ExpressionLimits(max_value_bytes=4)),
        )


async def _bound_args(result_of_a: dict[str, Any], binding: str) -> tuple[Any, list[Any]]:
    """Step b's arguments when ``binding`` reads step a's result (in-process: the binding
    rules are the engine's, the same durably)."""
    calls: list[Any] = []

    async def invoke(tool: str, args: dict[str, Any]) -> Any:
        calls.append((tool, args))
        return result_of_a if tool == "a" else {"ok": True}

    plan = {
        "steps": [
            {"id": "a", "tool": "a", "args": {}},
            {"id": "b", "tool": "b", "bind": {"n": binding}},
        ]
    }
    result = await execute_plan(plan, invoke)
    return result, calls


async def test_a_whole_float_read_by_a_plain_path_is_bound_as_an_integer() -> None:
    """JSONata's numbers: ``3.0`` binds as ``3`` whichever way the path is read (a
    shortcut that kept the float changed activity inputs recorded in history)."""
    assert evaluate(parse("steps.a.x"), {"steps": {"a": {"x": 3.0}}}, deterministic=True) == (
        True,
        3,
    )
    assert (
        type(evaluate(parse("steps.a.x"), {"steps": {"a": {"x": 3.0}}}, deterministic=True)[1])
        is int
    )
    assert evaluate(parse("steps.a.x"), {"steps": {"a": {"x": 2.5}}}, deterministic=True)[1] == 2.5
    _, calls = await _bound_args({"x": 3.0}, "steps.a.x")
    assert calls[1] == ("b", {"n": 3}) and type(calls[1][1]["n"]) is int


async def test_a_plain_path_through_nested_lists_still_fails_on_a_missing_field() -> None:
    """JSONata flattens nested lists and finds ``y``; the plan's own rule does not guess:
    the field is missing where the path names it, so the binding fails (as it always did:
    a skipped check here would have run step b, and scheduled an activity an old history
    does not have)."""
    result, calls = await _bound_args({"l": [[{"y": 1}]]}, "steps.a.l.y")
    assert [tool for tool, _ in calls] == ["a"]
    failed = {o.id: o for o in result.ledger}["b"]
    assert failed.status == "failed"
    assert failed.error is not None and "matched no value" in failed.error
    assert "steps.a.l is a list whose items have keys" in failed.error


def test_a_finished_run_makes_its_result_once() -> None:
    """The durable runner bounds the result, then announces the end: both read the one
    result the run made (issue 31), equal to what a run asked only once makes."""
    from durable_plan.check import check_plan
    from durable_plan.run.engine import PlanRun

    def finished_run() -> PlanRun:
        run = PlanRun(
            check_plan(
                {
                    "steps": [
                        {"id": "a", "tool": "t", "args": {"n": 1}},
                        {"id": "b", "tool": "t", "bind": {"n": "steps.a.n"}},
                    ],
                    "returns": ["b"],
                }
            )
        )
        while calls := run.next_calls():
            for call in calls:
                run.record_result(call.step_id, {"n": call.args["n"] + 1}, duration_ms=0.5)
        return run

    run = finished_run()
    first = run.result()
    assert run.result() is first
    assert run.finish() is first
    assert finished_run().finish() == first
    assert first.returned == {"b": {"n": 3}}


def test_a_running_plan_has_no_result_yet() -> None:
    from durable_plan.check import check_plan
    from durable_plan.run.engine import PlanRun

    run = PlanRun(check_plan({"steps": [{"id": "a", "tool": "t", "args": {}}]}))
    run.next_calls()
    with pytest.raises(RuntimeError, match="still running"):
        run.result()
