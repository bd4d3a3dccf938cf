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
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from temporalio import workflow
from temporalio.common import RawValue
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from durable_plan.check import CheckedPlan
    from durable_plan.language.agent_step import AGENT_TOOL
    from durable_plan.language.control_steps import LOOPS
    from durable_plan.language.errors import PlanRejected, StepError
    from durable_plan.run.breakpoints import Breakpoints
    from durable_plan.run.calls import StepCall
    from durable_plan.run.engine import PlanRun
    from durable_plan.run.events import SILENT, Emitter
    from durable_plan.run.reuse import Recall, bounded
    from durable_plan.run.telemetry_sink import TelemetrySink
    from durable_plan.temporal.wire.hook_messages import HOOK_REPLY_SIGNAL
    from durable_plan.temporal.wire.messages import PLAN_WORKFLOW_NAME, json_payload
    from durable_plan.temporal.wire.workflow_inputs import PlanInput
    from durable_plan.temporal.workflows.activity_calls import StepActivities
    from durable_plan.temporal.workflows.admission import Admission, Wanted, json_size
    from durable_plan.temporal.workflows.agent_step_child import run_agent_step_child
    from durable_plan.temporal.workflows.approvals import ApprovalDesk, ApprovalHandlers
    from durable_plan.temporal.workflows.drive import drive, record
    from durable_plan.temporal.workflows.event_stream import (
        PlanEventStream,
        traced,
        workflow_emitter,
    )
    from durable_plan.temporal.workflows.hook_relay import HookAsker, HookRoute
    from durable_plan.temporal.workflows.outcomes import (
        Outcome,
        args_too_large,
        bounded_payload,
        ms_since,
    )
    from durable_plan.temporal.workflows.pauses import PauseDesk, PauseHandlers, call_scope
    from durable_plan.temporal.workflows.pipeline import Stages
    from durable_plan.temporal.workflows.plan_request import recorded_check, recorded_recall
    from durable_plan.temporal.workflows.plan_status import (
        PlanStatus,
        StatusBoard,
        outcome_details,
        outcome_status,
    )
    from durable_plan.temporal.workflows.recovery import Salvage, salvage_to_wire
    from durable_plan.temporal.workflows.saved_plan_child import (
        is_saved_plan_call,
        run_saved_plan_step,
    )
    from durable_plan.temporal.workflows.stored_results import drop_stored, read_returned
    from durable_plan.temporal.workflows.ui_summary import step_summaries


@workflow.defn(name=PLAN_WORKFLOW_NAME, sandboxed=False)
class PlanWorkflow(ApprovalHandlers, PauseHandlers):
    """Runs one plan; ``progress`` answers with the ledger so far."""

    def __init__(self) -> None:
        self._run: PlanRun | None = None
        self.desk = ApprovalDesk(())
        self.pauses = PauseDesk()  # breakpoints (``pauses``): set when the plan starts
        self._loops: dict[str, Any] = {}
        self._admission: Admission | None = None
        self._hooks: HookAsker | None = None
        self._activities: StepActivities | None = None  # how this plan calls its activities
        self._recall: Recall | None = None  # the conversation's steps this plan may reuse
        self._stream = PlanEventStream()  # its handlers exist from the first task on
        self._events: Emitter = SILENT
        self._telemetry: TelemetrySink | None = None
        self._board: StatusBoard | None = None  # the web UI's status and details

    @workflow.run
    async def run(self, raw: Any) -> Any:
        """The plan's result (``outcomes.bounded_payload``) as JSON text in its own key order
        (``json_payload``): the SDK's default converter would sort every object's keys, and
        the model reads the result's text (the returned values, a map's
        ``{"count", "results", ...}``) as the in-process runner gives it."""
        request: PlanInput | None = None
        try:
            request = PlanInput.from_wire(raw)
            # The top-level plan's id travels to every child it starts (its own when none
            # started it): a pause anywhere is addressed, and aborts, from there.
            debugging = request.debugging.rooted_at(workflow.info().workflow_id)
            request = replace(request, debugging=debugging)
            self._board = StatusBoard(request.visibility.plan_status_attribute)
            self._events, self._telemetry = workflow_emitter(
                workflow.info().workflow_id,
                self._stream if request.visibility.stream_events else None,
            )
            self._events.path_prefix = request.debugging.path_prefix  # a saved plan's run
            return RawValue(json_payload(await self._execute(self._check(request), request)))
        except PlanRejected as exc:
            details = [str(p) for p in exc.problems]
            self._ended("rejected", str(exc))
            raise ApplicationError(
                str(exc), details, type="PlanRejected", non_retryable=True
            ) from None
        except ApplicationError as exc:
            self._ended("failed", exc.message)
            raise
        except asyncio.CancelledError:
            self._ended("cancelled", "the plan was cancelled")
            raise
        except Exception as exc:  # an engine bug must fail the plan, not the task forever
            self._ended("failed", f"plan workflow error: {type(exc).__name__}: {exc}")
            raise ApplicationError(
                f"plan workflow error: {type(exc).__name__}: {exc}",
                self._partial(),
                type="PlanWorkflowError",
                non_retryable=True,
            ) from exc
        finally:
            # Whatever way the plan ends, what it stored goes (decided from history alone:
            # only plans that stored something run this activity).
            calls = self._activities
            keep = request is None or request.storage.keep_stored_results
            if calls is not None and calls.stored_any and not keep:
                assert request is not None
                await drop_stored(request.routing.task_queue, calls.store_chain())
            if self._admission is not None:
                await self._admission.settle()
            await self._stream.close()

    @workflow.query
    def progress(self) -> list[dict[str, Any]]:
        """The ledger so far: phase, attempts, durations, errors; for a step awaiting
        approval, the bound arguments and their digest; refused decisions."""
        if self._run is None:
            return []
        lines = []
        for line in self._run.progress():
            phase: str = line.phase
            if self.desk.is_awaiting(line.id):
                phase = "awaiting_approval"
            elif self.pauses.is_paused(line.id):
                phase = "paused"
            lines.append(
                {
                    "id": line.id,
                    "tool": line.tool,
                    "phase": phase,
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
        self._recall = recorded_recall(request)
        return recorded_check(request, self._recall)

    async def _execute(self, checked: CheckedPlan, request: PlanInput) -> dict[str, Any]:
        run = self._run = PlanRun(
            checked,
            recall=self._recall,
            reads_references=_reads_references(request),
            events=self._events,
        )
        self.desk = ApprovalDesk(
            checked.steps,
            self._events,
            self._board.waiting if self._board is not None else None,
        )
        self.pauses = PauseDesk(
            Breakpoints(request.debugging.breakpoints),
            self._events,
            request.debugging.path_prefix,
            self._board.paused if self._board is not None else None,
            root_workflow_id=request.debugging.root_workflow_id,
            waits=self.desk.waits,  # one drawing of the details for both kinds of wait
        )
        route = HookRoute.of(request.relay, workflow.info().workflow_id)
        self._admission = Admission(
            max_task_bytes=request.bounds.max_task_bytes,
            max_history_bytes=request.bounds.max_history_bytes,
            max_result_bytes=request.bounds.max_result_bytes,
            results_travel=2 if route is not None else 1,
        )
        self._hooks = HookAsker(route, self._admission)
        calls = self._activities = StepActivities(
            request,
            self._admission,
            step_summaries(checked, request.visibility.ui_metadata),
        )

        def wanted(call: StepCall) -> Wanted:
            return Wanted(lambda: bool(run.still_to_start([call])))

        await drive(
            run.next_calls,
            lambda call: self._run_call(call, request, wanted(call)),
            run.rank,
            lambda call, outcome: record(run, call, outcome),
        )
        resolved: dict[str, Any] = {}
        if calls.stored_any and request.storage.return_stored == "value":
            # Values read back must not push the plan's result over its own limit.
            payload = run.result().model_dump(mode="json")
            resolved = await read_returned(
                payload["returned"],
                max_bytes=request.bounds.max_result_bytes,
                budget=request.bounds.max_returned_bytes - json_size(payload) - 64 * 1024,
                task_queue=request.routing.task_queue,
                chain=calls.store_chain(),
            )
        payload = bounded_payload(run, request, resolved)
        if self._board is not None:
            result = run.result()
            self._board.ended(outcome_status(result), outcome_details(result))
        run.finish()  # plan_finished, now that nothing of the plan is left to do
        return payload

    def _ended(self, status: PlanStatus, error: str) -> None:
        """A plan that ends as a whole (rejected, failed, cancelled) says so to its
        subscribers, once (a plan that ran to its result said so in ``PlanRun.finish``),
        and in the web UI: its status attribute and current details."""
        if self._board is not None:
            self._board.ended(status, f"**Plan {status}** as a whole: {error}")
        if self._run is None:
            self._events.emit("plan_finished", status=status, error=error)
        else:
            self._run.abandon(status, error)

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
        stopped before it started; the scheduler or the item run recorded why). What it
        starts is traced under the step's span (when telemetry is on)."""
        with traced(self._telemetry, call.step_id):
            if call.tool == AGENT_TOOL:
                return await self._run_agent_step(call, request, wanted)
            if is_saved_plan_call(request.tools, call.tool):  # a child plan
                assert self._hooks is not None and self._admission is not None
                stages = Stages(self._hooks, self.desk, self._admission, self.pauses)
                return await run_saved_plan_step(call, request, stages, wanted, self._recall)
            if call.tool in LOOPS:
                return await self._run_items(call, request, wanted)
            return await self._run_tool(call, request, wanted)

    async def _run_tool(self, call: StepCall, request: PlanInput, wanted: Wanted) -> Outcome | None:
        """The call's stages (``pipeline.Stages``), after the one check only a plan's step
        has: arguments a binding made too large for the activity's input."""
        assert self._hooks is not None and self._admission is not None
        size = json_size(call.args)
        if size > request.bounds.max_result_bytes:
            return False, args_too_large(call, size, request), 0.0, 0
        options = request.tools[call.tool]
        activities = self._activities
        assert activities is not None
        stages = Stages(self._hooks, self.desk, self._admission, self.pauses)
        return await stages.run(
            call.step_id,
            call.tool,
            options,
            call.args,
            lambda args: activities.run(
                call if args is call.args else replace(call, args=args), options
            ),
            wanted,
            size,
            lambda: call_scope(self._run, self._loops, call),
        )

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

        await drive(
            items.next_calls,
            lambda item: self._run_call(item, request, item_wanted(item)),
            items.rank,
            lambda item, outcome: items.record(item, outcome[0], outcome[1]),
        )
        ok, value = items.result()
        return ok, value, ms_since(started), 1

    async def _run_agent_step(
        self, call: StepCall, request: PlanInput, wanted: Wanted
    ) -> Outcome | None:
        """An agent step: its loop in a child workflow (``agent_step_child``)."""
        assert self._hooks is not None and self._admission is not None
        with self.pauses.child(call.step_id):  # its calls pause in it (``paused_children``)
            return await run_agent_step_child(call, request, self._hooks, self._admission, wanted)


def _reads_references(request: PlanInput) -> Callable[[str], bool]:
    """Registered tools read a stored result through their wrapper activity; an existing
    activity called as it is and an MCP tool get the reference itself (``PlanRun``)."""

    def reads(tool: str) -> bool:
        options = request.tools.get(tool)
        return options is None or options.kind not in ("activity", "mcp")

    return reads
