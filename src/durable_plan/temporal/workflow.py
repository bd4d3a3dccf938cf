"""``PlanWorkflow``: a checked plan run durably, one activity per step.

The workflow stays small because the logic does not live here: ``PlanRun``
(the same object the in-process runner drives) decides what runs next and
evaluates bindings; this class only starts activities, waits for the first to
finish and reports back. Every path ends the workflow (a result, a failed step,
a failed plan, or a cancellation), never a workflow task retried forever.

The workflow runs outside the sandbox (``sandboxed=False``). Its code is
deterministic by construction (``PlanRun`` does no I/O, reads no clock, and
JSONata's clock/random functions are refused), the replay tests and a
``max_cached_workflows=0`` test guard that, and the sandbox would cost a
re-import of jsonata and pydantic per run plus several milliseconds per step
(measured in ``bench/durable.py``).
"""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    CancelledError,
    TimeoutError,
)

with workflow.unsafe.imports_passed_through():
    from durable_plan.check import CheckedPlan, ToolCatalog, check_plan
    from durable_plan.engine import PlanRun, StepCall
    from durable_plan.errors import PlanRejected
    from durable_plan.temporal.messages import (
        ApprovalDecision,
        PlanInput,
        StepRequest,
        StepResponse,
    )

PLAN_WORKFLOW_NAME = "PlanWorkflow"

# (ok, result or error text, duration in ms, attempts)
Outcome = tuple[bool, Any, float, int]


@workflow.defn(name=PLAN_WORKFLOW_NAME, sandboxed=False)
class PlanWorkflow:
    """Runs one plan; ``progress`` answers with the ledger so far."""

    def __init__(self) -> None:
        self._run: PlanRun | None = None
        self._awaiting: set[str] = set()
        self._decisions: dict[str, ApprovalDecision] = {}

    @workflow.run
    async def run(self, request: PlanInput) -> dict[str, Any]:
        try:
            return await self._execute(self._check(request), request)
        except PlanRejected as exc:
            details = [str(p) for p in exc.problems]
            raise ApplicationError(
                str(exc), details, type="PlanRejected", non_retryable=True
            ) from None
        except (ApplicationError, asyncio.CancelledError):
            raise
        except Exception as exc:  # an engine bug must fail the plan, not the task forever
            raise ApplicationError(
                f"plan workflow error: {type(exc).__name__}: {exc}",
                type="PlanWorkflowError",
                non_retryable=True,
            ) from exc

    @workflow.query
    def progress(self) -> list[dict[str, Any]]:
        """The ledger so far: phase, attempts, durations, errors, approvals awaited."""
        if self._run is None:
            return []
        lines = []
        for line in self._run.progress():
            phase = "awaiting_approval" if line.id in self._awaiting else line.phase
            lines.append(
                {
                    "id": line.id,
                    "tool": line.tool,
                    "phase": phase,
                    "level": line.level,
                    "duration_ms": line.duration_ms,
                    "attempts": line.attempts,
                    "error": line.error,
                }
            )
        return lines

    @workflow.signal
    def approve_step(self, decision: ApprovalDecision) -> None:
        """Approve or reject a gated step (fire-and-forget; works from other workflows)."""
        self._decisions.setdefault(decision.step_id, decision)

    @workflow.update
    def decide_step(self, decision: ApprovalDecision) -> str:
        """Approve or reject a gated step and hear back that it was taken."""
        self._decisions[decision.step_id] = decision
        return "approved" if decision.approved else "rejected"

    @decide_step.validator
    def _validate_decision(self, decision: ApprovalDecision) -> None:
        if decision.step_id not in self._awaiting:
            waiting = ", ".join(sorted(self._awaiting)) or "none"
            raise ValueError(
                f"step '{decision.step_id}' is not awaiting approval (awaiting: {waiting})"
            )

    # -- internals ------------------------------------------------------------

    def _check(self, request: PlanInput) -> CheckedPlan:
        catalog = None
        if request.tools:
            catalog = ToolCatalog.from_schemas(
                {name: opts.get("input_schema") for name, opts in request.tools.items()}
            )
        return check_plan(request.plan, catalog=catalog, max_steps=request.max_steps, durable=True)

    async def _execute(self, checked: CheckedPlan, request: PlanInput) -> dict[str, Any]:
        run = self._run = PlanRun(checked)
        order = {sid: n for n, sid in enumerate(checked.steps)}
        tasks: dict[asyncio.Task[Outcome], StepCall] = {}

        def start(calls: list[StepCall]) -> None:
            for call in calls:
                tasks[asyncio.create_task(self._run_step(call, request))] = call

        try:
            start(run.next_calls())
            while tasks:
                done, _ = await workflow.wait(list(tasks), return_when=asyncio.FIRST_COMPLETED)
                for task in sorted(done, key=lambda t: order[tasks[t].step_id]):
                    call = tasks.pop(task)
                    ok, value, duration_ms, attempts = task.result()
                    if ok:
                        run.record_result(
                            call.step_id, value, duration_ms=duration_ms, attempts=attempts
                        )
                    else:
                        run.record_failure(
                            call.step_id, value, duration_ms=duration_ms, attempts=attempts
                        )
                start(run.next_calls())
        except asyncio.CancelledError:
            for task in tasks:
                task.cancel()
            raise
        result = run.result()
        payload = result.model_dump(mode="json")
        size = len(json.dumps(payload["returned"], separators=(",", ":")).encode())
        if size > request.max_returned_bytes:
            raise ApplicationError(
                f"the plan's returned results total {size // 1024} KiB, over the "
                f"{request.max_returned_bytes // 1024} KiB limit: list fewer steps in returns",
                type="ReturnedTooLarge",
                non_retryable=True,
            )
        return payload

    async def _run_step(self, call: StepCall, request: PlanInput) -> Outcome:
        options = request.tools.get(call.tool, {})
        if options.get("requires_approval"):
            rejected = await self._await_approval(call.step_id)
            if rejected is not None:
                return False, rejected, 0.0, 0
        args_size = len(json.dumps(call.args, separators=(",", ":")).encode())
        if args_size > request.max_result_bytes:
            message = (
                f"the arguments of step '{call.step_id}' are {args_size // 1024} KiB, over the "
                f"{request.max_result_bytes // 1024} KiB limit; bind smaller values"
            )
            return False, message, 0.0, 0
        timeout_s = call.timeout_s or float(options.get("timeout_s", 60.0))
        retries = call.retries if call.retries is not None else int(options.get("retries", 2))
        retry = RetryPolicy(
            initial_interval=timedelta(seconds=request.retry_initial_interval_s),
            backoff_coefficient=2.0,
            maximum_interval=timedelta(seconds=30),
            maximum_attempts=retries + 1,
        )
        heartbeat = options.get("heartbeat_timeout_s")
        summary = f"{call.step_id}: {call.tool}"
        raw_activity = options.get("kind") == "activity"
        params = options.get("params") or []
        arg: Any = StepRequest(call.step_id, call.args, request.max_result_bytes)
        args: list[Any] = [arg] if not raw_activity else [call.args.get(p) for p in params]
        common: dict[str, Any] = {
            "args": args,
            "start_to_close_timeout": timedelta(seconds=timeout_s),
            "retry_policy": retry,
            "activity_id": call.step_id,
            "summary": summary,
        }
        if not raw_activity:
            common["result_type"] = StepResponse
        try:
            if call.local or (options.get("local") and not raw_activity):
                handle = workflow.start_local_activity(call.tool, **common)
            else:
                handle = workflow.start_activity(
                    call.tool,
                    heartbeat_timeout=timedelta(seconds=heartbeat) if heartbeat else None,
                    task_queue=request.task_queue,
                    **common,
                )
            response = await handle
        except ActivityError as exc:
            return _failure(exc, timeout_s, retries + 1)
        if raw_activity:
            return True, response, 0.0, 1
        return True, response.result, response.duration_ms, response.attempt

    async def _await_approval(self, step_id: str) -> str | None:
        """Pause until a person decides; None means approved, else the rejection text."""
        self._awaiting.add(step_id)
        try:
            await workflow.wait_condition(lambda: step_id in self._decisions)
        finally:
            self._awaiting.discard(step_id)
        decision = self._decisions[step_id]
        if decision.approved:
            return None
        reason = f": {decision.reason}" if decision.reason else ""
        return f"rejected by a person{reason}"


def _failure(exc: ActivityError, timeout_s: float, max_attempts: int) -> Outcome:
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
            attempts = int(details.get("attempt", attempts))
            duration = float(details.get("duration_ms", 0.0))
        return False, cause.message, duration, attempts
    if isinstance(cause, TimeoutError):
        kind = cause.type.name.lower() if cause.type is not None else "timeout"
        return False, f"timed out after {timeout_s:g} s ({kind})", duration, attempts
    if isinstance(cause, CancelledError):
        return False, "cancelled", duration, attempts
    return False, str(cause or exc), duration, attempts
