"""A tool the model calls directly in a conversation's workflow: one more caller of the stages.

A ``TemporalAgent`` given ``durable_tools(registry)`` lets its model call a registry tool
outside any plan. That call passes the same stages as a plan step (``pipeline.Stages``): a
person's approval when the owner gated the tool, admission against the conversation's
budget, the activity under the owner's ``CallPolicy`` (``step_activities.call_activity``:
the timeout, the retry policy, the queue, local or not, all built in ``policy.py``). The
agent's tool hooks are not relayed: Strands itself runs them around a direct call, in this
same workflow, before and after the stages.

The person's decision reaches the conversation's workflow as it reaches a plan: the
``approve_step`` signal or the ``decide_step`` update (``ApprovalDecision``; the names and
bodies are ``approvals``', one for every workflow; so ``PlanHandle.decide`` and
``durable-plan approve <conversation id> <call id>`` take it),
and the ``direct_calls`` query lists the calls awaiting one, with their arguments and
digest. A conversation is the user's own workflow class, so these handlers are installed
as it goes (the query on its first direct call, the decisions on its first gated one), as
``hook_relay.hook_inbox`` installs the hook relay's, not declared on a class. Waiting
happens in the tool's own body, which the agent awaits; the handlers are synchronous, so
none outlives the call. Workflow code.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from temporalio import workflow

from durable_plan.language.options import ToolOptions
from durable_plan.temporal.wire.ids import bounded_key
from durable_plan.temporal.wire.messages import ApprovalDecision
from durable_plan.temporal.wire.plan_settings import (
    DEFAULT_MAX_HISTORY_BYTES,
    DEFAULT_MAX_INTERRUPTIONS,
    DEFAULT_MAX_RESULT_BYTES,
    DEFAULT_MAX_TASK_BYTES,
    Chain,
    Retrying,
)
from durable_plan.temporal.workflows.activity_calls import ActivityCall, call_activity
from durable_plan.temporal.workflows.admission import Admission
from durable_plan.temporal.workflows.approvals import APPROVE_SIGNAL, DECIDE_UPDATE, ApprovalDesk
from durable_plan.temporal.workflows.hook_relay import HookAsker
from durable_plan.temporal.workflows.outcomes import Outcome
from durable_plan.temporal.workflows.pipeline import Stages
from durable_plan.temporal.workflows.policy import CallPolicy
from durable_plan.temporal.workflows.sandbox_chain import sandbox_scope

DIRECT_PREFIX = "direct/"
"""How a direct call's id begins (``direct/<toolUseId>``): what `durable-plan approve` takes
on a conversation."""
DIRECT_CALLS_QUERY = "direct_calls"
"""What a conversation's direct calls await: ``{"awaiting": [{"id", "args", "args_digest"}]}``."""
RETRY_INITIAL_INTERVAL_S: float = Retrying.retry_initial_interval_s
"""A plan's default (a dataclass field's default is its class attribute), read from there."""


class DirectCalls:
    """One conversation workflow's direct calls: their budget, approval desk and call ids."""

    def __init__(self) -> None:
        self.desk = ApprovalDesk(None)  # call ids are made as the conversation goes
        self.admission = Admission(
            max_task_bytes=DEFAULT_MAX_TASK_BYTES,
            # Near it a call is refused, saying so (Temporal terminates a workflow at 50
            # MiB); a conversation's plans stop at the same bound (``strands.durable``).
            max_history_bytes=DEFAULT_MAX_HISTORY_BYTES,
            max_result_bytes=DEFAULT_MAX_RESULT_BYTES,
        )
        self.stages = Stages(HookAsker(None, self.admission), self.desk, self.admission)
        self._ids: set[str] = set()
        self._deciding = False

    def call_id(self, tool_use_id: str) -> str:
        """``direct/<toolUseId>``, what a person names in a decision and the activity's id;
        the model's id is bounded (``ids.bounded_key``: a server-refused activity id would
        fail the workflow task on every retry), and one the run issued already gets
        ``/2``, ``/3`` added until it is new (a model that sends ``a``, ``a``, ``a/2`` gets
        three ids). The model's ids are recorded, so a replay makes the same."""
        base = f"{DIRECT_PREFIX}{bounded_key(tool_use_id)}"
        made, n = base, 1
        while made in self._ids:
            n += 1
            made = f"{base}/{n}"
        self._ids.add(made)
        return made

    def take_decisions(self) -> str | None:
        """Install the decision handlers, on the first call that needs a person; None when
        they are ours, else why a person's decision could not reach this workflow (its
        class declares an ``approve_step`` or ``decide_step`` of its own: kept, not taken
        over)."""
        if self._deciding:
            return None
        for name, find in (
            (APPROVE_SIGNAL, workflow.get_signal_handler),
            (DECIDE_UPDATE, workflow.get_update_handler),
        ):
            if find(name) is not None:
                return (
                    f"not started: it needs a person's approval, and this workflow declares "
                    f"its own '{name}', which a person's decision on a direct tool call uses: "
                    "rename yours"
                )
        workflow.set_signal_handler(APPROVE_SIGNAL, self.offer)
        workflow.set_update_handler(
            DECIDE_UPDATE,
            lambda raw: self.desk.decide(_decision(raw)),
            validator=lambda raw: self.desk.validate(_decision(raw)),
        )
        self._deciding = True
        return None

    def offer(self, raw: Any) -> None:
        """The ``APPROVE_SIGNAL`` signal, as ``ApprovalDesk.offer`` takes it; one that is no
        decision at all is nobody's (nothing waits for it), and a signal cannot answer."""
        try:
            decision = _decision(raw)
        except ValueError:
            return
        self.desk.offer(decision)

    def awaiting(self) -> dict[str, Any]:
        """The ``direct_calls`` query: the calls awaiting a person, arguments and digest."""
        return {"awaiting": self.desk.awaiting_details()}


def direct_calls() -> DirectCalls | str:
    """The current workflow's direct calls, made (and its query installed) on first use, as
    ``hook_relay.hook_inbox`` finds its inbox: by the handler it installed. A workflow that
    declares a ``direct_calls`` query of its own keeps it, as ``take_decisions`` keeps a
    user's ``approve_step``: the answer is then why the call did not start (a value the
    model reads, never an exception failing the workflow task on every retry)."""
    handler = workflow.get_query_handler(DIRECT_CALLS_QUERY)
    calls = getattr(handler, "__self__", None)
    if isinstance(calls, DirectCalls):
        return calls
    if handler is not None:
        return (
            f"not started: this workflow declares its own '{DIRECT_CALLS_QUERY}' query, which "
            "lists the direct tool calls awaiting a person: rename yours"
        )
    calls = DirectCalls()
    workflow.set_query_handler(DIRECT_CALLS_QUERY, calls.awaiting)
    return calls


async def call_directly(
    tool: str,
    options: ToolOptions,
    tool_use_id: str,
    args: dict[str, Any],
    task_queue: str | None,
) -> Outcome:
    """The model's direct call through the stages; a failure (a rejection, the owner's
    timeout, the last retry spent) is a value, as a plan step's is. ``options``: the
    owner's, with every approval gate applied (``tools.approval.ApprovalPolicy``)."""
    calls = direct_calls()
    if isinstance(calls, str):
        return False, calls, 0.0, 0
    if options.requires_approval:
        refused = calls.take_decisions()
        if refused is not None:
            return False, refused, 0.0, 0
    call_id = calls.call_id(tool_use_id)
    policy = CallPolicy.of(options, interruptions=DEFAULT_MAX_INTERRUPTIONS)
    fairness = workflow.info().workflow_id
    try:
        outcome = await calls.stages.run(
            call_id,
            tool,
            options,
            args,
            lambda bound: call_activity(
                ActivityCall(
                    tool=tool,
                    activity_id=call_id,
                    summary=f"direct: {tool}",
                    args=bound,
                    options=options,
                    policy=policy,
                    task_queue=task_queue,
                    initial_interval_s=RETRY_INITIAL_INTERVAL_S,
                    max_result_bytes=DEFAULT_MAX_RESULT_BYTES,
                    wrapper_retries=policy.retries if policy.interruptions else None,
                    fairness_key=fairness,
                    sandbox=sandbox_scope(Chain(), options, call_id),  # this conversation's
                ),
                calls.admission,
            ),
        )
    finally:
        # A wait for room may have left admission's pacer timer pending: the conversation
        # must not complete before it fires. It goes on after this call, so a cancel
        # meanwhile is its own (``Admission.settle``).
        await calls.admission.settle(absorb_cancel=False)
    if outcome is None:  # unreachable: nothing withdraws a direct call (``wanted`` is ALWAYS)
        # A value, not an assert: an exception here would fail the workflow task forever.
        return False, f"the call {call_id} was withdrawn before it ran", 0.0, 0
    return outcome


def _decision(raw: Any) -> ApprovalDecision:
    """An ``ApprovalDecision`` from the wire: a conversation runs in the workflow sandbox,
    where the converter hands handlers plain dicts (as ``hook_relay`` reads its requests)."""
    if isinstance(raw, ApprovalDecision):
        return raw
    if not isinstance(raw, Mapping):
        raise ValueError("a decision is an object {step_id, approved, reason, args_digest}")
    step_id, approved = raw.get("step_id"), raw.get("approved")
    digest, reason = raw.get("args_digest"), raw.get("reason") or ""
    if not isinstance(step_id, str) or not isinstance(approved, bool):
        raise ValueError("a decision needs step_id (the call id) and approved (true or false)")
    if (digest is not None and not isinstance(digest, str)) or not isinstance(reason, str):
        raise ValueError("a decision's args_digest and reason are strings")
    return ApprovalDecision(step_id, approved, reason, digest)
