"""The plan contract: what a model may submit and what it gets back.

Field names and defaults follow the in-process plan tool this project makes
durable, so a plan written for it runs here unchanged. The models are frozen and
reject unknown fields: a misspelled field is a mistake the model must hear
about, not a silently ignored key. The JSON schema the model sees is generated
from these classes, so the descriptions below are written for the model.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue

STEP_ID_PATTERN = r"^[a-z][a-z0-9_]{0,31}$"
DEFAULT_MAX_STEPS = 32

StepId = Annotated[str, Field(pattern=STEP_ID_PATTERN)]
StepStatus = Literal["ok", "failed", "skipped", "not_taken"]
OnError = Literal["fail_fast", "continue"]
Join = Literal["all", "any"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class _Input(_Frozen):
    """What a model writes: strict, so "final": "yes" is an error, not a guess."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, allow_inf_nan=False)


class Step(_Input):
    """One tool call inside a plan.

    The plan tool's spec, sent on every model call, states a step in one compact line
    (``schema.py``): each field as ``name: description``, ``?`` marking the optional ones, so
    a field's description is its form in a few words, then the one thing the model needs
    for a correct first plan that the tool description does not say. The rules of the step
    kinds and of the rare fields (``RARE_FIELDS``) reach the model in the check's messages,
    where it meets them.
    """

    id: StepId
    tool: str = Field(min_length=1)
    args: dict[str, JsonValue] = Field(default_factory=dict, description="{arg: literal}")
    bind: dict[str, str] = Field(
        default_factory=dict,
        description='{arg: expression}, e.g. {"armour": "steps.lookup.armour"}',
    )
    after: list[StepId] = Field(default_factory=list, description="[id]")
    when: str | None = Field(
        default=None,
        description="expression, exactly true or false (false: it and its dependents end "
        "not_taken)",
    )
    join: Join = Field(
        default="all",
        description='all|any ("any": run if one dependency ran ok)',
    )
    timeout_s: Annotated[float, Field(gt=0, le=86_400)] | None = Field(
        default=None,
        description="Seconds the step may take, at most its tool owner's (more than 0, "
        "at most 86400).",
    )
    retries: Annotated[int, Field(ge=0, le=10)] | None = Field(
        default=None, description="Retries after a failed attempt, at most its tool owner's."
    )
    local: bool = Field(
        default=False,
        description="true: run as a local activity, where the tool's owner allows it.",
    )


class Plan(_Input):
    """A DAG of tool calls, submitted in one tool call and run without the model."""

    steps: list[Step] = Field(min_length=1)
    returns: list[StepId] | None = Field(
        default=None, description="Step ids whose results you get back (default: all)."
    )
    final: bool = Field(
        default=False,
        description="true: those results fully answer the user and end the turn.",
    )
    on_error: OnError = Field(
        default="fail_fast",
        description='A failure skips: "fail_fast" every step not started, "continue" its '
        "dependents.",
    )
    max_parallel: Annotated[int, Field(ge=1, le=256)] | None = Field(
        default=None, description="At most this many steps run at once (1 to 256)."
    )


def _is_none(value: Any) -> bool:
    """No ``usage`` key without tokens: results stay as they were for plans without agent
    steps (and readable by a worker of the version before, whose models forbid the key).
    A field's ``exclude_if``, not a wrap serializer on the model: that one made pydantic
    call back into Python for every ledger line of every result (issue 31)."""
    return value is None


class StepOutcome(_Frozen):
    """One ledger line: what happened to a step, without its result."""

    id: str
    tool: str
    status: StepStatus
    level: int
    duration_ms: float = 0.0
    error: str | None = None
    attempts: int = 0
    reused_from: int | None = None
    """Set when the step did not run: an earlier plan of the conversation (this number,
    1 for the first) ran it ok with the same id, tool and arguments (``reuse.py``)."""
    usage: dict[str, int] | None = Field(default=None, exclude_if=_is_none)
    """An agent step's model tokens: ``input``, ``output``, ``total``."""


class PlanResult(_Frozen):
    """What a plan run gives back: returned results plus a ledger of every step."""

    returned: dict[str, JsonValue]
    ledger: list[StepOutcome]
    levels: list[list[str]]
    inference_passes_saved: int
    final: bool
    exited: dict[str, JsonValue] | None = None
    """Set when an ``exit`` step ended the plan: its step, status, message and output."""
    usage: dict[str, int] | None = Field(default=None, exclude_if=_is_none)
    """The model tokens of the plan's agent steps (None when it has none)."""

    @property
    def ok(self) -> bool:
        """True when no step failed or was skipped (steps an exit with status success
        skipped do not count)."""
        if self.exited is not None:
            return self.exited.get("status") == "success" and not self.failures
        return all(o.status in ("ok", "not_taken") for o in self.ledger)

    @property
    def failures(self) -> list[StepOutcome]:
        return [o for o in self.ledger if o.status == "failed"]

    def in_plan_order(self) -> PlanResult:
        """``returned`` in plan (ledger) order, whatever order ``returns`` lists.

        The one rule for both runners: a data converter or codec may reorder an
        object's keys on the way out of a workflow, and the ledger's order survives
        that, so the durable client puts ``returned`` back by it and the in-process
        runner builds it the same way."""
        order = [o.id for o in self.ledger if o.id in self.returned]
        if list(self.returned) == order:
            return self
        return self.model_copy(update={"returned": {k: self.returned[k] for k in order}})

    def outcome(self, step_id: str) -> StepOutcome:
        for o in self.ledger:
            if o.id == step_id:
                return o
        raise KeyError(step_id)


def rounds_saved(levels_run_ok: set[int], final: bool) -> int:
    """Model round trips a plan saved: the levels that ran a step ok, less the one round
    the plan itself took, plus the round a final answer saves. One rule for the engine's
    result and a compact wire result read back (``temporal.result_form``)."""
    return max(len(levels_run_ok) - 1, 0) + (1 if final else 0)


RARE_FIELDS: dict[str, tuple[str, ...]] = {
    "step": ("timeout_s", "retries", "local"),
    "plan": ("max_parallel",),
}
"""Fields few plans use: the schema sent to the model leaves them out (it is sent on every
call, ``schema.py``), the model still accepts them, and the check's rejection of a wrong
value says what the field is (``rare_field_text``)."""


def rare_field_text(kind: str, name: str) -> str | None:
    """What a rare field of a ``kind`` ("plan" or "step") is, for a rejection: its
    description, which no schema the model was sent carries; None for any other field."""
    if name not in RARE_FIELDS.get(kind, ()):
        return None
    model = Step if kind == "step" else Plan
    return f"'{name}': {model.model_fields[name].description}"


def plan_field_names() -> dict[str, list[str]]:
    """Field names per model, for 'did you mean' hints on misspelled fields."""
    return {"plan": list(Plan.model_fields), "step": list(Step.model_fields)}
