"""Every durable tool call's activity, written once: a registered tool through its wrapper
activity (validated, bounded JSON, stored by reference when large), an existing activity
as it is, or an MCP tool through its server's call-tool activity.

A plan step, a map or reduce item and a tool call inside an agent step each decide their
``ActivityCall`` (the owner's rules as a ``CallPolicy``, the activity id, the summary) and
hand it to ``call_activity``; only the deciding differs. Workflow code."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from temporalio import workflow
from temporalio.common import RawValue
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from durable_plan.language.options import ToolOptions
    from durable_plan.language.step_path import rooted
    from durable_plan.run.calls import StepCall
    from durable_plan.run.references import is_reference
    from durable_plan.temporal.wire.messages import StepRequest, StepResponse, json_payload
    from durable_plan.temporal.wire.plan_settings import DEFAULT_MAX_STORED_BYTES
    from durable_plan.temporal.wire.workflow_inputs import PlanInput
    from durable_plan.temporal.workflows.admission import Admission
    from durable_plan.temporal.workflows.mcp_steps import call_mcp_tool
    from durable_plan.temporal.workflows.outcomes import Outcome, activity_failure, ms_since
    from durable_plan.temporal.workflows.policy import CallPolicy
    from durable_plan.temporal.workflows.sandbox_chain import sandbox_scope
    from durable_plan.temporal.workflows.ui_summary import StepSummaries


@dataclass(frozen=True)
class ActivityCall:
    """One tool call, everything about it decided: what ``call_activity`` runs."""

    tool: str
    activity_id: str
    summary: str | None
    args: dict[str, Any]
    options: ToolOptions
    policy: CallPolicy
    task_queue: str | None
    initial_interval_s: float
    max_result_bytes: int
    wrapper_retries: int | None
    """The retry budget the wrapper counts the tool's own failures against (``StepRequest``)."""
    store_over: int | None = None
    """Results over this many bytes go to the result store (None: never)."""
    max_stored_bytes: int = DEFAULT_MAX_STORED_BYTES
    store_chain: str | None = None
    fairness_key: str | None = None
    """Whose call this is, for a limited tool's queue (``CallPolicy.remote_options``)."""
    sandbox: dict[str, Any] | None = None
    """A sandbox tool's environment (``sandbox_chain.sandbox_scope``): the conversation's
    chain from the trusted input, never from ``args``."""


async def call_activity(call: ActivityCall, admission: Admission | None = None) -> Outcome:
    """The call under its ``CallPolicy``; a failure is a value (the step's error).

    ``admission``: a local activity's result travels in the workflow task's completion,
    so it is charged to the task's byte budget."""
    policy = call.policy
    common = policy.activity_options(call.activity_id, call.summary, call.initial_interval_s)
    try:
        if call.options.kind == "activity":
            return await _run_raw_activity(call, common)
        if call.options.kind == "mcp":
            return await _run_mcp_call(call, common)
        return await _run_tool_activity(call, common, admission)
    except ActivityError as exc:
        return activity_failure(exc, policy.timeout_s, policy.max_attempts)


async def _run_tool_activity(
    call: ActivityCall, common: dict[str, Any], admission: Admission | None
) -> Outcome:
    """A registered tool, through its wrapper activity (validated, bounded JSON result)."""
    policy = call.policy
    arg = StepRequest(
        call.activity_id,
        call.args,
        call.max_result_bytes,
        call.wrapper_retries,
        call.store_over,
        call.max_stored_bytes,
        call.store_chain,
        call.sandbox,
    )
    # Scheduled with id = the step id; encoded here, once, as the converter would (JSON):
    # the converter's own pass (its encoder, a sorted copy) is one more per step.
    wire = RawValue(json_payload(arg.to_compact_wire(workflow.info().run_id)))
    raw: RawValue
    if policy.local:
        raw = await workflow.execute_local_activity(call.tool, wire, result_type=RawValue, **common)
    else:
        raw = await workflow.execute_activity(
            call.tool,
            wire,
            result_type=RawValue,
            **policy.remote_options(call.task_queue, call.fairness_key),
            **common,
        )
    response = StepResponse.from_payload(raw, workflow.payload_converter)
    if policy.local and admission is not None:
        admission.spend(response.size)
    return True, response.result, response.duration_ms, response.attempt


async def _run_raw_activity(call: ActivityCall, common: dict[str, Any]) -> Outcome:
    """An existing activity, called as it is: positional arguments, its own result."""
    result = await workflow.execute_activity(
        call.tool,
        args=call.options.positional(call.args),
        **call.policy.remote_options(call.task_queue, call.fairness_key),
        **common,
    )
    return True, result, 0.0, 1


async def _run_mcp_call(call: ActivityCall, common: dict[str, Any]) -> Outcome:
    """An MCP tool: its server's call-tool activity (``temporal/workflows/mcp_steps.py``)."""
    started = workflow.now()
    ok, value, calls = await call_mcp_tool(
        call.options,
        call.args,
        {**call.policy.remote_options(call.task_queue, call.fairness_key), **common},
        retries=call.policy.retries,
        backoff_s=call.initial_interval_s,
        max_result_bytes=call.max_result_bytes,
    )
    return ok, value, ms_since(started), calls


def fairness_key(request: PlanInput) -> str:
    """Whose calls these are when they wait for a limited tool: the plan's own key, else the
    conversation (or workflow) that started it, else the plan itself. Workflow code."""
    if request.routing.fairness_key:
        return request.routing.fairness_key
    info = workflow.info()
    return info.parent.workflow_id if info.parent is not None else info.workflow_id


class StepActivities:
    """How one plan decides its steps' and items' calls; remembers whether any result was
    stored (the plan deletes them when it ends)."""

    def __init__(
        self,
        request: PlanInput,
        admission: Admission,
        summaries: StepSummaries | None,
    ) -> None:
        self.request = request
        self.admission = admission
        self.summaries = summaries
        self.stored_any = False
        """A step's result went to the result store (claim check): the plan deletes it."""
        self._fairness_key: str | None = None
        self._chain: str | None = None  # ``store_chain``, looked up once

    def store_chain(self) -> str:
        """The key scope of this run's stored results: its chain's first run id."""
        if self._chain is None:
            self._chain = workflow.info().first_execution_run_id
        return self._chain

    async def run(self, call: StepCall, options: ToolOptions) -> Outcome:
        """The step's call under its ``CallPolicy`` (``call_activity``)."""
        request = self.request
        policy = CallPolicy.of(
            options,
            timeout_s=call.timeout_s,
            retries=call.retries,
            local=call.local,
            interruptions=request.retrying.max_interruptions,
        )
        store_over: int | None = None
        if request.storage.store_results and options.kind not in ("activity", "mcp"):
            store_over = request.bounds.max_result_bytes
            if request.storage.store_over_bytes is not None:
                store_over = max(min(request.storage.store_over_bytes, store_over), 0)
        outcome = await call_activity(
            ActivityCall(
                tool=call.tool,
                activity_id=call.step_id,
                summary=self._summary(call),
                args=call.args,
                options=options,
                policy=policy,
                task_queue=request.routing.task_queue,
                initial_interval_s=request.retrying.retry_initial_interval_s,
                max_result_bytes=request.bounds.max_result_bytes,
                wrapper_retries=policy.retries if policy.interruptions else None,
                store_over=store_over,
                max_stored_bytes=request.storage.max_stored_bytes,
                store_chain=self.store_chain() if store_over is not None else None,
                fairness_key=self._whose(),
                sandbox=self._sandbox(call, options),
            ),
            self.admission,
        )
        if store_over is not None and outcome[0] and is_reference(outcome[1]):
            self.stored_any = True
        return outcome

    def _sandbox(self, call: StepCall, options: ToolOptions) -> dict[str, Any] | None:
        """A sandbox tool's environment: the conversation's (``sandbox_chain``)."""
        if options.kind != "sandbox":
            return None
        path = rooted(self.request.debugging.path_prefix, call.step_id)
        return sandbox_scope(self.request.chain, options, path)

    def _whose(self) -> str:
        """``fairness_key`` of this plan, decided once (it reads ``workflow.info()``)."""
        if self._fairness_key is None:
            self._fairness_key = fairness_key(self.request)
        return self._fairness_key

    def _summary(self, call: StepCall) -> str | None:
        """What the UI shows next to the activity type (the tool): id, level, bindings
        (None: the plan asked for no step summaries, ``ui_metadata``)."""
        if self.summaries is None:
            return None
        return self.summaries.of(call.step_id) or call.step_id
