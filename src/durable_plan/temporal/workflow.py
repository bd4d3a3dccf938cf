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
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    CancelledError,
    ChildWorkflowError,
    TimeoutError,
)

with workflow.unsafe.imports_passed_through():
    from durable_plan.agent_step import AGENT_TOOL, DEFAULT_MAX_ITERATIONS, resolve_tools
    from durable_plan.check import CheckedPlan, ToolCatalog, check_plan
    from durable_plan.control_steps import LOOPS
    from durable_plan.engine import PlanRun, StepCall
    from durable_plan.errors import PlanRejected, StepError
    from durable_plan.ids import child_workflow_id
    from durable_plan.items import ItemRun
    from durable_plan.options import ToolOptions
    from durable_plan.references import is_reference, iter_references
    from durable_plan.reuse import REMEMBERED_KEY, Recall, bounded, reusable_tools
    from durable_plan.temporal.agent_workflow import AGENT_STEP_WORKFLOW_NAME, AgentStepInput
    from durable_plan.temporal.approvals import ApprovalDesk
    from durable_plan.temporal.claim_check import drop_stored, read_returned
    from durable_plan.temporal.hook_relay import HookAsker
    from durable_plan.temporal.mcp_steps import call_mcp_tool
    from durable_plan.temporal.messages import (
        HOOK_REPLY_SIGNAL,
        ApprovalDecision,
        HookReply,
        PlanInput,
        StepRequest,
        StepResponse,
        failure_message,
    )
    from durable_plan.ui_summary import StepSummaries, agent_step_summary

PLAN_WORKFLOW_NAME = "PlanWorkflow"

OWNER_RULES_PATCH = "owner-rules"
"""Marks plans whose steps may only tighten the tool owner's rules (issue 9)."""

MAX_PENDING_ACTIVITIES = 1_000
MAX_HISTORY_EVENTS = 40_000

# (ok, result or error text, duration in ms, attempts)
Outcome = tuple[bool, Any, float, int]


@workflow.defn(name=PLAN_WORKFLOW_NAME, sandboxed=False)
class PlanWorkflow:
    """Runs one plan; ``progress`` answers with the ledger so far."""

    def __init__(self) -> None:
        self._run: PlanRun | None = None
        self._desk = ApprovalDesk(())
        self._owner_rules = True
        self._loops: dict[str, ItemRun] = {}
        self._task_bytes = _TaskBytes(0)
        self._hooks = HookAsker()
        self._server_events = 0  # activity resolutions seen: each came in a new workflow task
        self._summaries: StepSummaries | None = None  # the UI's activity summaries, built once
        self._recall: Recall | None = None  # the conversation's steps this plan may reuse
        self._stored_any = False  # a step's result went to the result store (claim check)

    @workflow.run
    async def run(self, request: PlanInput) -> dict[str, Any]:
        # Plans started before the owner's rules were enforced replay as they ran.
        self._owner_rules = workflow.patched(OWNER_RULES_PATCH)
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
        finally:
            # Whatever way the plan ends, what it stored goes (decided from history alone:
            # only plans that stored something run this activity).
            if self._stored_any and not request.keep_stored_results:
                await drop_stored(request.task_queue)

    @workflow.query
    def progress(self) -> list[dict[str, Any]]:
        """The ledger so far: phase, attempts, durations, errors; for a step awaiting
        approval, the bound arguments and their digest; refused decisions."""
        if self._run is None:
            return []
        lines = []
        for line in self._run.progress():
            awaiting = self._desk.is_awaiting(line.id)
            lines.append(
                {
                    "id": line.id,
                    "tool": line.tool,
                    "phase": "awaiting_approval" if awaiting else line.phase,
                    "level": line.level,
                    "duration_ms": line.duration_ms,
                    "attempts": line.attempts,
                    "error": line.error,
                    **self._desk.details(line.id),
                    **self._loop_details(line.id, line.phase),
                }
            )
        return lines

    def _loop_details(self, step_id: str, phase: str) -> dict[str, Any]:
        loop = self._loops.get(step_id)
        return {"items": loop.progress()} if loop is not None and phase == "running" else {}

    @workflow.signal
    def approve_step(self, decision: ApprovalDecision) -> None:
        """Approve or reject a step awaiting approval (fire-and-forget; works from other
        workflows). Refused, recorded in ``progress`` and ignored for any other step."""
        self._desk.offer(decision)

    @workflow.update
    def decide_step(self, decision: ApprovalDecision) -> str:
        """Approve or reject a step awaiting approval and hear back that it was taken."""
        self._desk.take(decision)
        return "approved" if decision.approved else "rejected"

    @decide_step.validator
    def _validate_decision(self, decision: ApprovalDecision) -> None:
        reason = self._desk.refusal(decision)
        if reason is not None:
            raise ValueError(reason)

    # -- internals ------------------------------------------------------------

    def _check(self, request: PlanInput) -> CheckedPlan:
        # An empty tool table means no tool may be planned, never "any tool".
        catalog = ToolCatalog.from_options(request.tools, owner_rules=self._owner_rules)
        catalog = replace(catalog, default_model=request.default_model)
        if request.memory is not None:
            self._recall = Recall.from_wire(request.memory, reusable_tools(request.tools))
        prior = self._recall.prior_ids if self._recall is not None else None
        return check_plan(
            request.plan,
            catalog=catalog,
            max_steps=request.max_steps,
            durable=True,
            prior=prior,
            inputs=request.inputs,
        )

    async def _execute(self, checked: CheckedPlan, request: PlanInput) -> dict[str, Any]:
        run = self._run = PlanRun(checked, recall=self._recall)
        self._summaries = StepSummaries(checked)
        self._desk = ApprovalDesk(checked.steps)
        order = {sid: n for n, sid in enumerate(checked.steps)}
        tasks: dict[asyncio.Task[Outcome], StepCall] = {}
        held: list[StepCall] = []  # handed out, waiting for room in a workflow task
        self._task_bytes = _TaskBytes(request.max_task_bytes)

        def start(calls: list[StepCall]) -> None:
            held.extend(calls)
            while held:
                call = held[0]
                size = _json_size(call.args)
                if size > request.max_result_bytes:
                    held.pop(0)
                    run.record_failure(call.step_id, _args_too_large(call, size, request))
                    continue
                if not self._task_bytes.room(size, self._server_events):
                    return  # the rest go out in a later workflow task
                if len(tasks) >= MAX_PENDING_ACTIVITIES:
                    return  # the server allows 2,000 pending activities per workflow
                # Every running step may still add a full result to history.
                growth = self._task_bytes.sent + size + (len(tasks) + 1) * request.max_result_bytes
                if _history_near_limit(growth, request.max_history_bytes):
                    if tasks:
                        return  # wait for running steps; their results count first
                    held.pop(0)
                    run.record_failure(call.step_id, _history_full_message())
                    continue
                held.pop(0)
                self._task_bytes.spend(size)
                tasks[asyncio.create_task(self._run_step(call, request))] = call

        pacer: asyncio.Task[None] | None = None
        try:
            start(run.next_calls())
            while tasks or held:
                waiting: list[asyncio.Task[Any]] = list(tasks)
                if held:
                    pacer = self._pacer(pacer)
                    waiting.append(pacer)
                done, _ = await workflow.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
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
        resolved: dict[str, Any] = {}
        if self._stored_any and request.return_stored == "value":
            # Values read back must not push the plan's result over its own limit.
            payload = run.result().model_dump(mode="json")
            resolved = await read_returned(
                payload["returned"],
                max_bytes=request.max_result_bytes,
                budget=request.max_returned_bytes - _json_size(payload) - 64 * 1024,
                task_queue=request.task_queue,
            )
        return _bounded_payload(run, request, resolved)

    def _pacer(self, pacer: asyncio.Task[None] | None) -> asyncio.Task[None]:
        """A 1 ms timer that opens the next workflow task when calls are held back."""
        if pacer is not None and not pacer.done():
            return pacer

        async def tick() -> None:
            await workflow.sleep(0.001)
            self._server_events += 1

        return asyncio.create_task(tick())

    async def _run_step(self, call: StepCall, request: PlanInput) -> Outcome:
        """One step: the agent's before-hooks, a person's approval if the tool is gated,
        the activity, the agent's after-hooks."""
        if call.tool == AGENT_TOOL:
            return await self._run_agent_step(call, request)
        if call.tool in LOOPS:
            return await self._run_items(call, request)
        hooked = request.hooks_workflow_id is not None
        if hooked:
            before = await self._ask_hooks(request, call, "before")
            if before.cancel is not None:
                return False, before.cancel, 0.0, 0
            call = replace(call, args=before.args)
        options = request.tools[call.tool]
        if options.requires_approval:
            rejected = await self._await_approval(call)
            if rejected is not None:
                return False, rejected, 0.0, 0
        ok, value, duration_ms, attempts = await self._run_activity(call, options, request)
        if hooked:
            after = await self._ask_hooks(request, call, "after", ok, value)
            ok, value = after.ok, after.value
        return ok, value, duration_ms, attempts

    async def _run_items(self, call: StepCall, request: PlanInput) -> Outcome:
        """A map or reduce: each item a step of its own (activity ``<step>[<i>]``)."""
        assert self._run is not None
        started = workflow.now()
        try:
            items = self._run.item_run(call)
        except StepError as exc:
            return False, str(exc), 0.0, 0
        self._loops[call.step_id] = items
        running: dict[asyncio.Task[Outcome], StepCall] = {}
        held: list[StepCall] = []

        def start() -> None:
            held.extend(items.next_calls())
            while held:
                item = held[0]
                size = _json_size(item.args)
                if size > request.max_result_bytes:
                    held.pop(0)
                    items.record(item, False, _args_too_large(item, size, request))
                    continue
                if not self._task_bytes.room(size, self._server_events):
                    return  # under the message limit: the rest in a later workflow task
                held.pop(0)
                self._task_bytes.spend(size)
                running[asyncio.create_task(self._run_step(item, request))] = item

        pacer: asyncio.Task[None] | None = None
        try:
            start()
            while running or held:
                waiting: list[asyncio.Task[Any]] = list(running)
                if held:
                    pacer = self._pacer(pacer)
                    waiting.append(pacer)
                done, _ = await workflow.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
                finished = sorted(
                    (t for t in done if t in running),
                    key=lambda t: _item_index(running[t].step_id),
                )
                for task in finished:
                    ok, value = task.result()[:2]
                    items.record(running.pop(task), ok, value)
                start()
        except asyncio.CancelledError:
            for task in running:
                task.cancel()
            raise
        finally:
            if pacer is not None:
                pacer.cancel()
        ok, value = items.result()
        return ok, value, _ms(started), 1

    async def _run_agent_step(self, call: StepCall, request: PlanInput) -> Outcome:
        """An agent step: its loop in a child workflow, so its conversation stays out of here."""
        args = call.args
        names = resolve_tools(args.get("tools"), list(request.tools))
        step_input = AgentStepInput(
            step_id=call.step_id,
            prompt=args["prompt"],
            output_schema=args["output_schema"],
            tools={name: request.tools[name] for name in names},
            max_iterations=int(args.get("max_iterations", DEFAULT_MAX_ITERATIONS)),
            model=args.get("model", request.default_model),
            system_prompt=args.get("system_prompt"),
            task_queue=request.task_queue,
            max_result_bytes=request.max_result_bytes,
            max_history_bytes=request.max_history_bytes,
            retry_initial_interval_s=request.retry_initial_interval_s,
            model_heartbeat_timeout_s=request.model_heartbeat_timeout_s,
            max_interruptions=request.max_interruptions,
            hooks_workflow_id=request.hooks_workflow_id,
        )
        started = workflow.now()
        me = workflow.info()
        try:
            result = await workflow.execute_child_workflow(
                AGENT_STEP_WORKFLOW_NAME,
                step_input,
                id=child_workflow_id(me.workflow_id, "agent", call.step_id),
                task_queue=request.task_queue or me.task_queue,
                result_type=dict,
                execution_timeout=timedelta(seconds=call.timeout_s) if call.timeout_s else None,
                static_summary=agent_step_summary(call.step_id, call.level, str(args["prompt"])),
            )
        except ChildWorkflowError as exc:
            return False, failure_message(exc), _ms(started), 1
        finally:
            self._server_events += 1
        return True, result, _ms(started), 1

    async def _run_activity(
        self, call: StepCall, options: ToolOptions, request: PlanInput
    ) -> Outcome:
        policy = _StepPolicy.of(
            call, options, owner_rules=self._owner_rules, interruptions=request.max_interruptions
        )
        unwrapped = options.kind in ("activity", "mcp")
        if unwrapped and self._stored_any and next(iter_references(call.args), None) is not None:
            return False, _unwrapped_reference_message(call), 0.0, 0
        try:
            try:
                if options.kind == "activity":
                    return await self._run_raw_activity(call, options, policy, request)
                if options.kind == "mcp":
                    return await self._run_mcp_call(call, options, policy, request)
                return await self._run_tool_activity(call, policy, request)
            finally:
                self._server_events += 1
        except ActivityError as exc:
            return _failure(exc, policy.timeout_s, policy.max_attempts)

    def _summary(self, call: StepCall) -> str | None:
        """What the UI shows next to the activity type (the tool): id, level, bindings."""
        return None if self._summaries is None else self._summaries.of(call.step_id)

    @workflow.signal(name=HOOK_REPLY_SIGNAL)
    def hook_reply(self, reply: HookReply) -> None:
        """The agent's tool hooks answered for one step (see ``HookRelay``)."""
        self._hooks.receive(reply)

    async def _ask_hooks(
        self, request: PlanInput, call: StepCall, phase: str, ok: bool = True, value: Any = None
    ) -> HookReply:
        assert request.hooks_workflow_id is not None
        try:
            return await self._hooks.ask(
                request.hooks_workflow_id, call.step_id, call.tool, phase, call.args, ok, value
            )
        finally:
            self._server_events += 1

    async def _run_tool_activity(
        self, call: StepCall, policy: _StepPolicy, request: PlanInput
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
        )
        common = policy.activity_options(call, request, self._summary(call))
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
                **policy.remote_options(request),
                **common,
            )
        response = StepResponse.from_wire(wire)
        result = response.result
        if store_over is not None and is_reference(result):
            self._stored_any = True
        return True, result, response.duration_ms, response.attempt

    async def _run_raw_activity(
        self, call: StepCall, options: ToolOptions, policy: _StepPolicy, request: PlanInput
    ) -> Outcome:
        """An existing activity, called as it is: positional arguments, its own result."""
        result = await workflow.execute_activity(
            call.tool,
            args=options.positional(call.args),
            **policy.remote_options(request),
            **policy.activity_options(call, request, self._summary(call)),
        )
        return True, result, 0.0, 1

    async def _run_mcp_call(
        self, call: StepCall, options: ToolOptions, policy: _StepPolicy, request: PlanInput
    ) -> Outcome:
        """An MCP tool: its server's call-tool activity (``temporal/mcp_steps.py``)."""
        started = workflow.now()
        ok, value, calls = await call_mcp_tool(
            options,
            call.args,
            {
                **policy.remote_options(request),
                **policy.activity_options(call, request, self._summary(call)),
            },
            retries=policy.retries,
            backoff_s=request.retry_initial_interval_s,
            max_result_bytes=request.max_result_bytes,
        )
        return ok, value, _ms(started), calls

    async def _await_approval(self, call: StepCall) -> str | None:
        """Pause until a person decides; None means approved, else the rejection text."""
        self._desk.open(call.step_id, call.args)
        try:
            await workflow.wait_condition(lambda: self._desk.decision(call.step_id) is not None)
        finally:
            self._desk.close(call.step_id)
        decision = self._desk.decision(call.step_id)
        assert decision is not None
        if decision.approved:
            return None
        reason = f": {decision.reason}" if decision.reason else ""
        return f"rejected by a person{reason}"


class _TaskBytes:
    """Bytes of arguments scheduled in the current workflow task (steps and map items).

    A workflow task's commands travel in one gRPC message (4 MiB at most), so
    starts are held back once ``limit`` is reached. A new workflow task begins
    whenever a server event (an activity or child result, a hook reply, the
    pacing timer) arrives, which ``events`` counts.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.sent = 0
        self._mark = -1

    def room(self, size: int, events: int) -> bool:
        if events != self._mark:
            self._mark, self.sent = events, 0
        return not self.sent or self.sent + size <= self.limit

    def spend(self, size: int) -> None:
        self.sent += size


@dataclass(frozen=True)
class _StepPolicy:
    """How one step's activity runs: the owner's rules, tightened by the step."""

    timeout_s: float
    retries: int
    heartbeat_timeout_s: float | None
    local: bool
    interruptions: int = 0
    """Extra attempts a lost worker may cut short (wrapped, regular activities only: the
    wrapper tells the tool's own failures from them)."""

    @classmethod
    def of(
        cls, call: StepCall, options: ToolOptions, *, owner_rules: bool, interruptions: int = 0
    ) -> _StepPolicy:
        timeout = call.timeout_s or options.timeout_s
        retries = options.retries if call.retries is None else call.retries
        local = options.local or call.local
        if owner_rules:
            # The checker already refused a step asking for more than the owner allows;
            # this keeps the rule even for input that skipped the checker.
            timeout = min(timeout, options.timeout_s)
            retries = min(retries, options.retries)
            local = options.local or (call.local and options.may_run_local)
        heartbeat = options.heartbeat_timeout_s
        local = local and options.kind != "activity"
        spare = interruptions if owner_rules and not local and options.kind != "activity" else 0
        return cls(timeout, retries, heartbeat, local, spare)

    @property
    def max_attempts(self) -> int:
        return self.retries + 1 + self.interruptions

    def activity_options(
        self, call: StepCall, request: PlanInput, summary: str | None = None
    ) -> dict[str, Any]:
        return {
            "start_to_close_timeout": timedelta(seconds=self.timeout_s),
            "retry_policy": RetryPolicy(
                initial_interval=timedelta(seconds=request.retry_initial_interval_s),
                backoff_coefficient=2.0,
                maximum_interval=timedelta(seconds=30),
                maximum_attempts=self.max_attempts,
            ),
            "activity_id": call.step_id,
            "summary": summary or call.step_id,
        }

    def remote_options(self, request: PlanInput) -> dict[str, Any]:
        heartbeat = self.heartbeat_timeout_s
        return {
            "heartbeat_timeout": timedelta(seconds=heartbeat) if heartbeat else None,
            "task_queue": request.task_queue,
        }


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


def _item_index(step_id: str) -> int:
    return int(step_id.rsplit("[", 1)[1].rstrip("]"))


def _ms(started: datetime) -> float:
    return float((workflow.now() - started).total_seconds() * 1000.0)


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


def _unwrapped_reference_message(call: StepCall) -> str:
    """Existing activities and MCP tools run without the wrapper that reads stored results."""
    return (
        f"step '{call.step_id}': tool '{call.tool}' (a Temporal activity called as it is, or "
        "an MCP tool) cannot read a result stored by reference; bind a smaller value, or "
        "call it from a tool registered as a function (ToolRegistry.add), whose wrapper "
        "reads the value"
    )


def _bounded_payload(
    run: PlanRun, request: PlanInput, resolved: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The workflow's result, refused with a clear message if it would not fit.

    Error texts are already cut (``MAX_ERROR_CHARS``) and each result is bounded,
    so only ``returned`` can make the whole payload too large: the fix is to
    return fewer steps. Checked here because a completion over the server's
    payload limit fails on every attempt and the workflow never ends.
    """
    payload = run.result().model_dump(mode="json")
    if resolved:
        payload["returned"].update(resolved)  # stored results read back for the model
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
    if run.recall is not None:
        # What this plan ran ok, for the conversation's memory: only what fits, never a
        # reason for the plan to fail.
        room = min(run.recall.max_bytes, request.max_returned_bytes - total - 1024)
        payload[REMEMBERED_KEY] = [entry.to_wire() for entry in bounded(run.remembered(), room)]
    return payload
