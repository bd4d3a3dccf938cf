"""What a plan's calls and the plan itself come to, as values: Temporal's activity failures
turned into the step errors a model can act on, and the plan's result bounded so it always
fits (returned results that do not fit become previews). Pure functions, workflow code."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from temporalio import workflow
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    CancelledError,
    TimeoutError,
)

from durable_plan.run.calls import StepCall
from durable_plan.run.engine import PlanRun
from durable_plan.run.references import fit_returned
from durable_plan.run.reuse import REMEMBERED_KEY, bounded
from durable_plan.temporal.wire.messages import error_text
from durable_plan.temporal.wire.result_form import compact_result
from durable_plan.temporal.wire.workflow_inputs import PlanInput
from durable_plan.temporal.workflows.admission import json_size

# (ok, result or error text, duration in ms, attempts); None: withdrawn before it started
Outcome = tuple[bool, Any, float, int]


def activity_failure(exc: ActivityError, timeout_s: float, max_attempts: int) -> Outcome:
    """Turn Temporal's activity failure into the step error a model can act on."""
    cause = exc.cause
    attempts = (
        max_attempts
        if exc.retry_state is not None and exc.retry_state.name == ("MAXIMUM_ATTEMPTS_REACHED")
        else 1
    )
    duration = 0.0
    if isinstance(cause, ApplicationError):
        details = cause.details[0] if cause.details else None
        if isinstance(details, dict):
            # The wrapper's details; a tool's own ApplicationError may carry anything.
            attempts = _number(details.get("attempt"), int, attempts)
            duration = _number(details.get("duration_ms"), float, 0.0)
        return False, error_text(cause), duration, attempts
    if isinstance(cause, TimeoutError):
        kind = cause.type.name.lower() if cause.type is not None else "timeout"
        return False, f"timed out after {timeout_s:g} s ({kind})", duration, attempts
    if isinstance(cause, CancelledError):
        return False, "cancelled", duration, attempts
    return False, str(cause or exc), duration, attempts


def _number(value: Any, kind: type[Any], default: Any) -> Any:
    if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
        return kind(value)
    return default


def args_too_large(call: StepCall, size: int, request: PlanInput) -> str:
    return (
        f"the arguments of step '{call.step_id}' are {size // 1024} KiB, over the "
        f"{request.bounds.max_result_bytes // 1024} KiB limit; bind smaller values"
    )


def bounded_payload(
    run: PlanRun, request: PlanInput, resolved: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The workflow's result, always within ``max_returned_bytes``.

    Error texts are already cut (``MAX_ERROR_CHARS``) and each result is bounded,
    so only ``returned`` can make the whole payload too large. The plan did its
    work, so it never fails for that: returned results are kept in ``returns``
    order while they fit, and each of the rest is replaced by a preview naming its
    size (the ledger and the conversation's memory keep the facts; the plan is then
    not ``final``, since its answer is incomplete).
    """
    payload = run.result().model_dump(mode="json")
    # The ledger without the fields a line leaves unset (a client reads them back as None):
    # two of the eight fields of every line, in the plan's history once more.
    payload["ledger"] = [
        {k: v for k, v in line.items() if v is not None} for line in payload["ledger"]
    ]
    if payload.get("exited") is None:
        payload.pop("exited", None)
    if resolved:
        payload["returned"].update(resolved)  # stored results read back for the model
    returned: dict[str, Any] = payload["returned"]
    room = request.bounds.max_returned_bytes - json_size({**payload, "returned": {}}) - 4096
    payload["returned"], previewed = fit_returned(returned, room, json_size)
    if previewed and payload["final"]:
        payload["final"] = False
        payload["inference_passes_saved"] = max(payload["inference_passes_saved"] - 1, 0)
    payload = compact_result(payload)  # every reader expands it (``result_form``)
    if run.recall is not None:
        # What this plan ran ok, for the conversation's memory: only what fits, never a
        # reason for the plan to fail.
        total = json_size(payload)
        space = min(run.recall.max_bytes, request.bounds.max_returned_bytes - total - 1024)
        payload[REMEMBERED_KEY] = [entry.to_wire() for entry in bounded(run.remembered(), space)]
    return payload


def ms_since(started: datetime) -> float:
    """Milliseconds of workflow time since ``started`` (deterministic: workflow.now)."""
    return float((workflow.now() - started).total_seconds() * 1000.0)
