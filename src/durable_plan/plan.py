"""The plan contract: what a model may submit and what it gets back.

Field names and defaults follow the in-process plan tool this project makes
durable, so a plan written for it runs here unchanged. The models are frozen and
reject unknown fields: a misspelled field is a mistake the model must hear
about, not a silently ignored key. The JSON schema the model sees is generated
from these classes, so the descriptions below are written for the model.
"""

from __future__ import annotations

from typing import Annotated, Literal

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
    """One tool call inside a plan."""

    id: StepId = Field(
        description=(
            "Unique step id: lowercase letter, then lowercase letters, digits or '_' "
            "(at most 32 characters). Later steps read this step's result as steps.<id>."
        )
    )
    tool: str = Field(
        min_length=1,
        description=(
            'Name of the tool to call, or "agent" for a bounded tool-calling loop (args: '
            "prompt, output_schema, tools, max_iterations, model, system_prompt)."
        ),
    )
    args: dict[str, JsonValue] = Field(
        default_factory=dict,
        description="Literal arguments, passed to the tool as they are.",
    )
    bind: dict[str, str] = Field(
        default_factory=dict,
        description=(
            "Arguments computed from earlier results: argument name -> JSONata expression "
            'over {"steps": {<id>: <result>}}, e.g. {"armour": "steps.monster.armour"} or '
            '{"damages": "[steps.a.damage, steps.b.damage]"}. Reading steps.<id> makes this '
            "step wait for <id>. A path that matches nothing fails the step. prior.<id> reads "
            "the result of a step that ended ok in an earlier plan of this conversation."
        ),
    )
    after: list[StepId] = Field(
        default_factory=list,
        description=(
            "Extra steps to wait for, when no binding reads them (ordering only), or when a "
            "binding reads steps dynamically (steps.*, $lookup(steps, $name))."
        ),
    )
    when: str | None = Field(
        default=None,
        description=(
            "JSONata condition that must evaluate to exactly true or false. false marks the "
            "step not_taken and prunes everything that depends on it. Use = (not ==) and "
            '$not(...) (there is no ! or not), e.g. "steps.triage.confidence >= 0.8".'
        ),
    )
    join: Join = Field(
        default="all",
        description=(
            "'all' (default): the step runs only if every dependency ran ok; a not_taken "
            "dependency makes it not_taken too. 'any': after a branch, the step runs when at "
            "least one dependency ran ok; not_taken dependencies are absent from steps."
        ),
    )
    timeout_s: Annotated[float, Field(gt=0, le=86_400)] | None = Field(
        default=None,
        description="Seconds the tool may run before the step fails with a timeout.",
    )
    retries: Annotated[int, Field(ge=0, le=10)] | None = Field(
        default=None,
        description="Extra attempts after a failure (durable runs only); default per tool.",
    )
    local: bool = Field(
        default=False,
        description="Run a short, pure tool as a local activity (durable runs only).",
    )


class Plan(_Input):
    """A DAG of tool calls, submitted in one tool call and run without the model."""

    steps: list[Step] = Field(min_length=1, description="The steps, in any order.")
    returns: list[StepId] | None = Field(
        default=None,
        description=(
            "Step ids whose results come back to you. Default: every step. Results of other "
            "steps stay inside the plan."
        ),
    )
    final: bool = Field(
        default=False,
        description=(
            "true when the returned results are the complete answer to the user: if every "
            "step ends ok or not_taken, the turn ends with them and you are not asked again."
        ),
    )
    on_error: OnError = Field(
        default="fail_fast",
        description=(
            "'fail_fast' (default): the first failure skips every step not yet started. "
            "'continue': only steps that depend on a failed step are skipped."
        ),
    )
    max_parallel: Annotated[int, Field(ge=1, le=256)] | None = Field(
        default=None, description="At most this many steps run at once (default: no limit)."
    )


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


class PlanResult(_Frozen):
    """What a plan run gives back: returned results plus a ledger of every step."""

    returned: dict[str, JsonValue]
    ledger: list[StepOutcome]
    levels: list[list[str]]
    inference_passes_saved: int
    final: bool
    exited: dict[str, JsonValue] | None = None
    """Set when an ``exit`` step ended the plan: its step, status, message and output."""

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

    def outcome(self, step_id: str) -> StepOutcome:
        for o in self.ledger:
            if o.id == step_id:
                return o
        raise KeyError(step_id)


def plan_field_names() -> dict[str, list[str]]:
    """Field names per model, for 'did you mean' hints on misspelled fields."""
    return {"plan": list(Plan.model_fields), "step": list(Step.model_fields)}
