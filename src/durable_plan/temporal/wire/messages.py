"""What one step sends and gets back, and the plain JSON payloads both travel in.

A step's request (``StepRequest``) and its reply (``StepResponse``) are in the plan's
history once per step, so each has a compact form, written and read as ``json/plain``
payloads without the converter's type-hint walk; a person's answer to a gated step
(``ApprovalDecision``) and the workflow names every history carries live here too. The
workflows' inputs are in ``workflow_inputs`` (their settings in ``plan_settings``, their
tool tables in ``tool_table``); the tool hooks' messages in ``hook_messages``. JSON-typed
fields only, so they round-trip through both the default data converter and the pydantic
converter that the Strands plugin installs.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeAlias

from temporalio.api.common.v1 import Payload
from temporalio.common import RawValue
from temporalio.converter import PayloadConverter

from durable_plan.language.json_text import compact_json
from durable_plan.temporal.wire.plan_settings import (
    DEFAULT_MAX_RESULT_BYTES,
    DEFAULT_MAX_STORED_BYTES,
)

PLAN_WORKFLOW_NAME = "PlanWorkflow"
"""The plan workflow's type: what every plan history names (never rename it)."""
PLANS_TOPIC = "plans"
"""A conversation's topic announcing each plan it starts (``WorkflowPlanPlugin(plan_stream=)``):
the conversation publishes there (workflow code), ``subscribe`` reads it (client code)."""

COMPACT_REQUEST = 2
"""``"v"`` of a ``StepRequest`` on the wire (``to_compact_wire``)."""


def failure_message(exc: BaseException) -> str:
    """The text a person or model can act on, from a Temporal failure's innermost cause."""
    return error_text(getattr(exc, "cause", None) or exc)


SDK_DECODE_WRAPPERS = ("Failed decoding arguments", "Failed decoding heartbeat details")
"""What the SDK says when an activity's input does not decode, whatever the reason."""


def error_text(error: BaseException) -> str:
    """A failure's message. The SDK's words for an activity whose arguments did not decode
    say nothing of why, so its cause's follow (a stored payload this worker cannot read, a
    key it lacks): "Failed decoding arguments: the payload v0/... is stored outside ..."."""
    message = getattr(error, "message", None)
    if not isinstance(message, str) or not message:
        return str(error)
    inner = getattr(getattr(error, "cause", None), "message", None)
    if message in SDK_DECODE_WRAPPERS and isinstance(inner, str) and inner:
        return f"{message}: {inner}"
    return message


@dataclass
class StepRequest:
    """What a tool activity receives: the step's arguments plus where it runs."""

    step_id: str
    args: dict[str, Any]
    max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES
    retries: int | None = None
    """The step's retry budget for the tool's own failures; attempts a lost worker
    interrupted do not spend it (None: every attempt counts, as Temporal counts)."""
    store_over_bytes: int | None = None
    """Results over this many bytes go to the worker's result store and the step returns
    a reference; references in ``args`` are read back (None: neither)."""
    max_stored_bytes: int = DEFAULT_MAX_STORED_BYTES
    store_chain: str | None = None
    """The first run id of the plan's chain: its stored results are the run's own."""
    sandbox: dict[str, Any] | None = None
    """A sandbox tool's environment: the conversation's chain, its stream topic and the
    call's path, set by workflow code from the plan's trusted input, never from ``args``
    (``workflows/sandbox_chain.sandbox_scope``); None for every other tool."""

    def to_compact_wire(self, run_id: str) -> dict[str, Any]:
        """The request on the wire (``"v": 2``): the step id is the activity's own id, the
        store's chain the run's own id and its threshold ``max_result_bytes``'s default,
        each written only when it is something else (None as null); bounds at their
        defaults stay off (one request per step, each in the plan's history). The caller
        must schedule the activity with ``step_id`` as its id."""
        wire: dict[str, Any] = {"v": COMPACT_REQUEST, "args": self.args}
        if self.max_result_bytes != DEFAULT_MAX_RESULT_BYTES:
            wire["max_result_bytes"] = self.max_result_bytes
        if self.retries is not None:
            wire["retries"] = self.retries
        if self.store_over_bytes != DEFAULT_MAX_RESULT_BYTES:
            wire["store_over_bytes"] = self.store_over_bytes
        if self.store_over_bytes is not None:
            if self.max_stored_bytes != DEFAULT_MAX_STORED_BYTES:
                wire["max_stored_bytes"] = self.max_stored_bytes
            if self.store_chain != run_id:
                wire["store_chain"] = self.store_chain
        if self.sandbox is not None:
            wire["sandbox"] = self.sandbox
        return wire

    @classmethod
    def from_wire(cls, data: Any, activity_id: str = "", run_id: str = "") -> StepRequest:
        """Read the activity argument (fields it lacks take what ``to_compact_wire`` left
        off); anything else is a clear error, not a half-read request. ``activity_id`` and
        ``run_id``: the attempt's own, which the wire omits."""
        if not isinstance(data, dict) or data.get("v") != COMPACT_REQUEST:
            raise TypeError(f"not a plan step request: {str(data)[:200]}")
        args = data.get("args")
        retries = data.get("retries")
        store_over = data.get("store_over_bytes", DEFAULT_MAX_RESULT_BYTES)
        chain = data.get("store_chain", run_id if store_over is not None else None)
        return cls(
            activity_id,
            args if isinstance(args, dict) else {},
            _int(data.get("max_result_bytes"), DEFAULT_MAX_RESULT_BYTES),
            retries if isinstance(retries, int) and not isinstance(retries, bool) else None,
            _int(store_over, 0) if store_over is not None else None,
            _int(data.get("max_stored_bytes"), DEFAULT_MAX_STORED_BYTES),
            chain if isinstance(chain, str) else None,
            sandbox if isinstance(sandbox := data.get("sandbox"), dict) else None,
        )

    @classmethod
    def from_payload(
        cls, raw: RawValue, converter: ConverterSource, activity_id: str, run_id: str
    ) -> StepRequest:
        """``from_wire`` of the activity's raw argument (``payload_value``)."""
        return cls.from_wire(payload_value(raw.payload, converter), activity_id, run_id)


_JSON_PLAIN = b"json/plain"


ConverterSource: TypeAlias = PayloadConverter | Callable[[], PayloadConverter]
"""A payload converter, or the function that returns the current one (asked only for a
payload that is not ``json/plain``: looking it up is most of a small step's decoding)."""


def payload_value(payload: Payload, converter: ConverterSource) -> Any:
    """A plain-JSON message's value from its payload: ``json/plain`` decoded once, as it is
    (the converter's type-hint walk is not paid per step); any other encoding (a converter
    of the user's own) through ``converter``."""
    if payload.metadata.get("encoding") == _JSON_PLAIN:
        return json.loads(payload.data)
    if not hasattr(converter, "from_payload"):  # the function that returns the converter
        converter = converter()
    return converter.from_payload(payload)


def json_payload(value: Any) -> Payload:
    """``value`` (plain JSON) as the default converter's ``json/plain`` payload, encoded once
    and in its own key order (the converter sorts keys: either reads back the same)."""
    return json_plain_payload(compact_json(value).encode())


_JSON_PLAIN_PROTOTYPE = Payload(metadata={"encoding": _JSON_PLAIN})


def json_plain_payload(data: bytes) -> Payload:
    """A ``json/plain`` payload of ``data`` (JSON text already encoded): its metadata copied
    from one prototype, a third of the cost of building the metadata map per payload (a
    step's request, its reply, its events)."""
    payload = Payload()
    payload.CopyFrom(_JSON_PLAIN_PROTOTYPE)
    payload.data = data
    return payload


@dataclass
class StepResponse:
    """A tool's JSON result, with the attempt that produced it.

    The result keeps the tool's own key order: the default data converter sorts object
    keys, and key order is part of what a model reads back ("steps.lookup has keys name,
    hp, armour"), so both runners must see it. On the wire it is the JSON array
    ``[<result>, <duration_ms>]`` (``[..., <attempt>]`` after a retry), written by the
    activity as a raw payload, so the converter neither sorts the result nor escapes it
    into a string.
    """

    result: Any
    attempt: int
    duration_ms: float
    size: int
    """What a local activity's result costs the workflow task (``Admission``): the whole
    payload."""

    @staticmethod
    def compact(result_json: str, attempt: int, duration_ms: float) -> Payload:
        """The reply's payload, from the result's JSON text as it is (no re-encoding)."""
        tail = f",{duration_ms!r}]" if attempt == 1 else f",{duration_ms!r},{attempt}]"
        return json_plain_payload(f"[{result_json}{tail}".encode())

    @classmethod
    def from_payload(cls, raw: RawValue, converter: ConverterSource) -> StepResponse:
        """Read a wrapper activity's reply straight from its payload (JSON text decoded
        once: the converter's type-hint walk is not paid per step)."""
        payload = raw.payload
        return cls._from_list(payload_value(payload, converter), len(payload.data))

    @classmethod
    def from_wire(cls, data: Any) -> StepResponse:
        """Read a wrapper activity's reply as the data converter decoded it (a list): a
        history read outside a worker."""
        return cls._from_list(data, len(compact_json(data)) if isinstance(data, list) else 0)

    @classmethod
    def _from_list(cls, data: Any, size: int) -> StepResponse:
        if (
            not isinstance(data, list)
            or len(data) not in (2, 3)
            or not isinstance(data[1], int | float)
        ):
            raise TypeError(f"not a plan step response: {str(data)[:200]}")
        attempt = _int(data[2], 1) if len(data) == 3 else 1
        return cls(data[0], attempt, float(data[1]), size)


def _int(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


@dataclass
class ApprovalDecision:
    """A person's answer to a step awaiting approval.

    ``args_digest`` (from ``progress``, or ``approval.args_digest(args)``) binds
    the answer to the arguments the person saw: if the step's bound arguments
    have another digest, the decision is refused.
    """

    step_id: str
    approved: bool
    reason: str = ""
    args_digest: str | None = None
