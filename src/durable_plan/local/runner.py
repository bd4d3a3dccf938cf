"""The in-process runner: ``execute_plan(plan, invoker)`` with asyncio.

Used by a plain Strands ``Agent`` and by fast tests. Truly concurrent: every
ready step starts at once (up to ``max_parallel``), so wall clock tracks the
critical path. Cancelling ``execute_plan`` cancels the steps still running.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, replace
from typing import Any

from durable_plan.check import CheckedPlan, ToolCatalog, ToolSpec, check_plan
from durable_plan.language.control_steps import LOOPS
from durable_plan.language.errors import PlanRejected, StepError, describe_exception
from durable_plan.language.plan import DEFAULT_MAX_STEPS, Plan, PlanResult
from durable_plan.local.pauses import Gate, current_gate, make_gate, reset_gate, set_gate
from durable_plan.local.saved_plans import enter_caller, leave_caller
from durable_plan.run.breakpoints import OnPause, PlanAborted, Skipped
from durable_plan.run.calls import Invoker, StepCall
from durable_plan.run.engine import PlanRun
from durable_plan.run.events import SILENT, Emitter, EventSink, step_context
from durable_plan.run.reuse import Recall
from durable_plan.run.telemetry_sink import telemetry_sink
from durable_plan.tools.deadline import within
from durable_plan.tools.registry import ToolRegistry


async def execute_plan(
    plan: Plan | Mapping[str, Any] | str,
    invoker: Invoker | ToolRegistry,
    *,
    catalog: ToolCatalog | Iterable[ToolSpec | str] | None = None,
    max_steps: int = DEFAULT_MAX_STEPS,
    tool_timeouts: Mapping[str, float] | None = None,
    default_timeout_s: float | None = None,
    models: Mapping[str, Any] | None = None,
    model: Any = None,
    on_event: EventSink | None = None,
    plan_id: str | None = None,
    breakpoints: Iterable[str] | None = None,
    on_pause: OnPause | None = None,
) -> PlanResult:
    """Check ``plan`` completely, then run it with ``invoker(tool_name, args)``.

    Raises ``PlanRejected`` (listing every problem) before any tool runs if the
    plan is bad. Tool failures, timeouts and bad bindings are step failures in
    the returned ledger, never exceptions. Given a ``ToolRegistry``, its tools'
    input schemas and timeouts apply unless ``catalog`` / ``tool_timeouts`` say
    otherwise, and agent steps can run: ``models`` maps the names a step may
    give in ``model`` to Strands models (or factories), ``model`` is the default.
    ``on_event`` receives the plan's events as they happen (``run/events.py``; an
    ``EventQueue`` is one you can iterate), marked with ``plan_id``.
    ``breakpoints``: step path patterns a call pauses at (``run/breakpoints.py``), each
    answered by ``on_pause`` (an async callback, or a ``Pauses`` handle); an abort raises
    ``PlanAborted`` with the ledger so far.
    """
    gate = make_gate(breakpoints, on_pause)  # a bad pattern is refused before anything runs
    if isinstance(invoker, ToolRegistry):
        from durable_plan.local.agents import agent_steps

        registry = invoker
        if catalog is None:
            catalog = registry.catalog()
            if model is not None:
                catalog = replace(catalog, default_model="the default model")
            if models:  # a step may name these, and no other model
                catalog = replace(catalog, models=list(models))
        tool_timeouts = tool_timeouts if tool_timeouts is not None else registry.timeouts()
        plannable = catalog.plannable if isinstance(catalog, ToolCatalog) else registry.names
        invoker = agent_steps(
            registry.invoke, registry, plannable, models=models, default_model=model
        )
    try:
        checked = check_plan(plan, catalog=catalog, max_steps=max_steps)
    except PlanRejected as exc:
        local_events(on_event, plan_id).emit("plan_finished", status="rejected", error=str(exc))
        raise
    return await run_checked(
        checked,
        invoker,
        tool_timeouts=tool_timeouts,
        default_timeout_s=default_timeout_s,
        on_event=on_event,
        plan_id=plan_id,
        gate=gate,
    )


async def run_checked(
    checked: CheckedPlan,
    invoker: Invoker,
    *,
    tool_timeouts: Mapping[str, float] | None = None,
    default_timeout_s: float | None = None,
    recall: Recall | None = None,
    on_start: Callable[[PlanRun], None] | None = None,  # sees the run (a live progress view)
    on_event: EventSink | None = None,
    plan_id: str | None = None,
    gate: Gate | None = None,
    path_prefix: str = "",
) -> PlanResult:
    """Run an already-checked plan; see ``execute_plan``.

    ``recall``: earlier plans' steps this one may reuse or read as ``prior``; once the
    plan ends, ``recall.learned`` holds the steps it ran ok (``reuse.py``).
    """
    run = PlanRun(checked, recall=recall, events=local_events(on_event, plan_id))
    run.events.path_prefix = path_prefix
    # A nested run (a saved plan's, at ``path_prefix``) pauses as its caller does.
    if gate is not None:
        gate = replace(gate, events=run.events)  # the top-level run's: it announces pauses
        me = asyncio.current_task()
        if gate.runner is not None and me is not None:
            gate.runner.append(me)  # an abort cancels this run as a whole
    else:
        gate = current_gate()
        gate = gate.under(path_prefix) if gate is not None else None
    gate_token = set_gate(gate)
    caller_token = enter_caller(run)  # its saved-plan calls reuse and learn through it
    if on_start is not None:
        on_start(run)
    timeouts = dict(tool_timeouts or {})
    tasks: dict[asyncio.Task[tuple[bool, Any, float]], StepCall] = {}

    def timeout_of(call: StepCall) -> float | None:
        return call.timeout_s or timeouts.get(call.tool) or default_timeout_s

    def start(calls: list[StepCall]) -> None:
        for call in calls:
            work = (
                _run_items(run, call, invoker, timeout_of, gate)
                if call.tool in LOOPS
                else _gated(gate, call, scope_of(run, call, gate), invoker, timeout_of(call))
            )
            context = step_context(run.events, call.step_id)
            tasks[asyncio.create_task(work, name=call.step_id, context=context)] = call

    try:
        start(run.next_calls())
        while tasks:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for task in sorted(done, key=lambda t: run.rank(tasks[t])):
                call = tasks.pop(task)
                ok, value, duration_ms = task.result()
                if ok:
                    run.record_result(call.step_id, value, duration_ms=duration_ms)
                else:
                    run.record_failure(call.step_id, value, duration_ms=duration_ms)
            start(run.next_calls())
    except BaseException as exc:
        cancelled = isinstance(exc, asyncio.CancelledError)
        aborted = gate.aborted if gate is not None and gate.aborted else None
        run.abandon(
            "cancelled" if cancelled else "failed",
            f"aborted at breakpoint {aborted[0]}"
            if aborted
            else "the plan was cancelled"
            if cancelled
            else describe_exception(exc),
        )
        if aborted and cancelled:
            me = asyncio.current_task()
            if me is not None and gate is not None and me in (gate.runner or ()):
                me.uncancel()  # the abort's own cancel: it ends as PlanAborted instead
            ledger = [asdict(line) for line in run.progress()]
            raise PlanAborted(aborted[0], ledger) from None
        raise
    finally:
        reset_gate(gate_token)
        leave_caller(caller_token)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
    if recall is not None:
        recall.learned = run.remembered()
    return run.finish()


def local_events(on_event: EventSink | None, plan_id: str | None) -> Emitter:
    """The in-process run's emitter: the caller's sink, and spans and metrics when an
    OpenTelemetry tracer or meter provider is set (``run/telemetry_sink.py``)."""
    sinks: list[EventSink] = [on_event] if on_event is not None else []
    telemetry = telemetry_sink()
    if telemetry is not None:
        sinks.append(telemetry)
    if not sinks:
        return SILENT
    return Emitter(plan_id or f"local-{uuid.uuid4().hex[:12]}", time.time, sinks)


async def _run_items(
    run: PlanRun,
    call: StepCall,
    invoker: Invoker,
    timeout_of: Callable[[StepCall], float | None],
    gate: Gate | None = None,
) -> tuple[bool, Any, float]:
    """A map or reduce step: its items through the same invoker, within its cap."""
    started = time.perf_counter()
    try:
        items = run.item_run(call)
    except StepError as exc:
        return False, str(exc), _ms_since(started)
    running: dict[asyncio.Task[tuple[bool, Any, float]], StepCall] = {}

    def start() -> None:
        for item in items.next_calls():
            scope = items.scope(item) if gate is not None else None
            work = _gated(gate, item, scope, invoker, timeout_of(item))
            context = step_context(run.events, item.step_id)  # an item may be an agent step
            task = asyncio.create_task(work, name=item.step_id, context=context)
            running[task] = item

    try:
        start()
        while running:
            done, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
            for task in sorted(done, key=lambda t: items.rank(running[t])):
                ok, value, _ms = task.result()
                items.record(running.pop(task), ok, value)
            start()
    finally:
        for task in running:
            task.cancel()
        if running:
            await asyncio.gather(*running, return_exceptions=True)
    ok, value = items.result()
    return ok, value, _ms_since(started)


async def _invoke(
    invoker: Invoker, call: StepCall, timeout: float | None
) -> tuple[bool, Any, float]:
    """(ok, result or error text, duration in ms); only cancellation escapes. The owner's
    timeout is held where a direct call's is too (``tools.deadline``)."""
    return await within(lambda: invoker(call.tool, call.args), timeout)


async def _gated(
    gate: Gate | None, call: StepCall, scope: Any, invoker: Invoker, timeout: float | None
) -> tuple[bool, Any, float]:
    """The call, after its pause when a breakpoint names it (skipped: ``Skipped``)."""
    if gate is not None and await gate.check(call.step_id, call.tool, call.args, scope) == "skip":
        return False, Skipped(), 0.0
    return await _invoke(invoker, call, timeout)


def scope_of(run: PlanRun, call: StepCall, gate: Gate | None) -> Any:
    """What the step's bindings read, shown when it pauses (None: no breakpoints)."""
    return run.binder.scope_of(run.checked.steps[call.step_id]) if gate is not None else None


def _ms_since(started: float) -> float:
    return (time.perf_counter() - started) * 1000.0
