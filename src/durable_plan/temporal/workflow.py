"""``PlanWorkflow``: a checked plan run durably, one activity per step.

The workflow stays small because the logic does not live here: ``PlanRun``
(the same object the in-process runner drives) decides what runs next and
evaluates bindings; ``Admission`` decides when a call may go out; this class
starts a coroutine per call, waits for the first to finish and reports back.
Every call a plan makes (a step, a map or reduce item, an agent step's child)
passes the same stages in ``_run_call``: the agent's hooks before, a person's
approval, admission, the call under its ``CallPolicy``, the hooks after. Every
path ends the workflow (a result, a failed step, a failed plan, or a
cancellation), never a workflow task retried forever.

The workflow runs outside the sandbox (``sandboxed=False``). Its code is
deterministic by construction (``PlanRun`` does no I/O, reads no clock, and
JSONata's clock/random functions are refused), the replay tests and a
``max_cached_workflows=0`` test guard that, and the sandbox would cost a
re-import of jsonata and pydantic per run plus several milliseconds per step
(measured in ``bench/durable.py``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from temporalio import workflow
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    CancelledError,
    ChildWorkflowError,
    TimeoutError,
)

with workflow.unsafe.imports_passed_through():
    from durable_plan.check import CheckedPlan, ToolCatalog, check_plan
    from durable_plan.language.agent_step import AGENT_TOOL, DEFAULT_MAX_ITERATIONS, resolve_tools
    from durable_plan.language.control_steps import LOOPS
    from durable_plan.language.errors import PlanRejected, StepError
    from durable_plan.language.options import ToolOptions
    from durable_plan.run.calls import StepCall
    from durable_plan.run.engine import PlanRun
    from durable_plan.run.references import is_reference, iter_references, returned_preview
    from durable_plan.run.reuse import REMEMBERED_KEY, Recall, bounded, reusable_tools
    from durable_plan.temporal.admission import Admission, Wanted, json_size
    from durable_plan.temporal.agent_workflow import AGENT_STEP_WORKFLOW_NAME, AgentStepInput
    from durable_plan.temporal.approvals import ApprovalDesk, ApprovalHandlers, await_decision
    from durable_plan.temporal.claim_check import drop_stored, read_returned
    from durable_plan.temporal.hook_relay import HookAsker, HookRoute, hooked_tools
    from durable_plan.temporal.ids import child_workflow_id
    from durable_plan.temporal.mcp_steps import call_mcp_tool
    from durable_plan.temporal.messages import (
        HOOK_REPLY_SIGNAL,
        PLAN_WORKFLOW_NAME,
        PlanInput,
        StepRequest,
        StepResponse,
        failure_message,
    )
    from durable_plan.temporal.policy import CallPolicy
    from durable_plan.temporal.recovery import Salvage, salvage_to_wire
    from durable_plan.temporal.ui_summary import StepSummaries, agent_step_summary


OWNER_RULES_PATCH = "owner-rules"
"""Marks plans whose steps may only tighten the tool owner's rules (issue 9)."""
STORE_PER_RUN_PATCH = "store-per-run"
"""Marks plans whose stored results are keyed by their run's chain, not the workflow id."""

# (ok, result or error text, duration in ms, attempts); None: withdrawn before it started
Outcome = tuple[bool, Any, float, int]


@workflow.defn(name=PLAN_WORKFLOW_NAME, sandboxed=False)
class PlanWorkflow(ApprovalHandlers):
    """Runs one plan; ``progress`` answers with the ledger so far."""

    def __init__(self) -> None:
        self._run: PlanRun | None = None
        self.desk = ApprovalDesk(())
        self._owner_rules = True
        self._loops: dict[str, Any] = {}
        self._admission: Admission | None = None
        self._hooks: HookAsker | None = None
        self._summaries: StepSummaries | None = None  # the UI's activity summaries, built once
        self._recall: Recall | None = None  # the conversation's steps this plan may reuse
        self._stored_any = False  # a step's result went to the result store (claim check)
        self._chain: str | bool | None = False  # False: not decided yet (``_store_chain``)

    @workflow.run
    async def run(self, raw: Any) -> dict[str, Any]:
        # Plans started before the owner's rules were enforced replay as they ran.
        self._owner_rules = workflow.patched(OWNER_RULES_PATCH)
        request: PlanInput | None = None
        try:
            request = PlanInput.from_wire(raw)
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
                self._partial(),
                type="PlanWorkflowError",
                non_retryable=True,
            ) from exc
        finally:
            # Whatever way the plan ends, what it stored goes (decided from history alone:
            # only plans that stored something run this activity).
            if request is not None and self._stored_any and not request.keep_stored_results:
                await drop_stored(request.task_queue, self._store_chain())

    @workflow.query
    def progress(self) -> list[dict[str, Any]]:
        """The ledger so far: phase, attempts, durations, errors; for a step awaiting
        approval, the bound arguments and their digest; refused decisions."""
        if self._run is None:
            return []
        lines = []
        for line in self._run.progress():
            awaiting = self.desk.is_awaiting(line.id)
            lines.append(
                {
                    "id": line.id,
                    "tool": line.tool,
                    "phase": "awaiting_approval" if awaiting else line.phase,
                    "level": line.level,
                    "duration_ms": line.duration_ms,
                    "attempts": line.attempts,
                    "error": line.error,
                    **self.desk.details(line.id),
                    **self._loop_details(line.id, line.phase),
                }
            )
        return lines

    def _loop_details(self, step_id: str, phase: str) -> dict[str, Any]:
        loop = self._loops.get(step_id)
        return {"items": loop.progress()} if loop is not None and phase == "running" else {}

    @workflow.signal(name=HOOK_REPLY_SIGNAL)
    def hook_reply(self, reply: Any) -> None:
        """The agent's tool hooks answered for one call (see ``hook_relay``)."""
        if self._hooks is not None:
            self._hooks.receive(reply)

    # -- internals ------------------------------------------------------------

    def _check(self, request: PlanInput) -> CheckedPlan:
        # An empty tool table means no tool may be planned, never "any tool".
        catalog = ToolCatalog.from_options(request.tools, owner_rules=self._owner_rules)
        catalog = replace(
            catalog, default_model=request.default_model, models=request.allowed_models
        )
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
        self.desk = ApprovalDesk(checked.steps)
        route = _hook_route(request)
        self._admission = Admission(
            max_task_bytes=request.max_task_bytes,
            max_history_bytes=request.max_history_bytes,
            max_result_bytes=request.max_result_bytes,
            results_travel=2 if route is not None else 1,
        )
        self._hooks = HookAsker(route, self._admission)
        order = {sid: n for n, sid in enumerate(checked.steps)}

        def wanted(call: StepCall) -> Wanted:
            return Wanted(lambda: bool(run.still_to_start([call])))

        await _drive(
            run.next_calls,
            lambda call: self._run_call(call, request, wanted(call)),
            lambda call: order[call.step_id],
            lambda call, outcome: _record(run, call, outcome),
        )
        resolved: dict[str, Any] = {}
        if self._stored_any and request.return_stored == "value":
            # Values read back must not push the plan's result over its own limit.
            payload = run.result().model_dump(mode="json")
            resolved = await read_returned(
                payload["returned"],
                max_bytes=request.max_result_bytes,
                budget=request.max_returned_bytes - json_size(payload) - 64 * 1024,
                task_queue=request.task_queue,
                chain=self._store_chain(),
            )
        return _bounded_payload(run, request, resolved)

    def _store_chain(self) -> str | None:
        """The key scope of this run's stored results: its chain's first run id (plans
        recorded before it: None, the workflow id alone). Decided once, on first use."""
        if self._chain is False:
            patched = workflow.patched(STORE_PER_RUN_PATCH)
            self._chain = workflow.info().first_execution_run_id if patched else None
        return self._chain if isinstance(self._chain, str) else None

    def _partial(self) -> dict[str, Any]:
        """The ledger so far, for the details of a failure of the plan as a whole: the model
        still learns which steps ran (and the conversation remembers them)."""
        run = self._run
        if run is None:
            return {}
        try:
            ledger = [
                {
                    "id": line.id,
                    "tool": line.tool,
                    "status": line.phase,
                    "level": line.level,
                    "error": line.error,
                }
                for line in run.progress()
            ]
            learned = []
            if run.recall is not None:
                learned = bounded(run.remembered(), run.recall.max_bytes)
            return salvage_to_wire(Salvage(ledger, learned))
        except Exception:  # a broken engine must still end the plan
            return {}

    async def _run_call(self, call: StepCall, request: PlanInput, wanted: Wanted) -> Outcome | None:
        """One call of the plan, whatever its kind; None when it was withdrawn (the plan
        stopped before it started; the scheduler or the item run recorded why)."""
        if call.tool == AGENT_TOOL:
            return await self._run_agent_step(call, request, wanted)
        if call.tool in LOOPS:
            return await self._run_items(call, request, wanted)
        return await self._run_tool(call, request, wanted)

    async def _run_tool(self, call: StepCall, request: PlanInput, wanted: Wanted) -> Outcome | None:
        """The agent's before-hooks, a person's approval if the tool is gated, admission,
        the activity, the agent's after-hooks."""
        assert self._hooks is not None and self._admission is not None
        size = json_size(call.args)
        if size > request.max_result_bytes:
            return False, _args_too_large(call, size, request), 0.0, 0
        options = request.tools[call.tool]
        hooked = self._hooks.covers(call.tool)
        if hooked:
            if not wanted():
                return None
            before = await self._hooks.before(call.step_id, call.tool, call.args)
            if before.cancel is not None:
                return False, before.cancel, 0.0, 0
            call = replace(call, args=before.args)
        if options.requires_approval:
            if not wanted():
                return None
            rejected = await await_decision(self.desk, call.step_id, call.args)
            if rejected is not None:
                return False, rejected, 0.0, 0
        verdict = await self._admission.enter(json_size(call.args), wanted=wanted)
        if verdict == "withdrawn":
            return None
        if verdict == "full":
            return False, self._admission.history_full_message(), 0.0, 0
        try:
            ok, value, duration_ms, attempts = await self._run_activity(call, options, request)
        finally:
            self._admission.leave()
        if hooked:
            after = await self._hooks.after(call.step_id, call.tool, ok, value, call.args)
            ok, value = after.ok, after.value
        return ok, value, duration_ms, attempts

    async def _run_items(
        self, call: StepCall, request: PlanInput, wanted: Wanted
    ) -> Outcome | None:
        """A map or reduce: each item a call of its own (activity ``<step>[<i>]``), through
        the same stages and the same admission as the plan's steps."""
        assert self._run is not None
        started = workflow.now()
        try:
            items = self._run.item_run(call)
        except StepError as exc:
            return False, str(exc), 0.0, 0
        if not wanted():
            return None
        self._loops[call.step_id] = items

        def item_wanted(item: StepCall) -> Wanted:
            return Wanted(lambda: items.withdraw(item))

        await _drive(
            items.next_calls,
            lambda item: self._run_call(item, request, item_wanted(item)),
            lambda item: _item_index(item.step_id),
            lambda item, outcome: items.record(item, outcome[0], outcome[1]),
        )
        ok, value = items.result()
        return ok, value, _ms(started), 1

    async def _run_agent_step(
        self, call: StepCall, request: PlanInput, wanted: Wanted
    ) -> Outcome | None:
        """An agent step: its loop in a child workflow, so its conversation stays out of here."""
        assert self._hooks is not None and self._admission is not None
        args = call.args
        names = resolve_tools(args.get("tools"), list(request.tools))
        route = self._hooks.route
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
            hook_key=route.key if route is not None else None,
            hook_bytes=_room_left(route, self._hooks),
            hooked_tools=list(route.tools) if route is not None else None,
            max_task_bytes=request.max_task_bytes,
        )
        verdict = await self._admission.enter(json_size(step_input.to_wire()), wanted=wanted)
        if verdict == "withdrawn":
            return None
        if verdict == "full":
            return False, self._admission.history_full_message(), 0.0, 0
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
            self._admission.leave()
        return True, result, _ms(started), 1

    async def _run_activity(
        self, call: StepCall, options: ToolOptions, request: PlanInput
    ) -> Outcome:
        policy = CallPolicy.of(
            options,
            timeout_s=call.timeout_s,
            retries=call.retries,
            local=call.local,
            owner_rules=self._owner_rules,
            interruptions=request.max_interruptions,
        )
        unwrapped = options.kind in ("activity", "mcp")
        if unwrapped and self._stored_any and next(iter_references(call.args), None) is not None:
            return False, _unwrapped_reference_message(call), 0.0, 0
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
            return _failure(exc, policy.timeout_s, policy.max_attempts)

    def _summary(self, call: StepCall) -> str:
        """What the UI shows next to the activity type (the tool): id, level, bindings."""
        summary = None if self._summaries is None else self._summaries.of(call.step_id)
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
            self._store_chain() if store_over is not None else None,
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
        if policy.local and self._admission is not None:
            # A local result travels in this workflow task's completion (its marker).
            self._admission.spend(len(response.result_json))
        result = response.result
        if store_over is not None and is_reference(result):
            self._stored_any = True
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
        return ok, value, _ms(started), calls


async def _drive(
    next_calls: Callable[[], list[StepCall]],
    run_call: Callable[[StepCall], Coroutine[Any, Any, Outcome | None]],
    rank: Callable[[StepCall], int],
    record: Callable[[StepCall, Outcome], None],
) -> None:
    """Start every call handed out, take each outcome back in a fixed order, repeat.

    The one loop of the workflow, for a plan's steps and for a map's or reduce's items:
    outcomes of one workflow task are recorded in plan (item) order, so every worker
    decides the same (which failure stops a ``fail_fast`` plan, say).
    """
    tasks: dict[asyncio.Task[Outcome | None], StepCall] = {}

    def start(calls: list[StepCall]) -> None:
        for call in calls:
            tasks[asyncio.create_task(run_call(call))] = call

    try:
        start(next_calls())
        while tasks:
            done, _ = await workflow.wait(list(tasks), return_when=asyncio.FIRST_COMPLETED)
            for task in sorted(done, key=lambda t: rank(tasks[t])):
                call = tasks.pop(task)
                outcome = task.result()
                if outcome is not None:  # None: withdrawn, already recorded as skipped
                    record(call, outcome)
            start(next_calls())
    except asyncio.CancelledError:
        for task in tasks:
            task.cancel()
        raise


def _record(run: PlanRun, call: StepCall, outcome: Outcome) -> None:
    ok, value, duration_ms, attempts = outcome
    if ok:
        run.record_result(call.step_id, value, duration_ms=duration_ms, attempts=attempts)
    else:
        run.record_failure(call.step_id, value, duration_ms=duration_ms, attempts=attempts)


def _hook_route(request: PlanInput) -> HookRoute | None:
    if request.hooks_workflow_id is None:
        return None
    return HookRoute(
        agent_workflow_id=request.hooks_workflow_id,
        key=request.hook_key,  # None: a 0.1.0 conversation's plan (legacy_relay)
        tools=hooked_tools(request.hooked_tools),
        budget=request.hook_bytes,
    )


def _room_left(route: HookRoute | None, hooks: HookAsker) -> int | None:
    if route is None or route.budget is None:
        return None
    return max(route.budget - hooks.sent_bytes, 0)


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


def _args_too_large(call: StepCall, size: int, request: PlanInput) -> str:
    return (
        f"the arguments of step '{call.step_id}' are {size // 1024} KiB, over the "
        f"{request.max_result_bytes // 1024} KiB limit; bind smaller values"
    )


def _item_index(step_id: str) -> int:
    return int(step_id.rsplit("[", 1)[1].rstrip("]"))


def _ms(started: datetime) -> float:
    return float((workflow.now() - started).total_seconds() * 1000.0)


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
    """The workflow's result, always within ``max_returned_bytes``.

    Error texts are already cut (``MAX_ERROR_CHARS``) and each result is bounded,
    so only ``returned`` can make the whole payload too large. The plan did its
    work, so it never fails for that: returned results are kept in ``returns``
    order while they fit, and each of the rest is replaced by a preview naming its
    size (the ledger and the conversation's memory keep the facts; the plan is then
    not ``final``, since its answer is incomplete).
    """
    payload = run.result().model_dump(mode="json")
    if resolved:
        payload["returned"].update(resolved)  # stored results read back for the model
    returned: dict[str, Any] = payload["returned"]
    room = request.max_returned_bytes - json_size({**payload, "returned": {}}) - 4096
    kept: dict[str, Any] = {}
    previewed = 0
    for sid, value in returned.items():
        size = json_size(value)
        if size + len(sid) + 8 <= room:
            kept[sid] = value
            room -= size + len(sid) + 8
        else:
            kept[sid] = returned_preview(value, size)
            room -= json_size(kept[sid]) + len(sid) + 8
            previewed += 1
    payload["returned"] = kept
    if previewed and payload["final"]:
        payload["final"] = False
        payload["inference_passes_saved"] = max(payload["inference_passes_saved"] - 1, 0)
    total = json_size(payload)
    if run.recall is not None:
        # What this plan ran ok, for the conversation's memory: only what fits, never a
        # reason for the plan to fail.
        space = min(run.recall.max_bytes, request.max_returned_bytes - total - 1024)
        payload[REMEMBERED_KEY] = [entry.to_wire() for entry in bounded(run.remembered(), space)]
    return payload
