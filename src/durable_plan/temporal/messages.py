"""Plain data that crosses the workflow/activity boundary.

Dataclasses with JSON-typed fields only, so they round-trip through both the
default data converter and the pydantic converter that the Strands plugin
installs: a plan started from a Strands workflow and one started from a plain
client travel the same way.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import MISSING, asdict, dataclass, field, fields
from types import MappingProxyType
from typing import Any, TypeAlias

from temporalio.api.common.v1 import Payload
from temporalio.common import RawValue
from temporalio.converter import PayloadConverter

from durable_plan.language.json_text import compact_json
from durable_plan.language.options import ToolOptions

PLAN_WORKFLOW_NAME = "PlanWorkflow"
"""The plan workflow's type: what every plan history names (never rename it)."""
PLANS_TOPIC = "plans"
"""A conversation's topic announcing each plan it starts (``WorkflowPlanPlugin(plan_stream=)``):
the conversation publishes there (workflow code), ``subscribe`` reads it (client code)."""

DEFAULT_MAX_RESULT_BYTES = 256 * 1024
DEFAULT_MAX_RETURNED_BYTES = 1536 * 1024
DEFAULT_MAX_TASK_BYTES = 1024 * 1024
"""Arguments scheduled in one workflow task: the server takes at most 4 MiB per gRPC
message, so a wide fan-out of large arguments is started over several tasks."""
DEFAULT_MAX_STORED_BYTES = 64 * 1024 * 1024
"""A result stored by reference (``claim_check``), and what one step's arguments may
read back from the store: the activity holds it in memory."""
COMPACT_FORMS_LEVEL = 6
"""``PlanInput.patch_level`` from which the input and the result leave their defaults off:
a client that writes this level reads the compact result (``result_form``) and wrote the
compact tool table and settings (``PlanInput.to_wire``). Not a workflow patch: nothing is
asked or recorded; a lower level gets the full forms, as before."""
SENDER_CHECKED_LEVEL = 7
"""``PlanInput.patch_level`` from which the input's sender checked the plan as the workflow
would (``checked_input`` takes a ``CheckedPlan`` checked for a durable run, and writes this
level): the workflow then skips the two checks that only refuse, the walk of the raw JSON's
values and the bindings against result shapes (``check_plan(checked_by_sender=True)``),
and checks every rule the run relies on as before. Not a workflow patch: nothing is asked or
recorded; a lower level (an input written before it) is checked in full, as before, and a
replay reads the level from the recorded input."""
COMPACT_REQUEST = 2
"""``"v"`` of a ``StepRequest`` in its compact form (``to_compact_wire``), whose caller
reads ``StepResponse``'s compact form."""

DEFAULT_MAX_INTERRUPTIONS = 5
"""Attempts of a step that a lost worker (a crash, a kill, a lost heartbeat) may cut
short before the step fails, on top of its ``retries``, which count the tool's own
failures only."""
DEFAULT_MAX_HISTORY_BYTES = 40 * 1024 * 1024
"""Temporal terminates a workflow whose history passes 50 MiB (or 51,200 events): a
plan stops starting steps well before that, and says why."""


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
    a reference; references in ``args`` are read back (None: neither, as before)."""
    max_stored_bytes: int = DEFAULT_MAX_STORED_BYTES
    store_chain: str | None = None
    """The first run id of the plan's chain: its stored results are the run's own (None:
    keyed by workflow id alone, as plans recorded before it)."""
    compact: bool = False
    """Came in the compact form (``to_compact_wire``): the caller reads the compact reply
    (``StepResponse.compact``)."""

    def to_wire(self) -> dict[str, Any]:
        """The activity argument as a plain dict: the JSON object the dataclass encodes to,
        without the data converter's ``asdict`` deep copy (see ``StepResponse.from_wire``)."""
        wire: dict[str, Any] = {"step_id": self.step_id, "args": self.args}
        # Bounds at their defaults stay off: every version reads them back as those (one
        # request per step, each in the plan's history).
        return self._with_bounds(wire, store_default=None, chain_default=None)

    def to_compact_wire(self, run_id: str) -> dict[str, Any]:
        """The request in its compact form (``"v": 2``), about 90 bytes less per step in
        the plan's history (issue 31): the step id is the activity's own id, the store's
        chain the run's own id and its threshold ``max_result_bytes``'s default, each
        written only when it is something else (None as null). The caller must schedule
        the activity with ``step_id`` as its id, and reads the compact reply.

        An activity of a version before it finds no ``step_id`` and refuses the request
        as not a plan step's (a failed attempt Temporal retries, on another worker in a
        mixed fleet): never a request half-read, which the full form's defaults would be."""
        wire: dict[str, Any] = {"v": COMPACT_REQUEST, "args": self.args}
        return self._with_bounds(wire, store_default=DEFAULT_MAX_RESULT_BYTES, chain_default=run_id)

    def _with_bounds(
        self, wire: dict[str, Any], *, store_default: int | None, chain_default: str | None
    ) -> dict[str, Any]:
        """``wire`` with each bound that differs from what its form reads back when absent."""
        if self.max_result_bytes != DEFAULT_MAX_RESULT_BYTES:
            wire["max_result_bytes"] = self.max_result_bytes
        if self.retries is not None:
            wire["retries"] = self.retries
        if self.store_over_bytes != store_default:
            wire["store_over_bytes"] = self.store_over_bytes
        if self.store_over_bytes is not None:
            if self.max_stored_bytes != DEFAULT_MAX_STORED_BYTES:
                wire["max_stored_bytes"] = self.max_stored_bytes
            if self.store_chain != chain_default:
                wire["store_chain"] = self.store_chain
        return wire

    @classmethod
    def from_wire(cls, data: Any, activity_id: str = "", run_id: str = "") -> StepRequest:
        """Read the activity argument, from this version or an older one (fields it lacks
        take their defaults); anything else is a clear error, not a half-read request.
        ``activity_id`` and ``run_id``: the attempt's own, which the compact form omits."""
        if isinstance(data, dict) and data.get("v") == COMPACT_REQUEST:
            return cls._read(data, activity_id, DEFAULT_MAX_RESULT_BYTES, run_id, compact=True)
        if not isinstance(data, dict) or not isinstance(data.get("step_id"), str):
            raise TypeError(f"not a plan step request: {str(data)[:200]}")
        return cls._read(data, data["step_id"], None, None, compact=False)

    @classmethod
    def from_payload(
        cls, raw: RawValue, converter: ConverterSource, activity_id: str, run_id: str
    ) -> StepRequest:
        """``from_wire`` of the activity's raw argument (``payload_value``)."""
        return cls.from_wire(payload_value(raw.payload, converter), activity_id, run_id)

    @classmethod
    def _read(
        cls,
        data: dict[str, Any],
        step_id: str,
        store_default: int | None,
        chain_default: str | None,
        *,
        compact: bool,
    ) -> StepRequest:
        args = data.get("args")
        retries = data.get("retries")
        store_over = data.get("store_over_bytes", store_default)
        chain = data.get("store_chain", chain_default if store_over is not None else None)
        return cls(
            step_id,
            args if isinstance(args, dict) else {},
            _int(data.get("max_result_bytes"), DEFAULT_MAX_RESULT_BYTES),
            retries if isinstance(retries, int) and not isinstance(retries, bool) else None,
            _int(store_over, 0) if store_over is not None else None,
            _int(data.get("max_stored_bytes"), DEFAULT_MAX_STORED_BYTES),
            chain if isinstance(chain, str) else None,
            compact=compact,
        )


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
    hp, armour"), so both runners must see it. Two forms travel:

    - full (every version): ``{"result_json": "<the result as JSON text>", "attempt": 1,
      "duration_ms": 0.8}``, encoded by the data converter;
    - compact (for a compact ``StepRequest``): the JSON array ``[<result>,
      <duration_ms>]`` (``[..., <attempt>]`` after a retry), written by the activity as
      a raw payload, so the converter neither sorts the result nor escapes it into a
      string; about 45 bytes less per step in the plan's history (issue 31).
    """

    result: Any
    attempt: int
    duration_ms: float
    size: int
    """What a local activity's result costs the workflow task (``Admission``): the
    result's JSON text in the full form (as recorded before the compact one), the whole
    payload in the compact form."""

    @staticmethod
    def full(result_json: str, attempt: int, duration_ms: float) -> dict[str, Any]:
        return {"result_json": result_json, "attempt": attempt, "duration_ms": duration_ms}

    @staticmethod
    def compact(result_json: str, attempt: int, duration_ms: float) -> Payload:
        """The compact form's payload, from the result's JSON text as it is (no re-encoding)."""
        tail = f",{duration_ms!r}]" if attempt == 1 else f",{duration_ms!r},{attempt}]"
        return json_plain_payload(f"[{result_json}{tail}".encode())

    @classmethod
    def from_payload(cls, raw: RawValue, converter: ConverterSource) -> StepResponse:
        """Read a wrapper activity's reply, either form, straight from its payload (JSON
        text decoded once: the converter's type-hint walk is not paid per step)."""
        payload = raw.payload
        data = payload_value(payload, converter)
        if isinstance(data, list):
            return cls._from_list(data, len(payload.data))
        return cls.from_wire(data)

    @classmethod
    def from_wire(cls, data: Any) -> StepResponse:
        """Read a wrapper activity's reply as the data converter decoded it (a plain dict
        in the full form, a list in the compact one): a history read outside a worker."""
        if isinstance(data, list):
            return cls._from_list(data, len(compact_json(data)))
        if not isinstance(data, dict) or not isinstance(data.get("result_json"), str):
            raise TypeError(f"not a plan step response: {str(data)[:200]}")
        text = data["result_json"]
        return cls(
            json.loads(text),
            _int(data.get("attempt"), 1),
            float(data.get("duration_ms") or 0.0),
            len(text),
        )

    @classmethod
    def _from_list(cls, data: list[Any], size: int) -> StepResponse:
        if len(data) not in (2, 3) or not isinstance(data[1], int | float):
            raise TypeError(f"not a plan step response: {str(data)[:200]}")
        attempt = _int(data[2], 1) if len(data) == 3 else 1
        return cls(data[0], attempt, float(data[1]), size)


def _int(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


_BY_PLUGIN = {"set_by": "plugin"}
"""Marks the ``PlanInput`` fields ``WorkflowPlanPlugin`` fills itself for each plan: not plan
options (``strands.options``)."""


@dataclass
class PlanInput:
    """Everything ``PlanWorkflow`` needs; the tool table travels with the plan.

    ``tools`` maps a tool name to the rules it was registered with
    (``ToolOptions``, approval gates applied): the workflow checks the plan
    against it (a step may only tighten them) and takes timeouts, retries and
    gates from it, so it never reads worker-local state. An empty table means
    no tool may be planned, not every tool.
    """

    plan: dict[str, Any] = field(metadata=_BY_PLUGIN)
    tools: dict[str, ToolOptions] = field(default_factory=dict, metadata=_BY_PLUGIN)
    max_steps: int = field(default=32, metadata=_BY_PLUGIN)
    max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES
    max_returned_bytes: int = DEFAULT_MAX_RETURNED_BYTES
    max_task_bytes: int = DEFAULT_MAX_TASK_BYTES
    max_history_bytes: int = DEFAULT_MAX_HISTORY_BYTES
    max_interruptions: int = DEFAULT_MAX_INTERRUPTIONS
    retry_initial_interval_s: float = 0.5
    task_queue: str | None = field(default=None, metadata=_BY_PLUGIN)
    model_heartbeat_timeout_s: float = 10.0
    """Agent steps: a worker lost during a model call is noticed after this long."""
    default_model: str | None = field(default=None, metadata=_BY_PLUGIN)
    """The model of agent steps that name none (a ``StrandsPlugin`` model name; None:
    the plugin's default)."""
    hooks_workflow_id: str | None = field(default=None, metadata=_BY_PLUGIN)
    """The agent workflow whose tool hooks each step must pass (``HOOK_REQUEST_SIGNAL``)."""
    hook_key: str | None = field(default=None, metadata=_BY_PLUGIN)
    """The name the agent's relay knows this plan by (None: this workflow's id, as plans
    started before this field)."""
    hook_bytes: int | None = field(default=None, metadata=_BY_PLUGIN)
    """Bytes of hook requests the agent's history has room for (None: not counted)."""
    hooked_tools: list[str] | None = field(default=None, metadata=_BY_PLUGIN)
    """Tool patterns whose calls pass the agent's hooks (None: every tool)."""
    inputs: dict[str, Any] | None = None
    """A plan file's input values, read as ``inputs.<name>`` (``check_plan(inputs=...)``);
    None (plans started before this field, or without inputs): ``inputs`` is unknown."""
    memory: dict[str, Any] | None = field(default=None, metadata=_BY_PLUGIN)
    """The conversation's remembered steps this plan may reuse or read as ``prior``
    (``reuse.Recall.to_wire``); the plan then returns what it learned under
    ``"remembered"``. None (plans started before this field, or outside a
    conversation): every step runs and nothing is remembered."""
    store_results: bool = True
    """Large results by reference: a tool result over ``store_over_bytes`` goes to the
    worker's result store and history keeps a reference (``references.py``); False: such
    a result fails its step, as before. Plans started before these fields never stored
    anything, so they replay unchanged whatever the defaults."""
    store_over_bytes: int | None = None
    """The threshold; None: ``max_result_bytes`` (only results that would not fit)."""
    max_stored_bytes: int = DEFAULT_MAX_STORED_BYTES
    return_stored: str = "value"
    """A stored result listed in ``returns``: "value" gives its value when it fits
    ``max_result_bytes`` (read back by one activity), else the reference with its size and
    a preview; "preview" always gives the reference."""
    keep_stored_results: bool = False
    """True: the plan does not delete what it stored when it ends (a retention sweep or an
    S3 lifecycle rule does)."""
    allowed_models: list[str] | None = field(default=None, metadata=_BY_PLUGIN)
    """Model-name patterns an agent step may name in ``model`` (the default model is always
    allowed); None, as in plans started before this field: any."""
    stream_events: bool = True
    """Publish the plan's step events on its Workflow Stream (``PlanHandle.events``); off,
    a subscriber sees nothing and ``progress`` still answers."""
    payloads_stored: bool = False
    """Large payloads go to External Storage (set by whoever starts the plan): an agent step
    may then carry a conversation past Temporal's 2 MB per payload (``payload_limits``)."""
    fairness_key: str | None = None
    """Whose calls this plan's are, where a limited tool's calls wait their turn (a tenant,
    a user); None: the workflow that started the plan (a conversation), else the plan."""
    model_task_queue: str | None = None
    """The task queue of agent steps' model calls (workers with ``StrandsPlugin`` and the
    model's credentials); None: the agent step's own."""
    ui_metadata: str = "full"
    """What the Temporal web UI gets (``ui_summary``): "summary", "details" or "full".
    Clients send "summary" unless asked; "full" is what inputs written before it had."""
    plan_status_attribute: bool = False
    """Keep the ``PlanStatus`` search attribute up to date (``plan_status``): set by whoever
    starts the plan, only where the namespace has it registered (an upsert of one it lacks
    fails the workflow task forever). Recorded here, so a replay decides alike; False, as
    in inputs written before it: the status shows in the current details alone."""
    patch_level: int = field(default=0, metadata=_BY_PLUGIN)
    """The workflow patches its client knew to be in effect (``patch_level``): the run
    asks none of them, and records no marker. 0 (inputs written before it): each is asked."""

    def to_wire(self) -> dict[str, Any]:
        """The workflow's input as JSON: the plan first, then the settings that differ from
        their defaults, then the tool table. The default data converter sorts keys, and the
        web UI shows the input as it is, so a person reads the plan before the settings."""
        compact = self.patch_level >= COMPACT_FORMS_LEVEL
        settings: dict[str, Any] = {}
        for f in fields(self):
            if f.name in ("plan", "tools"):
                continue
            value = getattr(self, f.name)
            default = f.default if f.default is not MISSING else None
            if compact and f.name == "ui_metadata":
                default = COMPACT_UI_METADATA
            if value != default:
                settings[f.name] = value
        tool_defaults = COMPACT_TOOL_DEFAULTS if compact else {}
        return {
            "plan": self.plan,
            "settings": settings,
            "tools": {
                name: _compact(options_to_wire(o), tool_defaults) for name, o in self.tools.items()
            },
        }

    @classmethod
    def from_wire(cls, data: Any) -> PlanInput:
        """Read the workflow's input in this form or the flat one earlier versions sent (a
        dataclass encoded field by field); unknown keys are ignored (a newer client)."""
        if isinstance(data, PlanInput):
            return data
        if not isinstance(data, dict) or not isinstance(data.get("plan"), dict):
            raise TypeError(f"not a plan workflow input: {str(data)[:200]}")
        settings = data.get("settings")
        flat = dict(settings) if isinstance(settings, dict) else dict(data)
        names = {f.name for f in fields(cls)} - {"plan", "tools"}
        kwargs = {k: v for k, v in flat.items() if k in names}
        tools = data.get("tools") or {}
        if not isinstance(tools, dict):
            raise TypeError("the plan workflow input's tool table is not an object")
        tool_defaults: Mapping[str, Any] = {}
        if _int(kwargs.get("patch_level"), 0) >= COMPACT_FORMS_LEVEL:
            kwargs.setdefault("ui_metadata", COMPACT_UI_METADATA)
            tool_defaults = COMPACT_TOOL_DEFAULTS
        return cls(
            plan=data["plan"],
            tools={str(n): _options_from_wire(o, tool_defaults) for n, o in tools.items()},
            **kwargs,
        )


def patch_level_of(raw: Any) -> int:
    """``PlanInput.patch_level`` of a workflow input, read before (and whether or not) the
    rest of it parses: the first thing a plan workflow decides is which patches hold."""
    if isinstance(raw, PlanInput):
        return raw.patch_level
    if not isinstance(raw, dict):
        return 0
    settings = raw.get("settings")
    flat = settings if isinstance(settings, dict) else raw  # the flat form earlier versions
    return _int(flat.get("patch_level"), 0)  # and ``execute_workflow(..., PlanInput)`` send


_OPTION_FIELDS = {f.name for f in fields(ToolOptions)}


_ROUTING_FIELDS = ("task_queue", "max_concurrent", "max_per_second")
"""Sent only when set: tool tables of plans without routing stay as they were."""
_WHEN_SET_FIELDS = (*_ROUTING_FIELDS, "output_schema")
"""Sent only when set: tool tables without routing or return shapes stay byte-identical
(and a worker that predates a field ignores it)."""


def options_to_wire(options: ToolOptions | dict[str, Any]) -> dict[str, Any]:
    if isinstance(options, dict):
        return dict(options)
    wire = asdict(options)
    for name in _WHEN_SET_FIELDS:
        if wire.get(name) is None:
            wire.pop(name, None)
    return wire


COMPACT_TOOL_DEFAULTS: Mapping[str, Any] = MappingProxyType(
    {"kind": "function", "reuse": True, "retries": 2, "timeout_s": 60.0}
)
"""A tool's options a compact input (``COMPACT_FORMS_LEVEL``) leaves off at these values.
Fixed here, not read from ``ToolOptions``: if a default changes, a table in flight still
reads back the rules its plan was started with."""
COMPACT_UI_METADATA = "summary"
"""``ui_metadata`` a compact input leaves off (the value clients send unless asked)."""


def _compact(wire: dict[str, Any], defaults: Mapping[str, Any]) -> dict[str, Any]:
    """A tool's options without those left at a default that says "nothing" (None, False,
    "", [] and {}: every version reads them back alike): what the plan's start event
    carries per tool. Defaults that could change (timeouts, retries, reuse) stay, unless
    ``defaults`` fixes them (``COMPACT_TOOL_DEFAULTS``)."""
    return {
        k: v
        for k, v in wire.items()
        if not (k in _EMPTY_DEFAULTS and v == _EMPTY_DEFAULTS[k])
        and not (k in defaults and v == defaults[k] and type(v) is type(defaults[k]))
    }


def _empty_default(f: Any) -> Any:
    if f.default_factory is not MISSING:
        return f.default_factory()
    return f.default


_EMPTY_DEFAULTS = {
    f.name: _empty_default(f)
    for f in fields(ToolOptions)
    if _empty_default(f) is None
    or _empty_default(f) is False
    or (isinstance(_empty_default(f), str | list | dict) and not _empty_default(f))
}


def _options_from_wire(data: Any, defaults: Mapping[str, Any]) -> ToolOptions:
    if isinstance(data, ToolOptions):
        return data
    if not isinstance(data, dict):
        raise TypeError(f"not a tool's options: {str(data)[:200]}")
    merged = {**defaults, **data}
    return ToolOptions(**{k: v for k, v in merged.items() if k in _OPTION_FIELDS})


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


HOOK_REQUEST_SIGNAL = "durable_plan_tool_hook"
HOOK_REPLY_SIGNAL = "durable_plan_tool_hook_reply"


@dataclass
class HookRequest:
    """A plan (or one of its agent steps) asks its agent's workflow to run the tool hooks.

    ``key`` names the plan the agent registered (``PlanInput.hook_key``), ``reply_to``
    the asking workflow. "before": ``args`` about to be used; "after": ``ok`` and
    ``value`` (the result, or the error text), without the arguments again.
    """

    key: str
    reply_to: str
    call_id: str
    tool: str
    phase: str
    args: dict[str, Any] | None = None
    ok: bool = True
    value: Any = None

    def to_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {
            "key": self.key,
            "reply_to": self.reply_to,
            "call_id": self.call_id,
            "tool": self.tool,
            "phase": self.phase,
        }
        if self.phase == "before":
            wire["args"] = self.args or {}
        else:
            wire["ok"] = self.ok
            wire["value"] = self.value
        return wire

    @classmethod
    def from_wire(cls, data: Any) -> HookRequest:
        if not isinstance(data, dict):
            raise TypeError(f"not a hook request: {str(data)[:200]}")
        names = ("key", "reply_to", "call_id", "tool", "phase")
        if not all(isinstance(data.get(n), str) for n in names):
            raise TypeError(f"not a hook request: {str(data)[:200]}")
        args = data.get("args")
        return cls(
            data["key"],
            data["reply_to"],
            data["call_id"],
            data["tool"],
            data["phase"],
            args if isinstance(args, dict) else None,
            bool(data.get("ok", True)),
            data.get("value"),
        )


@dataclass
class HookReply:
    """The hooks' decision. Before: ``cancel`` (the call fails with it), or go on with
    ``args`` (None: unchanged). After: ``changed`` says whether ``ok`` and ``value``
    replace the call's outcome (a reply carries a value only when a hook changed it)."""

    call_id: str
    phase: str
    cancel: str | None = None
    args: dict[str, Any] | None = None
    ok: bool = True
    value: Any = None
    changed: bool = False

    @classmethod
    def from_wire(cls, data: Any) -> HookReply:
        """This form, or the one plans recorded before (``step_id``, and an "after" reply
        that always carried the outcome)."""
        if isinstance(data, HookReply):
            return data
        if not isinstance(data, dict) or not isinstance(data.get("phase"), str):
            raise TypeError(f"not a hook reply: {str(data)[:200]}")
        args = data.get("args")
        cancel = data.get("cancel")
        legacy = "call_id" not in data
        call_id = data.get("step_id") if legacy else data.get("call_id")
        return cls(
            str(call_id),
            data["phase"],
            cancel if isinstance(cancel, str) else None,
            args if isinstance(args, dict) else None,
            bool(data.get("ok", True)),
            data.get("value"),
            True if legacy else bool(data.get("changed", False)),
        )
