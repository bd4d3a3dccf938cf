"""A plan in flight: the scheduler plus bindings, results and the ledger.

``PlanRun`` is what both runners drive. It turns ready steps into concrete
``StepCall``s (evaluating ``when`` and ``bind`` over the results so far), takes
back each call's outcome, and builds the ``PlanResult``. Runners only invoke
tools and measure time; they never decide what runs next. Nothing here does
I/O or reads a clock, so the Temporal workflow can run it as workflow code.

The expressions themselves are evaluated by the run's ``Binder`` (``binding.py``), and a
result is made plain JSON by ``json_results.py``; both are imported from here as before.
Its read-outs (progress lines, counts, an agent step's tokens) are ``run_report.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from durable_plan.check import CheckedPlan, CheckedStep
from durable_plan.language.control_steps import EXIT
from durable_plan.language.errors import StepError
from durable_plan.language.plan import PlanResult, StepOutcome, StepStatus, rounds_saved
from durable_plan.language.plan_limits import DEFAULT_LIMITS, ExpressionLimits, truncate_text
from durable_plan.run.binding import Binder
from durable_plan.run.breakpoints import Skipped
from durable_plan.run.calls import StepCall
from durable_plan.run.events import SILENT, Emitter, add_usage
from durable_plan.run.items import ItemRun
from durable_plan.run.json_results import as_json as as_json
from durable_plan.run.json_results import non_json_message as non_json_message
from durable_plan.run.references import holds_reference
from durable_plan.run.reuse import Recall, Remembered, in_plan_order
from durable_plan.run.run_report import Phase, Progress, _counts, agent_usage
from durable_plan.run.scheduler import Scheduler


class PlanRun:
    """Drives one checked plan from first step to ``PlanResult``."""

    def __init__(
        self,
        checked: CheckedPlan,
        limits: ExpressionLimits = DEFAULT_LIMITS,
        recall: Recall | None = None,
        reads_references: Callable[[str], bool] | None = None,
        events: Emitter = SILENT,
    ) -> None:
        """``recall``: the conversation's remembered steps this plan may reuse and read
        as ``prior`` (``reuse.py``); None runs every step and remembers nothing.
        ``reads_references``: the runner's word on which tools' calls read a stored result
        handed to them whole (durably: registered tools, through their wrapper activity;
        not an existing activity or an MCP tool); None: every tool's.
        ``events``: where this run's step events go (``events.py``); the run is their one
        source, for both runners."""
        self._checked = checked
        self.events = events
        self._announced = False
        self._finished_emitted = False
        self._usage: dict[str, dict[str, int]] = {}  # agent step -> its model tokens
        self._exited: dict[str, Any] | None = None
        self._result: PlanResult | None = None
        plan = checked.plan
        self._scheduler = Scheduler(
            {sid: cs.deps for sid, cs in checked.steps.items()},
            order=list(checked.steps),
            join={sid: cs.step.join for sid, cs in checked.steps.items()},
            on_error=plan.on_error,
            max_parallel=plan.max_parallel,
        )
        self._results: dict[str, Any] = {}
        self._outcomes: dict[str, StepOutcome] = {}
        self._recall = recall
        self._keys: dict[str, str] = {}  # step -> its arguments' digest, with a recall
        self._reused: dict[str, int] = {}  # step -> the earlier plan whose result it reused
        self._stored: set[str] = set()  # steps whose result is (or lists) stored references
        self._rank = {sid: n for n, sid in enumerate(checked.steps)}
        self.binder = Binder(checked, limits, self._results, self._stored, recall, reads_references)
        """Scopes and arguments of this run's steps and of its items (``ItemRun`` binds
        through it too, so a map's items spend the same plan-wide budget as its steps)."""

    @property
    def checked(self) -> CheckedPlan:
        return self._checked

    @property
    def recall(self) -> Recall | None:
        return self._recall

    @property
    def finished(self) -> bool:
        return not self._scheduler.is_active()

    def next_calls(self) -> list[StepCall]:
        """Calls to start now; steps decided without a call are recorded here."""
        if not self._announced:
            self._announced = True
            self._announce()
        calls: list[StepCall] = []
        while True:
            ready = self._scheduler.get_ready()
            # get_ready() may itself prune or skip steps whose inputs all ended.
            self._absorb_scheduler_decisions()
            if not ready:
                break
            for sid in ready:
                call = self._prepare(self._checked.steps[sid])
                if call is not None:
                    calls.append(call)
        started = self.still_to_start(calls)
        if self.events.active:
            for call in started:
                self.events.emit(
                    "step_started", step=call.step_id, tool=call.tool, level=call.level
                )
        return started

    def receives_references(self, tool: str) -> bool:
        """May a step (or a map item) calling ``tool`` be handed a stored result whole?
        (``Binder.receives_references``: the one rule, for steps and items.)"""
        return self.binder.receives_references(tool)

    def rank(self, call: StepCall) -> int:
        """The order in which a runner records calls that ended together: plan order.

        Both runners take a batch of finished calls back in this order, so the same
        plan stops at the same failure in-process and durably (``fail_fast``)."""
        return self._rank[call.step_id]

    def still_to_start(self, calls: list[StepCall]) -> list[StepCall]:
        """Of calls handed out but not started yet, those that should still start.

        Under fail_fast a failure skips every step not yet started, including
        calls a runner holds back (the workflow paces large arguments over
        several workflow tasks).
        """
        kept = [call for call in calls if self._scheduler.withdraw(call.step_id)]
        if len(kept) < len(calls):
            self._absorb_scheduler_decisions()
        return kept

    def record_result(
        self, step_id: str, result: Any, *, duration_ms: float = 0.0, attempts: int = 1
    ) -> None:
        """A tool returned; non-JSON results fail the step here, with the reason."""
        try:
            value = as_json(result)
        except StepError as exc:
            tool = self._checked.steps[step_id].step.tool
            self.record_failure(
                step_id, non_json_message(tool, exc), duration_ms=duration_ms, attempts=attempts
            )
            return
        self._results[step_id] = value
        usage = agent_usage(self._checked.steps[step_id].step.tool, value)
        if usage is not None:
            self._usage[step_id] = usage
        if holds_reference(self._checked.steps[step_id].step.tool, value):
            self._stored.add(step_id)
        self._end(step_id, "ok", None, duration_ms, attempts)

    def record_failure(
        self, step_id: str, error: str | Skipped, *, duration_ms: float = 0.0, attempts: int = 1
    ) -> None:
        if isinstance(error, Skipped):  # a person skipped it at a breakpoint: as a false when
            self._end(step_id, "not_taken", error.reason, duration_ms, 0)
            return
        self._end(step_id, "failed", error, duration_ms, attempts)

    def result(self) -> PlanResult:
        """The final result; valid once ``finished``. Made once (nothing changes after the
        last step ends, and the result is frozen): the durable runner asks for it to bound
        the workflow's result and again to announce the end (issue 31)."""
        if self._result is not None:
            return self._result
        if not self.finished:
            raise RuntimeError("the plan is still running")
        ledger = [self._outcomes[sid] for sid in self._checked.steps]
        returns = set(self._checked.returns)
        returned = {  # in plan order: PlanResult.in_plan_order
            sid: self._results[sid]
            for sid in self._checked.steps
            if sid in returns and self._outcomes[sid].status == "ok"
        }
        exited = self._exited
        clean = not any(o.status == "failed" for o in ledger) and (
            all(o.status in ("ok", "not_taken") for o in ledger)
            or (exited is not None and exited["status"] == "success")
        )
        if exited is not None and exited["status"] == "error":
            clean = False
        final = self._checked.plan.final and clean
        saved = rounds_saved({o.level for o in ledger if o.status == "ok"}, final)
        result = PlanResult(
            returned=returned,
            ledger=ledger,
            levels=self._checked.levels,
            inference_passes_saved=saved,
            final=final,
            exited=exited,
            usage=self.usage(),
        )
        self._result = result
        return result

    def finish(self) -> PlanResult:
        """The final result, announced: ``plan_finished`` goes out once, when the runner
        is done with the plan (durably after its stored results were read back)."""
        result = self.result()
        if not self._finished_emitted:
            self._finished_emitted = True
            self.events.emit(
                "plan_finished",
                status="ok" if result.ok else "failed",
                usage=result.usage,
                detail={"final": result.final, "steps": _counts(result.ledger)},
            )
        return result

    def abandon(self, status: str, error: str) -> None:
        """The plan ended as a whole (cancelled, failed outside its steps): say so once,
        whichever runner it was."""
        if not self._finished_emitted:
            self._finished_emitted = True
            self.events.emit("plan_finished", status=status, error=error, usage=self.usage())

    def usage(self) -> dict[str, int] | None:
        """The model tokens of this plan's agent steps so far (None: it has none)."""
        total: dict[str, int] | None = None
        for usage in self._usage.values():
            total = add_usage(total, usage)
        return total

    def progress(self) -> list[Progress]:
        """The ledger so far, in plan order, for progress queries and live displays."""
        running = self._scheduler.running
        lines: list[Progress] = []
        for sid, cs in self._checked.steps.items():
            done = self._outcomes.get(sid)
            if done is not None:
                d = done
                lines.append(
                    Progress(sid, d.tool, d.status, d.level, d.duration_ms, d.attempts, d.error)
                )
                continue
            phase: Phase = "running" if sid in running else "pending"
            lines.append(Progress(sid, cs.step.tool, phase, cs.level, 0.0, 0, None))
        return lines

    # -- internals ------------------------------------------------------------

    def _prepare(self, cs: CheckedStep) -> StepCall | None:
        try:
            args = self.binder.bind_args(
                self.binder.scope_of(cs),
                cs.when,
                cs.bind,
                cs.templates,
                dict(cs.step.args),
                tool=cs.step.tool,
            )
        except StepError as exc:
            self._end(cs.id, "failed", str(exc), 0.0, 0)
            return None
        if args is None:
            self._end(cs.id, "not_taken", "when was false", 0.0, 0)
            return None
        if cs.step.tool == EXIT:
            self._exit(cs, args)
            return None
        if self._recall is not None and self._reuse(cs, args):
            return None
        return StepCall(
            step_id=cs.id,
            tool=cs.step.tool,
            args=args,
            level=cs.level,
            timeout_s=cs.step.timeout_s,
            retries=cs.step.retries,
            local=cs.step.local,
        )

    def _reuse(self, cs: CheckedStep, args: dict[str, Any]) -> bool:
        """True if an earlier plan ran this very call ok: the step ends ok with that result,
        marked reused, and nothing is invoked (durably: no activity starts)."""
        assert self._recall is not None
        key = self._keys[cs.id] = self._recall.key(cs.step.tool, args)
        hit = self._recall.reuse(cs.id, cs.step.tool, key)
        if hit is None:
            return False
        self._results[cs.id] = hit.result
        self._reused[cs.id] = hit.plan
        self._end(cs.id, "ok", None, 0.0, 0)
        return True

    def remembered(self) -> list[Remembered]:
        """The steps this plan ran ok (not reused, not exits), in plan order, for the
        conversation's memory; results over the memory's bound are left out."""
        recall = self._recall
        if recall is None:
            return []
        learned: list[Remembered] = []
        for sid, key in self._keys.items():
            outcome = self._outcomes.get(sid)
            if outcome is None or outcome.status != "ok" or sid in self._reused:
                continue
            if sid in self._stored:
                continue  # its stored value is deleted when this plan ends
            entry = recall.learn(sid, outcome.tool, key, self._results[sid])
            if entry is not None:
                learned.append(entry)
        return in_plan_order([*learned, *recall.nested], self._rank)  # saved plans' too

    def _exit(self, cs: CheckedStep, args: dict[str, Any]) -> None:
        """An exit step fired: it ends ok with why, and the scheduler stops the plan."""
        status = args.get("status", "success")
        message = str(args.get("message", ""))
        self._exited = {"step": cs.id, "status": status, "message": message}
        if "output" in args:
            self._exited["output"] = args["output"]
        self._results[cs.id] = dict(self._exited)
        self._end(cs.id, "ok", None, 0.0, 0)
        self.events.emit(
            "plan_exited", step=cs.id, status=str(status), detail={"message": message[:500]}
        )
        self._scheduler.stop(f"plan exited at step '{cs.id}' ({status}): {message}")
        self._absorb_scheduler_decisions()

    def item_run(self, call: StepCall) -> ItemRun:
        """The items of a map or reduce call (``StepError`` if ``over`` is not a usable list)."""
        return ItemRun(
            self._checked.steps[call.step_id],
            call,
            binder=self.binder,
            events=self.events,
            on_error=self._checked.plan.on_error,
        )

    def _end(
        self, sid: str, status: StepStatus, error: str | None, duration_ms: float, attempts: int
    ) -> None:
        cs = self._checked.steps[sid]
        if error is not None:
            error = truncate_text(error)
        self._scheduler.done(sid, status, error)
        self._outcomes[sid] = StepOutcome(
            id=sid,
            tool=cs.step.tool,
            status=status,
            level=cs.level,
            duration_ms=round(duration_ms, 3),
            error=error,
            attempts=attempts,
            reused_from=self._reused.get(sid),
            usage=self._usage.get(sid),
        )
        self._finished(self._outcomes[sid])
        self._absorb_scheduler_decisions()

    def _absorb_scheduler_decisions(self) -> None:
        """Record steps the scheduler skipped or pruned on its own."""
        if self._scheduler.ended == len(self._outcomes):
            return  # nothing new: keeps a plan's bookkeeping linear in its size
        for sid, status in self._scheduler.statuses.items():
            if sid not in self._outcomes:
                cs = self._checked.steps[sid]
                self._outcomes[sid] = StepOutcome(
                    id=sid,
                    tool=cs.step.tool,
                    status=status,
                    level=cs.level,
                    error=self._scheduler.reason(sid),
                )
                self._finished(self._outcomes[sid])

    def _announce(self) -> None:
        steps = [
            {"id": sid, "tool": cs.step.tool, "level": cs.level}
            for sid, cs in self._checked.steps.items()
        ]
        self.events.emit("plan_started", detail={"steps": steps})

    def _finished(self, outcome: StepOutcome) -> None:
        if not self.events.active:
            return
        self.events.emit(
            "step_finished",
            step=outcome.id,
            tool=outcome.tool,
            level=outcome.level,
            status=outcome.status,
            duration_ms=outcome.duration_ms,
            attempts=outcome.attempts,
            error=outcome.error,
            usage=outcome.usage,
            detail={"reused_from": outcome.reused_from} if outcome.reused_from else None,
        )
