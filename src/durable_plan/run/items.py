"""The items of one map or reduce step: which start next, their calls, the step's result.

Written once, like ``PlanRun``, and driven by both runners: a runner asks
``next_calls()``, performs each call (an activity, an agent loop, an
in-process tool), reports it with ``record()``, and takes ``result()`` once
``finished``. Each item's ``when`` and ``bind`` see the loop step's
dependencies plus ``item`` and ``index`` (and ``accumulator`` in a reduce).
No I/O, no clock: it runs as workflow code.

Under ``on_error="fail_fast"`` the first failing item lets running items
finish and skips the unstarted ones, and the step fails naming the item;
under ``"continue"`` a failed item's slot holds its error and the step
counts the failures. A reduce stops at its first failure either way: the
accumulator after a failed item is not something a later step can trust.

It takes what it uses of the plan's run (the binder, the event emitter, ``on_error``)
as values, so it does not import ``PlanRun``, which imports it: no import cycle.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from durable_plan.language.control_steps import DEFAULT_CONCURRENCY, MAX_ITEMS, REDUCE
from durable_plan.language.errors import StepError
from durable_plan.language.step_path import StepPath, parse
from durable_plan.run.breakpoints import Skipped
from durable_plan.run.references import is_reference

REDUCE_STORED_MESSAGE = (
    "the item's result is stored by reference (too large for history), and a reduce's "
    "accumulator must be readable by the plan: make the tool return less, or use a map "
    "and pass its results whole to a tool step"
)

if TYPE_CHECKING:
    from durable_plan.check import CheckedStep
    from durable_plan.language.plan import OnError
    from durable_plan.run.binding import Binder
    from durable_plan.run.calls import StepCall
    from durable_plan.run.events import Emitter


class ItemRun:
    def __init__(
        self,
        cs: CheckedStep,
        call: StepCall,
        *,
        binder: Binder,
        events: Emitter,
        on_error: OnError,
    ) -> None:
        assert cs.body is not None
        items = call.args.get("over")
        if not isinstance(items, list):
            raise StepError(f"'over' must give a list, got {_kind(items)}")
        if len(items) > MAX_ITEMS:
            raise StepError(
                f"'over' gave {len(items)} items; the limit is {MAX_ITEMS}: split the list "
                "over several steps or plans"
            )
        self._binder = binder
        self._events = events
        self._cs = cs
        self._body = cs.body
        self._call = call
        self._items = items
        self._reduce = cs.step.tool == REDUCE
        self._cap = 1 if self._reduce else int(call.args.get("concurrency", DEFAULT_CONCURRENCY))
        self._fail_fast = self._reduce or on_error == "fail_fast"
        self._slots: list[Any] = [None] * len(items)
        self._next = 0
        self._running: set[int] = set()
        self._failed = 0
        self._not_taken = 0
        self._first_failure: tuple[int, str] | None = None
        self._accumulator = call.args.get("initial")

    @property
    def step_id(self) -> str:
        return self._cs.id

    @property
    def finished(self) -> bool:
        return not self._running and (self._next >= len(self._items) or self._stopped)

    @property
    def _stopped(self) -> bool:
        return self._fail_fast and self._first_failure is not None

    def progress(self) -> dict[str, int]:
        """Items done, running and failed so far, for ``progress``."""
        done = self._next - len(self._running)
        return {
            "items": len(self._items),
            "done": done,
            "running": len(self._running),
            "failed": self._failed,
        }

    def next_calls(self) -> list[StepCall]:
        """Item calls to start now, in input order, within the concurrency cap."""
        calls: list[StepCall] = []
        while (
            self._next < len(self._items) and len(self._running) < self._cap and not self._stopped
        ):
            index = self._next
            self._next += 1
            call = self._prepare(index)
            if call is not None:
                self._running.add(index)
                calls.append(call)
        return calls

    def rank(self, call: StepCall) -> int:
        """Items that ended together are recorded in input order (``"m/do.2"`` before
        ``"m/do.10"``), by both runners; see ``PlanRun.rank``."""
        return _index(call.step_id)

    def withdraw(self, call: StepCall) -> bool:
        """A handed-out item the runner has not started yet: True if it should still start.

        After a ``fail_fast`` stop it is skipped here, with the reason in its slot, as
        ``PlanRun.still_to_start`` does for steps (a durable runner holds items back when
        a workflow task is full, and must not start them after the stop)."""
        index = _index(call.step_id)
        if not self._stopped or index not in self._running:
            return True
        self._running.discard(index)
        self._slots[index] = {"skipped": self._skip_reason()}
        return False

    def record(self, call: StepCall, ok: bool, value: Any) -> None:
        index = _index(call.step_id)
        self._running.discard(index)
        if isinstance(value, Skipped):  # a person skipped it at a breakpoint: as a false when
            self._not_taken += 1
            self._slots[index] = {"not_taken": value.reason}
            return
        if ok and self._reduce and is_reference(value):
            # The accumulator is read by the next item's expressions, in workflow code,
            # which cannot see inside a stored result.
            ok, value = False, REDUCE_STORED_MESSAGE
        if ok:
            self._slots[index] = value
            if self._reduce:
                self._accumulator = value
            self._finished(index, None)
        else:
            self._fail(index, str(value))

    def result(self) -> tuple[bool, Any]:
        """(True, the step's result) or (False, the error naming the failed item)."""
        if self._stopped and self._first_failure is not None:
            index, error = self._first_failure
            return False, f"item {index} failed: {error}"
        return True, loop_result(
            self._cs.step.tool,
            len(self._items),
            self._slots,
            self._failed,
            self._not_taken,
            self._accumulator,
        )

    def scope(self, call: StepCall) -> dict[str, Any]:
        """What the item's bindings read (shown when it pauses at a breakpoint)."""
        return self._scope(_index(call.step_id))

    # -- internals ------------------------------------------------------------

    def _scope(self, index: int) -> dict[str, Any]:
        scope = dict(self._binder.scope_of(self._cs))
        scope["item"] = self._items[index]
        scope["index"] = index
        if self._reduce:
            scope["accumulator"] = self._accumulator
        return scope

    def _prepare(self, index: int) -> StepCall | None:
        body = self._body
        try:
            args = self._binder.bind_args(
                self._scope(index),
                body.when,
                body.bind,
                body.templates,
                dict(body.args),
                tool=body.tool,
            )
        except StepError as exc:
            self._fail(index, str(exc))
            return None
        if args is None:
            self._not_taken += 1
            self._slots[index] = {"not_taken": "when was false"}
            return None
        return replace(
            self._call,
            step_id=str(StepPath.of(self._cs.id).item(index)),  # e1/do.3 (step_path)
            tool=body.tool,
            args=args,
            timeout_s=body.timeout_s,
            retries=body.retries,
            local=False,
        )

    def _finished(self, index: int, error: str | None) -> None:
        """The item's event: it ended ok, or failed (its call, or its binding)."""
        self._events.emit(
            "item_finished",
            step=self._cs.id,
            path=str(StepPath.of(self._cs.id).item(index)),
            tool=self._body.tool,
            item=index,
            status="ok" if error is None else "failed",
            error=error,
            detail={"of": len(self._items)},
        )

    def _fail(self, index: int, error: str) -> None:
        self._finished(index, error)
        self._failed += 1
        self._slots[index] = {"error": error}
        if self._first_failure is None:
            self._first_failure = (index, error)
        if self._stopped:
            for later in range(self._next, len(self._items)):
                self._slots[later] = {"skipped": self._skip_reason()}

    def _skip_reason(self) -> str:
        first = self._first_failure[0] if self._first_failure is not None else "?"
        return f"item {first} failed (on_error=fail_fast)"


def _index(item_id: str) -> int:
    index = parse(item_id).index
    assert index is not None, item_id  # made by _prepare
    return index


def _kind(value: Any) -> str:
    return "nothing" if value is None else type(value).__name__


def loop_result(
    kind: str, count: int, results: list[Any], failed: int, not_taken: int, accumulator: Any
) -> dict[str, Any]:
    """The step's result: ``map`` lists every slot in input order, ``reduce`` the fold."""
    if kind == REDUCE:
        return {"count": count, "result": accumulator}
    return {"count": count, "results": results, "failed": failed, "not_taken": not_taken}
