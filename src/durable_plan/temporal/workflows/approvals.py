"""The approval desk of one plan workflow: which steps await a person, and what they saw.

A decision is taken only for a step that is awaiting approval now, when its
arguments are bound and shown in ``progress``; a signal that arrives early (or
names the wrong step, or carries the digest of other arguments) is refused,
recorded where ``progress`` shows it, and ignored. Bookkeeping, so the workflow's
handlers stay one line each; its one Temporal call is the web UI's current details,
which name every call awaiting a person while any does, beside the calls paused at a
breakpoint (``plan_status.PersonWaits``, shared with the pause desk): a wait for a person
never looks idle.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from temporalio import workflow

from durable_plan.language.digest import args_digest
from durable_plan.language.plan_limits import truncate_text
from durable_plan.language.step_path import StepPathError, parse
from durable_plan.run.events import SILENT, Emitter
from durable_plan.temporal.wire.messages import ApprovalDecision
from durable_plan.temporal.workflows.plan_status import (
    MAX_DETAILS_CHARS,
    PersonWaits,
    awaiting_details,
)

APPROVE_SIGNAL = "approve_step"
"""The signal a person's decision arrives by (fire-and-forget), on every workflow with a desk:
a plan, an agent step, a conversation's direct calls (``direct_calls``)."""
DECIDE_UPDATE = "decide_step"
"""The update a person's decision arrives by (the caller hears whether it was taken)."""

MAX_REFUSALS_KEPT = 5
"""Per step: decisions are sent by people and programs, and may be repeated."""
MAX_IDS_WITH_REFUSALS = 20


class ApprovalDesk:
    def __init__(
        self,
        step_ids: Iterable[str] | None,
        events: Emitter = SILENT,
        on_waiting: Callable[[bool], None] | None = None,
        waits: PersonWaits | None = None,
    ) -> None:
        """``step_ids``: the ids refusals are recorded for (None: any, at most
        ``MAX_IDS_WITH_REFUSALS`` of them); ``events``: where a call awaiting a person
        and the decision are announced (plan steps, items and agent tool calls alike);
        ``on_waiting``: told when the first call starts waiting (True) and the last one
        stops (False), as the plan's status attribute is (``plan_status``); ``waits``: the
        workflow's calls waiting for a person, which draw its details (its own when
        none is given; a pause desk shares it: ``PauseDesk(waits=desk.waits)``)."""
        self.events = events
        self.waits = waits if waits is not None else PersonWaits()
        self.waits.add(lambda: bool(self._awaiting), self._section)
        self.on_waiting = on_waiting
        self._known = frozenset(step_ids) if step_ids is not None else None
        self._awaiting: dict[str, tuple[dict[str, Any], str]] = {}
        """Per call awaiting a person: its arguments and their digest, made once (in
        ``open``): the arguments may be large, and the details are redrawn on every change."""
        self._tools: dict[str, str | None] = {}
        self._decisions: dict[str, ApprovalDecision] = {}
        self._refused: dict[str, list[str]] = {}

    def open(self, step_id: str, args: dict[str, Any], tool: str | None = None) -> None:
        """The step waits for a person, who will see (and may bind to) these arguments."""
        first = not self._awaiting
        digest = args_digest(args)
        self._awaiting[step_id] = (args, digest)
        self._tools[step_id] = tool
        self.events.emit("awaiting_approval", **_where(step_id), detail={"args_digest": digest})
        if first and self.on_waiting is not None:
            self.on_waiting(True)
        self.waits.redraw()

    def close(self, step_id: str) -> None:
        if self._awaiting.pop(step_id, None) is None:
            return
        self._tools.pop(step_id, None)
        self.waits.redraw()
        if not self._awaiting and self.on_waiting is not None:
            self.on_waiting(False)

    def _section(self, limit: int = MAX_DETAILS_CHARS) -> str:
        """The web UI's current details' part for approvals: every call awaiting a person
        (its tool, its arguments' digest, the command that answers it)."""
        info = workflow.info()
        calls = [
            (call_id, self._tools.get(call_id), digest)
            for call_id, (_args, digest) in self._awaiting.items()
        ]
        return awaiting_details(calls, info.workflow_id, info.namespace, limit)

    def is_awaiting(self, step_id: str) -> bool:
        return step_id in self._awaiting

    def decision(self, step_id: str) -> ApprovalDecision | None:
        return self._decisions.get(step_id)

    def refusal(self, decision: ApprovalDecision) -> str | None:
        """Why this decision cannot be taken now, or None when it can."""
        step_id = decision.step_id
        if step_id not in self._awaiting:
            waiting = truncate_text(", ".join(sorted(self._awaiting)) or "none", 300)
            return f"step '{step_id}' is not awaiting approval (awaiting: {waiting})"
        if step_id in self._decisions:
            return f"step '{step_id}' was already decided"
        expected = self._awaiting[step_id][1]
        if decision.args_digest is not None and decision.args_digest != expected:
            return (
                f"the decision for step '{step_id}' was made for arguments with digest "
                f"{decision.args_digest}, but the step's arguments have digest {expected}"
            )
        return None

    def take(self, decision: ApprovalDecision) -> None:
        self._decisions[decision.step_id] = decision
        self.events.emit(
            "approval_decided",
            **_where(decision.step_id),
            status="approved" if decision.approved else "rejected",
        )

    def decide(self, decision: ApprovalDecision) -> str:
        """The ``decide_step`` update, once ``validate`` let it through: taken, and what was
        decided, for the caller."""
        self.take(decision)
        return "approved" if decision.approved else "rejected"

    def validate(self, decision: ApprovalDecision) -> None:
        """The ``decide_step`` update's validator: a decision that cannot be taken now is
        refused to its sender (nothing enters the history)."""
        reason = self.refusal(decision)
        if reason is not None:
            raise ValueError(reason)

    def offer(self, decision: ApprovalDecision) -> None:
        """A signal: take it if it may be taken now, else record why not and ignore it."""
        reason = self.refusal(decision)
        if reason is None:
            self.take(decision)
        elif self._records(decision.step_id):
            kept = self._refused.setdefault(decision.step_id, [])
            kept.append(truncate_text(f"{APPROVE_SIGNAL} ignored: {reason}", 300))
            del kept[:-MAX_REFUSALS_KEPT]

    def _records(self, step_id: str) -> bool:
        if self._known is not None:
            return step_id in self._known
        return step_id in self._refused or len(self._refused) < MAX_IDS_WITH_REFUSALS

    def awaiting_details(self) -> list[dict[str, Any]]:
        """Every call awaiting a decision, with its arguments and their digest."""
        return [{"id": step_id, **self.details(step_id)} for step_id in self._awaiting]

    def details(self, step_id: str) -> dict[str, Any]:
        """What ``progress`` adds to a step's line: the arguments awaiting a decision, refusals."""
        extra: dict[str, Any] = {}
        if step_id in self._awaiting:
            extra["args"], extra["args_digest"] = self._awaiting[step_id]
        if step_id in self._refused:
            extra["refused_decisions"] = list(self._refused[step_id])
        return extra


def _where(call_id: str) -> dict[str, str]:
    """An event's ``step`` (the top-level step) and ``path`` (the call) for a call id (a
    step path inside the run; a direct call's id is neither: it is the step)."""
    try:
        return {"step": parse(call_id).step, "path": call_id}
    except StepPathError:
        return {"step": call_id}


async def await_decision(
    desk: ApprovalDesk, call_id: str, args: dict[str, Any], tool: str | None = None
) -> str | None:
    """Pause until a person decides on ``call_id`` (its arguments shown in ``progress``,
    the call and its ``tool`` in the workflow's current details); None means approved,
    else the rejection text. Workflow code: the one wait for a person, for plan steps, map
    items and tool calls inside agent steps alike."""
    desk.open(call_id, args, tool)
    evicted = False
    try:
        await workflow.wait_condition(lambda: desk.decision(call_id) is not None)
    except GeneratorExit:  # the worker evicted the run: no workflow call may be made
        evicted = True
        raise
    finally:
        if not evicted:
            desk.close(call_id)
    decision = desk.decision(call_id)
    if decision is None:  # unreachable: the wait ends only with a decision; never approve
        return "no decision was recorded"
    if decision.approved:
        return None
    reason = f": {decision.reason}" if decision.reason else ""
    return f"rejected by a person{reason}"


class ApprovalHandlers:
    """A person's decisions on the calls awaiting approval in ``self.desk``: the handlers
    ``PlanWorkflow`` and ``AgentStepWorkflow`` share (the ``APPROVE_SIGNAL`` signal, the
    ``DECIDE_UPDATE`` update and its validator); their bodies are the desk's, which a
    conversation's direct calls install as they go (``direct_calls``)."""

    desk: ApprovalDesk

    @workflow.signal(name=APPROVE_SIGNAL)
    def approve_step(self, decision: ApprovalDecision) -> None:
        """Approve or reject a call awaiting approval (fire-and-forget; works from other
        workflows). Refused, recorded in ``progress`` and ignored for any other call."""
        self.desk.offer(decision)

    @workflow.update(name=DECIDE_UPDATE)
    def decide_step(self, decision: ApprovalDecision) -> str:
        """Approve or reject a call awaiting approval and hear back that it was taken."""
        return self.desk.decide(decision)

    @decide_step.validator
    def _validate_decision(self, decision: ApprovalDecision) -> None:
        self.desk.validate(decision)
