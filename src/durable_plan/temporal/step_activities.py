"""A plan step's (or map item's) activity, called under its ``CallPolicy``: a registered tool
through its wrapper activity (validated, bounded JSON, stored by reference when large),
an existing activity as it is, or an MCP tool through its server's call-tool activity.
Workflow code."""

from __future__ import annotations

from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from durable_plan.language.options import ToolOptions
    from durable_plan.run.calls import StepCall
    from durable_plan.run.references import is_reference
    from durable_plan.temporal.admission import Admission
    from durable_plan.temporal.mcp_steps import call_mcp_tool
    from durable_plan.temporal.messages import PlanInput, StepRequest, StepResponse
    from durable_plan.temporal.outcomes import (
        Outcome,
        activity_failure,
        ms_since,
    )
    from durable_plan.temporal.policy import CallPolicy
    from durable_plan.temporal.ui_summary import StepSummaries

STORE_PER_RUN_PATCH = "store-per-run"
"""Marks plans whose stored results are keyed by their run's chain, not the workflow id."""


class StepActivities:
    """How one plan calls its tools' activities; remembers whether any result was stored."""

    def __init__(
        self,
        request: PlanInput,
        admission: Admission,
        summaries: StepSummaries,
        *,
        owner_rules: bool,
    ) -> None:
        self.request = request
        self.admission = admission
        self.summaries = summaries
        self.owner_rules = owner_rules
        self.stored_any = False
        """A step's result went to the result store (claim check): the plan deletes it."""
        self._chain: str | bool | None = False  # False: not decided yet (``store_chain``)

    def store_chain(self) -> str | None:
        """The key scope of this run's stored results: its chain's first run id (plans
        recorded before it: None, the workflow id alone). Decided once, on first use."""
        if self._chain is False:
            patched = workflow.patched(STORE_PER_RUN_PATCH)
            self._chain = workflow.info().first_execution_run_id if patched else None
        return self._chain if isinstance(self._chain, str) else None

    async def run(self, call: StepCall, options: ToolOptions) -> Outcome:
        """The call under its ``CallPolicy``; a failure is a value (the step's error)."""
        request = self.request
        policy = CallPolicy.of(
            options,
            timeout_s=call.timeout_s,
            retries=call.retries,
            local=call.local,
            owner_rules=self.owner_rules,
            interruptions=request.max_interruptions,
        )
        common = policy.activity_options(
            call.step_id, self._summary(call), request.retry_initial_interval_s
        )
        try:
            if options.kind == "activity":
                return await self._run_raw_activity(call, options, policy, request, common)
            if options.kind == "mcp":
                return await self._run_mcp_call(call, options, policy, request, common)
            return await self._run_tool_activity(call, policy, request, common)
        except ActivityError as exc:
            return activity_failure(exc, policy.timeout_s, policy.max_attempts)

    def _summary(self, call: StepCall) -> str:
        """What the UI shows next to the activity type (the tool): id, level, bindings."""
        summary = None if self.summaries is None else self.summaries.of(call.step_id)
        return summary or call.step_id

    async def _run_tool_activity(
        self, call: StepCall, policy: CallPolicy, request: PlanInput, common: dict[str, Any]
    ) -> Outcome:
        """A registered tool, through its wrapper activity (validated, bounded JSON result)."""
        store_over: int | None = None
        if request.store_results:
            store_over = request.max_result_bytes
            if request.store_over_bytes is not None:
                store_over = max(min(request.store_over_bytes, store_over), 0)
        arg = StepRequest(
            call.step_id,
            call.args,
            request.max_result_bytes,
            policy.retries if policy.interruptions else None,
            store_over,
            request.max_stored_bytes,
            self.store_chain() if store_over is not None else None,
        )
        wire: Any
        if policy.local:
            wire = await workflow.execute_local_activity(
                call.tool, arg.to_wire(), result_type=dict, **common
            )
        else:
            wire = await workflow.execute_activity(
                call.tool,
                arg.to_wire(),
                result_type=dict,
                **policy.remote_options(request.task_queue),
                **common,
            )
        response = StepResponse.from_wire(wire)
        if policy.local and self.admission is not None:
            # A local result travels in this workflow task's completion (its marker).
            self.admission.spend(len(response.result_json))
        result = response.result
        if store_over is not None and is_reference(result):
            self.stored_any = True
        return True, result, response.duration_ms, response.attempt

    async def _run_raw_activity(
        self,
        call: StepCall,
        options: ToolOptions,
        policy: CallPolicy,
        request: PlanInput,
        common: dict[str, Any],
    ) -> Outcome:
        """An existing activity, called as it is: positional arguments, its own result."""
        result = await workflow.execute_activity(
            call.tool,
            args=options.positional(call.args),
            **policy.remote_options(request.task_queue),
            **common,
        )
        return True, result, 0.0, 1

    async def _run_mcp_call(
        self,
        call: StepCall,
        options: ToolOptions,
        policy: CallPolicy,
        request: PlanInput,
        common: dict[str, Any],
    ) -> Outcome:
        """An MCP tool: its server's call-tool activity (``temporal/mcp_steps.py``)."""
        started = workflow.now()
        ok, value, calls = await call_mcp_tool(
            options,
            call.args,
            {**policy.remote_options(request.task_queue), **common},
            retries=policy.retries,
            backoff_s=request.retry_initial_interval_s,
            max_result_bytes=request.max_result_bytes,
        )
        return ok, value, ms_since(started), calls
