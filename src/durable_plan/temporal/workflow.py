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

MAX_PENDING_ACTIVITIES = 1_000
MAX_HISTORY_EVENTS = 40_000

# (ok, result or error text, duration in ms, attempts)
Outcome = tuple[bool, Any, float, int]


@workflow.defn(name=PLAN_WORKFLOW_NAME, sandboxed=False)
class PlanWorkflow:
    """Runs one plan; ``progress`` answers with the ledger so far."""

    def __init__(self) -> None:
        self._run: PlanRun | None = None
        self._awaiting: set[str] = set()
        self._decisions: dict[str, ApprovalDecision] = {}
        self._server_events = 0  # activity resolutions seen: each came in a new workflow task

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
        held: list[StepCall] = []  # handed out, waiting for room in a workflow task
        sent = 0  # bytes of arguments scheduled in the current workflow task

        def start(calls: list[StepCall]) -> None:
            nonlocal sent
            held.extend(calls)
            while held:
                call = held[0]
                size = _json_size(call.args)
                if size > request.max_result_bytes:
                    held.pop(0)
                    run.record_failure(call.step_id, _args_too_large(call, size, request))
                    continue
                if sent and sent + size > request.max_task_bytes:
                    return  # the rest go out in a later workflow task
                if len(tasks) >= MAX_PENDING_ACTIVITIES:
                    return  # the server allows 2,000 pending activities per workflow
                # Every running step may still add a full result to history.
                growth = sent + size + (len(tasks) + 1) * request.max_result_bytes
                if _history_near_limit(growth, request.max_history_bytes):
                    if tasks:
                        return  # wait for running steps; their results count first
                    held.pop(0)
                    run.record_failure(call.step_id, _history_full_message())
                    continue
                held.pop(0)
                sent += size
                tasks[asyncio.create_task(self._run_step(call, request))] = call

        pacer: asyncio.Task[None] | None = None
        try:
            start(run.next_calls())
            while tasks or held:
                waiting: list[asyncio.Task[Any]] = list(tasks)
                if held:
                    # Nothing else may end soon: a 1 ms timer opens the next workflow task.
                    if pacer is None or pacer.done():
                        pacer = asyncio.create_task(workflow.sleep(0.001))
                    waiting.append(pacer)
                events = self._server_events
                done, _ = await workflow.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
                if self._server_events != events or any(t not in tasks for t in done):
                    sent = 0  # a server event arrived: this is a new workflow task
                for task in sorted(
                    (t for t in done if t in tasks), key=lambda t: order[tasks[t].step_id]
                ):
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
                held[:] = run.still_to_start(held)
                start(run.next_calls())
        except asyncio.CancelledError:
            for task in tasks:
                task.cancel()
            raise
        finally:
            if pacer is not None:
                pacer.cancel()
        return _bounded_payload(run, request)

    async def _run_step(self, call: StepCall, request: PlanInput) -> Outcome:
        options = request.tools.get(call.tool, {})
        if options.get("requires_approval"):
            rejected = await self._await_approval(call.step_id)
            if rejected is not None:
                return False, rejected, 0.0, 0
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
        arg: Any = StepRequest(call.step_id, call.args, request.max_result_bytes)
        args: list[Any] = [arg] if not raw_activity else _positional(call.args, options)
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
            try:
                response = await handle
            finally:
                self._server_events += 1
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
            # The wrapper's details; a tool's own ApplicationError may carry anything.
            attempts = _number(details.get("attempt"), int, attempts)
            duration = _number(details.get("duration_ms"), float, 0.0)
        return False, cause.message, duration, attempts
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


def _json_size(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":")).encode())


def _args_too_large(call: StepCall, size: int, request: PlanInput) -> str:
    return (
        f"the arguments of step '{call.step_id}' are {size // 1024} KiB, over the "
        f"{request.max_result_bytes // 1024} KiB limit; bind smaller values"
    )


def _history_near_limit(growth: int, max_bytes: int) -> bool:
    info = workflow.info()
    return (
        info.get_current_history_size() + growth > max_bytes
        or info.get_current_history_length() > MAX_HISTORY_EVENTS
    )


def _history_full_message() -> str:
    info = workflow.info()
    return (
        f"not started: the plan's history is {info.get_current_history_size() // (1024 * 1024)} "
        f"MiB in {info.get_current_history_length()} events, near Temporal's limit per "
        "workflow (50 MiB, 51,200 events); split the work into several plans or return "
        "smaller results"
    )


def _positional(args: dict[str, Any], options: dict[str, Any]) -> list[Any]:
    """An existing activity's arguments in signature order, with its own defaults.

    Omitted trailing parameters are left out, so the function's defaults apply;
    an omitted parameter before a given one gets its (JSON) default from the
    registry, never ``None``.
    """
    params: list[str] = options.get("params") or []
    defaults: dict[str, Any] = options.get("defaults") or {}
    given = [n for n, p in enumerate(params) if p in args]
    last = given[-1] if given else -1
    return [args[p] if p in args else defaults.get(p) for p in params[: last + 1]]


def _bounded_payload(run: PlanRun, request: PlanInput) -> dict[str, Any]:
    """The workflow's result, refused with a clear message if it would not fit.

    Error texts are already cut (``MAX_ERROR_CHARS``) and each result is bounded,
    so only ``returned`` can make the whole payload too large: the fix is to
    return fewer steps. Checked here because a completion over the server's
    payload limit fails on every attempt and the workflow never ends.
    """
    payload = run.result().model_dump(mode="json")
    returned = _json_size(payload["returned"])
    total = _json_size(payload)
    if total > request.max_returned_bytes:
        raise ApplicationError(
            f"the plan's result is {total // 1024} KiB ({returned // 1024} KiB of returned "
            f"results), over the {request.max_returned_bytes // 1024} KiB limit: list fewer "
            "steps in returns",
            type="ReturnedTooLarge",
            non_retryable=True,
        )
    return payload
