"""What a plan that ended as a whole had done: its ledger, read back from its history.

A plan that is cancelled, terminated or timed out returns nothing: its parent gets
only the failure. But its steps may have run (a payment charged), and a model
that hears only "the plan failed" resubmits the same steps and charges twice. So
the plugin asks an activity (``activities.ledger_recovery``), which reads the plan
workflow's history through the worker's client (with its data converter: encryption
keys included), and rebuilds what the model and the conversation's memory need: each
step's status, and the steps that ended ok with their arguments and results
(``Remembered``), so a repair plan reuses them instead of running them again.

A plan that fails inside its own code (``PlanWorkflowError``) puts the same facts
into its failure's details; this module turns either form into one ``Salvage``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.api.enums.v1 import EventType
from temporalio.exceptions import ActivityError

from durable_plan.language.plan import PlanResult, StepOutcome
from durable_plan.run.reuse import (
    REMEMBERED_KEY,
    Recall,
    Remembered,
    args_key,
    bounded,
    reusable_tools,
)
from durable_plan.temporal.wire.messages import StepRequest, StepResponse
from durable_plan.temporal.wire.workflow_inputs import PlanInput
from durable_plan.temporal.workflows.policy import retry_policy

RECOVER_LEDGER = "durable_plan_recover_ledger"
PARTIAL_RESULT = "partial_result"
"""The key, in a plan failure's details or in the activity's answer, of the ledger."""
MAX_SALVAGE_BYTES = 512 * 1024
"""The answer lands in the conversation's history: a bounded summary, never all results."""
_MAX_EVENTS = 60_000


@dataclass
class Salvage:
    """What a plan that ended as a whole had done."""

    ledger: list[dict[str, Any]] = field(default_factory=list)
    remembered: list[Remembered] = field(default_factory=list)

    @classmethod
    def from_wire(cls, data: Any) -> Salvage | None:
        if not isinstance(data, dict) or not isinstance(data.get(PARTIAL_RESULT), list):
            return None
        ledger = [line for line in data[PARTIAL_RESULT] if isinstance(line, dict)]
        remembered: list[Remembered] = []
        for entry in data.get(REMEMBERED_KEY) or []:
            try:
                remembered.append(Remembered.from_wire(entry))
            except TypeError:
                continue
        return cls(ledger, remembered)

    def result(self) -> PlanResult:
        """A failed ``PlanResult`` for the model: the steps that ran ok, and what did not."""
        outcomes = []
        for line in self.ledger:
            status = str(line.get("status") or "skipped")
            error = line.get("error")
            if status == "running":
                status, error = (
                    "failed",
                    "still running when the plan ended: its effect may or may not have happened",
                )
            elif status == "pending":
                status, error = "skipped", "not started: the plan ended first"
            if status not in ("ok", "failed", "skipped", "not_taken"):
                status = "skipped"
            outcomes.append(
                StepOutcome(
                    id=str(line.get("id")),
                    tool=str(line.get("tool")),
                    status=status,  # type: ignore[arg-type]
                    level=int(line.get("level") or 0),
                    error=error if isinstance(error, str) else None,
                    attempts=1 if status in ("ok", "failed") else 0,
                )
            )
        return PlanResult(
            returned={}, ledger=outcomes, levels=[], inference_passes_saved=0, final=False
        )


def salvage_from_history(events: list[Any], decode: Any) -> Salvage:
    """Rebuild a plan's ledger from its history events. ``decode(payloads) -> [values]``."""
    request: PlanInput | None = None
    scheduled: dict[int, tuple[str, str, Any]] = {}  # event id -> (activity id, type, input)
    ended: dict[str, tuple[str, Any]] = {}  # activity id -> (status, result or error)
    children: dict[int, str] = {}
    for event in events[:_MAX_EVENTS]:
        kind = event.event_type
        if kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
            raw = decode(event.workflow_execution_started_event_attributes.input.payloads)
            request = PlanInput.from_wire(raw[0] if raw else None)
        elif kind == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            attrs = event.activity_task_scheduled_event_attributes
            inputs = decode(attrs.input.payloads) if attrs.input.payloads else []
            scheduled[event.event_id] = (
                attrs.activity_id,
                attrs.activity_type.name,
                inputs[0] if inputs else None,
            )
        elif kind == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            attrs = event.activity_task_completed_event_attributes
            activity_id = scheduled.get(attrs.scheduled_event_id, ("", "", None))[0]
            results = decode(attrs.result.payloads) if attrs.result.payloads else [None]
            ended[activity_id] = ("ok", results[0])
        elif kind in (
            EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED,
            EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT,
        ):
            attrs = (
                event.activity_task_failed_event_attributes
                if kind == EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED
                else event.activity_task_timed_out_event_attributes
            )
            activity_id = scheduled.get(attrs.scheduled_event_id, ("", "", None))[0]
            ended[activity_id] = ("failed", attrs.failure.message or "failed")
        elif kind == EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED:
            attrs = event.start_child_workflow_execution_initiated_event_attributes
            children[event.event_id] = attrs.workflow_id.rsplit("/agent/", 1)[-1]
        elif kind == EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_COMPLETED:
            attrs = event.child_workflow_execution_completed_event_attributes
            step = children.get(attrs.initiated_event_id)
            if step is not None:
                ended[step] = ("ok", None)
        elif kind == EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_FAILED:
            attrs = event.child_workflow_execution_failed_event_attributes
            step = children.get(attrs.initiated_event_id)
            if step is not None:
                ended[step] = ("failed", attrs.failure.message or "failed")
    if request is None:
        return Salvage()
    return _salvage(request, scheduled, ended, set(children.values()))


def _salvage(
    request: PlanInput,
    scheduled: dict[int, tuple[str, str, Any]],
    ended: dict[str, tuple[str, Any]],
    agent_steps: set[str],
) -> Salvage:
    steps = [s for s in request.plan.get("steps") or [] if isinstance(s, dict)]
    started = {activity_id: (kind, arg) for activity_id, kind, arg in scheduled.values()}
    memory = request.memory if isinstance(request.memory, dict) else None
    recall = Recall.from_wire(memory, reusable_tools(request.tools)) if memory else None
    ledger: list[dict[str, Any]] = []
    learned: list[Remembered] = []
    for step in steps:
        sid, tool = str(step.get("id")), str(step.get("tool"))
        if sid in ended:
            status, value = ended[sid]
        elif sid in agent_steps or any(_belongs(a, sid) for a in started):
            status, value = "running", None
        else:
            status, value = "pending", None
        line: dict[str, Any] = {"id": sid, "tool": tool, "status": status}
        if status == "failed":
            line["error"] = str(value)[:500]
        ledger.append(line)
        if status != "ok" or recall is None or sid not in started:
            continue
        entry = _learned(recall, sid, tool, started[sid][1], value)
        if entry is not None:
            learned.append(entry)
    kept = bounded(learned, min(recall.max_bytes if recall else 0, MAX_SALVAGE_BYTES))
    return Salvage(ledger, kept)


def _belongs(activity_id: str, step_id: str) -> bool:
    """``step``, ``step#2`` (an MCP call's next call) or ``step[3]`` (a map's item)."""
    return activity_id == step_id or activity_id.startswith((f"{step_id}#", f"{step_id}["))


def _learned(recall: Recall, sid: str, tool: str, arg: Any, result: Any) -> Remembered | None:
    """The memory entry of a wrapped tool's step that ended ok (others are not reused)."""
    try:
        args = StepRequest.from_wire(arg).args
        value = StepResponse.from_wire(result).result
    except (TypeError, ValueError):
        return None
    key = args_key(args) if tool in recall.reusable else ""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    entry = Remembered(sid, tool, key, text, recall.plan)
    return entry if entry.size <= recall.max_bytes else None


def salvage_to_wire(salvage: Salvage) -> dict[str, Any]:
    return {
        PARTIAL_RESULT: salvage.ledger,
        REMEMBERED_KEY: [e.to_wire() for e in salvage.remembered],
    }


async def recover(workflow_id: str, run_id: str | None, task_queue: str | None) -> Salvage | None:
    """Workflow code: run the activity; None when the history could not be read."""
    try:
        raw = await workflow.execute_activity(
            RECOVER_LEDGER,
            {"workflow_id": workflow_id, "run_id": run_id},
            result_type=dict,
            task_queue=task_queue,
            start_to_close_timeout=timedelta(seconds=30),
            retry_policy=retry_policy(3),
            summary=f"read the ledger of {workflow_id}",
        )
    except ActivityError as exc:
        workflow.logger.warning("the ended plan's ledger could not be read: %s", exc)
        return None
    return Salvage.from_wire(raw)
