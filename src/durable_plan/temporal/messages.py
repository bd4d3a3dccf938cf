"""Plain data that crosses the workflow/activity boundary.

Dataclasses with JSON-typed fields only, so they round-trip through both the
default data converter and the pydantic converter that the Strands plugin
installs: a plan started from a Strands workflow and one started from a plain
client travel the same way.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from durable_plan.options import ToolOptions

DEFAULT_MAX_RESULT_BYTES = 256 * 1024
DEFAULT_MAX_RETURNED_BYTES = 1536 * 1024
DEFAULT_MAX_TASK_BYTES = 1024 * 1024
"""Arguments scheduled in one workflow task: the server takes at most 4 MiB per gRPC
message, so a wide fan-out of large arguments is started over several tasks."""
DEFAULT_MAX_STORED_BYTES = 64 * 1024 * 1024
"""A result stored by reference (``claim_check``), and what one step's arguments may
read back from the store: the activity holds it in memory."""
DEFAULT_MAX_INTERRUPTIONS = 5
"""Attempts of a step that a lost worker (a crash, a kill, a lost heartbeat) may cut
short before the step fails, on top of its ``retries``, which count the tool's own
failures only."""
DEFAULT_MAX_HISTORY_BYTES = 40 * 1024 * 1024
"""Temporal terminates a workflow whose history passes 50 MiB (or 51,200 events): a
plan stops starting steps well before that, and says why."""


def failure_message(exc: BaseException) -> str:
    """The text a person or model can act on, from a Temporal failure's innermost cause."""
    cause = getattr(exc, "cause", None) or exc
    message = getattr(cause, "message", None)
    return message if isinstance(message, str) and message else str(cause)


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

    def to_wire(self) -> dict[str, Any]:
        """The activity argument as a plain dict: the JSON object the dataclass encodes to,
        without the data converter's ``asdict`` deep copy (see ``StepResponse.from_wire``)."""
        wire: dict[str, Any] = {
            "step_id": self.step_id,
            "args": self.args,
            "max_result_bytes": self.max_result_bytes,
            "retries": self.retries,
        }
        if self.store_over_bytes is not None:
            wire["store_over_bytes"] = self.store_over_bytes
            wire["max_stored_bytes"] = self.max_stored_bytes
        return wire

    @classmethod
    def from_wire(cls, data: Any) -> StepRequest:
        """Read the activity argument, from this version or an older one (fields it lacks
        take their defaults); anything else is a clear error, not a half-read request."""
        if not isinstance(data, dict) or not isinstance(data.get("step_id"), str):
            raise TypeError(f"not a plan step request: {str(data)[:200]}")
        args = data.get("args")
        retries = data.get("retries")
        store_over = data.get("store_over_bytes")
        return cls(
            data["step_id"],
            args if isinstance(args, dict) else {},
            _int(data.get("max_result_bytes"), DEFAULT_MAX_RESULT_BYTES),
            retries if isinstance(retries, int) and not isinstance(retries, bool) else None,
            _int(store_over, 0) if store_over is not None else None,
            _int(data.get("max_stored_bytes"), DEFAULT_MAX_STORED_BYTES),
        )


@dataclass
class StepResponse:
    """A tool's JSON result, with the attempt that produced it.

    The result travels as JSON text: the default data converter sorts object
    keys, and key order is part of what a model reads back ("steps.lookup has
    keys name, hp, armour"), so both runners must see the tool's own order.
    """

    result_json: str
    attempt: int
    duration_ms: float

    @property
    def result(self) -> Any:
        return json.loads(self.result_json)

    def to_wire(self) -> dict[str, Any]:
        return {
            "result_json": self.result_json,
            "attempt": self.attempt,
            "duration_ms": self.duration_ms,
        }

    @classmethod
    def from_wire(cls, data: Any) -> StepResponse:
        """Read a wrapper activity's result, decoded as a plain dict.

        Asking the data converter for the dataclass costs a ``typing.get_type_hints``
        walk per step (the module uses postponed annotations), about a tenth of a
        millisecond of workflow-task time that a plain dict does not pay; the JSON on
        the wire is the same either way, so histories replay unchanged.
        """
        if not isinstance(data, dict) or not isinstance(data.get("result_json"), str):
            raise TypeError(f"not a plan step response: {str(data)[:200]}")
        return cls(
            data["result_json"],
            _int(data.get("attempt"), 1),
            float(data.get("duration_ms") or 0.0),
        )


def _int(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


@dataclass
class PlanInput:
    """Everything ``PlanWorkflow`` needs; the tool table travels with the plan.

    ``tools`` maps a tool name to the rules it was registered with
    (``ToolOptions``, approval gates applied): the workflow checks the plan
    against it (a step may only tighten them) and takes timeouts, retries and
    gates from it, so it never reads worker-local state. An empty table means
    no tool may be planned, not every tool.
    """

    plan: dict[str, Any]
    tools: dict[str, ToolOptions] = field(default_factory=dict)
    max_steps: int = 32
    max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES
    max_returned_bytes: int = DEFAULT_MAX_RETURNED_BYTES
    max_task_bytes: int = DEFAULT_MAX_TASK_BYTES
    max_history_bytes: int = DEFAULT_MAX_HISTORY_BYTES
    max_interruptions: int = DEFAULT_MAX_INTERRUPTIONS
    retry_initial_interval_s: float = 0.5
    task_queue: str | None = None
    model_heartbeat_timeout_s: float = 10.0
    """Agent steps: a worker lost during a model call is noticed after this long."""
    default_model: str | None = None
    """The model of agent steps that name none (a ``StrandsPlugin`` model name; None:
    the plugin's default)."""
    hooks_workflow_id: str | None = None
    """The agent workflow whose tool hooks each step must pass (``HOOK_REQUEST_SIGNAL``)."""
    inputs: dict[str, Any] | None = None
    """A plan file's input values, read as ``inputs.<name>`` (``check_plan(inputs=...)``);
    None (plans started before this field, or without inputs): ``inputs`` is unknown."""
    memory: dict[str, Any] | None = None
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
    """A plan workflow asks its agent's workflow to run the tool hooks for one step.

    ``phase`` is "before" (``args`` about to be used) or "after" (``ok`` and
    ``value``: the result, or the error text).
    """

    plan_workflow_id: str
    step_id: str
    tool: str
    phase: str
    args: dict[str, Any]
    ok: bool = True
    value: Any = None


@dataclass
class HookReply:
    """The hooks' decision: before, ``cancel`` or the (possibly rewritten) ``args``;
    after, ``ok`` and the (possibly rewritten) ``value``."""

    step_id: str
    phase: str
    cancel: str | None = None
    args: dict[str, Any] = field(default_factory=dict)
    ok: bool = True
    value: Any = None
