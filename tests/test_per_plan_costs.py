"""The per-plan and per-step savings of issue 31 change no value anyone reads.

Resolving the event stream's handler annotations once gives the SDK the same handler types
it read from the text before; the cached timeout and retry policy equal the ones built per
call; a reply in plain JSON is read without asking for the converter, and any other one
through it.
"""

from __future__ import annotations

import inspect
from typing import Any

import pytest
from temporalio.common import RawValue
from temporalio.contrib.workflow_streams import WorkflowStream
from temporalio.contrib.workflow_streams._types import PollInput, PollResult, PublishInput
from temporalio.converter import (
    CompositePayloadConverter,
    JSONPlainPayloadConverter,
    PayloadConverter,
    default,
)

from durable_plan.language.options import ToolOptions
from durable_plan.temporal.event_stream import _resolve_handler_annotations
from durable_plan.temporal.messages import StepResponse, json_payload, payload_value
from durable_plan.temporal.policy import CallPolicy, retry_policy

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
    policy = CallPolicy.of(options, owner_rules=True)
    first = policy.activity_options("s0", "summary", 0.25)
    second = CallPolicy.of(options, owner_rules=True).activity_options("s1", None, 0.25)
    assert first["retry_policy"] == retry_policy(policy.max_attempts, 0.25)
    assert first["start_to_close_timeout"].total_seconds() == 12.5
    assert (first["activity_id"], first["summary"]) == ("s0", "summary")
    assert (second["activity_id"], second["summary"]) == ("s1", None)
    assert second["retry_policy"] is first["retry_policy"]  # built once per rule
    other = CallPolicy.of(options, retries=1, owner_rules=True).activity_options("s2", None, 0.25)
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
