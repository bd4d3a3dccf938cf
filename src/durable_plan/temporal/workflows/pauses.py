"""The pause desk of one workflow (a plan, an agent step): calls paused at a breakpoint.

A call whose path a breakpoint names (``run.breakpoints``) waits here before its first
stage (``pipeline.Stages``), its arguments bound: a ``workflow.wait_condition`` and nothing
else, so a pause holds no activity slot, no timer and no admission budget, and a worker
that dies while a call is paused leaves only history behind (the next worker replays to
the same wait). A person answers with the ``answer_breakpoint`` update (``continue``,
``skip``, ``abort``), addressed by the call's path inside this workflow's run; the update's
validator refuses an answer for a call that is not paused (nothing enters history). The
``paused`` query lists the open pauses with their arguments and the scope they read.

Each pause and each answer is a step event (``paused``, ``resumed``), and while any call
is paused the web UI's current details say ``paused at <path>`` with the commands that
answer it. Workflow code.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from temporalio import workflow

from durable_plan.language.step_path import parse, rooted
from durable_plan.run.breakpoints import (
    ACTIONS,
    Action,
    Breakpoints,
    Pause,
    check_action,
    pauses_before,
)
from durable_plan.run.events import SILENT, Emitter
from durable_plan.temporal.workflows.admission import json_size
from durable_plan.temporal.workflows.plan_status import set_details

if TYPE_CHECKING:
    from durable_plan.run.calls import StepCall
    from durable_plan.run.engine import PlanRun
    from durable_plan.run.items import ItemRun

ANSWER_UPDATE = "answer_breakpoint"
"""The update a person's answer to a paused call arrives by: ``{"path", "action"}``."""
PAUSED_QUERY = "paused"
"""The query that lists the calls paused now (``Pause.to_wire`` each)."""
PAUSED_CHILDREN_QUERY = "paused_children"
"""The query that lists the child workflows running now, whose calls pause in them."""
MAX_SCOPE_BYTES = 256 * 1024
"""The scope a pause shows, as JSON: a query's answer must fit a payload (the results it
holds are in the ledger anyway)."""


NO_BREAKPOINTS = Breakpoints()


class PauseDesk:
    """Which calls of this workflow are paused, and the answers given."""

    def __init__(
        self,
        breakpoints: Breakpoints = NO_BREAKPOINTS,
        events: Emitter = SILENT,
        path_prefix: str = "",
        on_paused: Callable[[bool], None] | None = None,
    ) -> None:
        """``path_prefix``: the run's place under the top-level plan (a saved plan's), so a
        pattern is matched against the path from the root; calls are addressed here by
        their path inside the run. ``on_paused``: told when the first call pauses (True)
        and the last is answered (False)."""
        self.breakpoints = breakpoints
        self.events = events
        self.path_prefix = path_prefix
        self.on_paused = on_paused
        self._open: dict[str, Pause] = {}
        self._answers: dict[str, Action] = {}
        self._details_before: str | None = None
        self.children: dict[tuple[str, str], None] = {}
        """The child workflows running now, as (kind, call id) in start order (an agent
        step's, ``"agent"``; a saved plan's, ``"plan"``): their calls pause in them
        (``PAUSED_CHILDREN_QUERY``; the child's id is ``ids.child_workflow_id(<this
        workflow's id>, kind, call id)``)."""

    @contextmanager
    def child(self, call_id: str, kind: str = "agent") -> Iterator[None]:
        """While a child workflow of this call runs: listed for ``PlanHandle.paused``."""
        key = (kind, call_id)
        self.children[key] = None
        try:
            yield
        finally:
            self.children.pop(key, None)

    def wants(self, call_id: str, tool: str) -> bool:
        """Does the call (its path inside the run) pause? (A saved plan's call pauses
        inside, before each of its calls: ``breakpoints.pauses_before``.)"""
        if not self.breakpoints or not pauses_before(tool):
            return False
        return self.breakpoints.hits(rooted(self.path_prefix, call_id))

    async def pause(
        self, call_id: str, tool: str, args: dict[str, Any], scope: dict[str, Any] | None
    ) -> Action:
        """Wait until a person answers for ``call_id``; the answer."""
        size = json_size(scope) if scope is not None else 0
        if size > MAX_SCOPE_BYTES:
            scope = {"omitted": f"the scope is {size} bytes as JSON; the ledger has it"}
        self._open[call_id] = Pause(call_id, tool, args, scope)
        self._answers.pop(call_id, None)
        first = len(self._open) == 1
        self.events.emit("paused", step=_top(call_id), path=call_id, tool=tool)
        if first:
            self._details_before = workflow.get_current_details()
            if self.on_paused is not None:
                self.on_paused(True)
        self._show()
        try:
            await workflow.wait_condition(lambda: call_id in self._answers)
            action = self._answers[call_id]
            self.events.emit("resumed", step=_top(call_id), path=call_id, tool=tool, status=action)
            if action == "abort":
                # The plan ends cancelled: whoever aborts cancels the top-level plan next
                # (``PlanHandle.abort``); until then the call stays paused, so a cancel
                # lost on the way can be asked again, and nothing of it runs.
                await workflow.wait_condition(lambda: False)
        finally:
            self._close(call_id)
        return action

    def _close(self, call_id: str) -> None:
        self._open.pop(call_id, None)
        if self._open:
            self._show()
            return
        set_details(self._details_before or "")
        self._details_before = None
        if self.on_paused is not None:
            self.on_paused(False)

    def _show(self) -> None:
        """The web UI's current details: every paused call and the commands that answer."""
        info = workflow.info()
        lines = [f"**Paused at** {', '.join(f'`{p}`' for p in self.paths()[:10])}", ""]
        for own in self.paths()[:5]:
            path = rooted(self.path_prefix, own)
            lines.append(
                f"- `{path}`: `durable-plan continue {info.workflow_id} {own}` (or `skip`, `abort`)"
            )
        set_details("\n".join(lines))

    def paths(self) -> list[str]:
        """The paused calls' paths from the top-level plan's root, in the order they paused."""
        return [rooted(self.path_prefix, own) for own in self._open]

    def is_paused(self, call_id: str) -> bool:
        return call_id in self._open

    def paused(self) -> list[dict[str, Any]]:
        """The ``paused`` query: each paused call, its arguments and scope (``path`` from
        the root, ``call`` as this workflow knows it)."""
        return [
            {**pause.to_wire(), "path": rooted(self.path_prefix, own), "call": own}
            for own, pause in self._open.items()
        ]

    def validate(self, answer: Any) -> None:
        """The update's validator: refused unless the call is paused now."""
        path, action = _read(answer)
        check_action(action)
        again = action == "abort" and self._answers.get(path) == "abort"  # a lost cancel
        if path not in self._open or (path in self._answers and not again):
            paused = ", ".join(self._open) or "none"
            raise ValueError(f"no call is paused at {path!r} here (paused: {paused})")

    def answer(self, answer: Any) -> str:
        path, action = _read(answer)
        self._answers[path] = check_action(action)
        return action


def _read(answer: Any) -> tuple[str, str]:
    if not isinstance(answer, dict):
        raise ValueError(f"a breakpoint answer is {{'path', 'action'}}, not {str(answer)[:100]}")
    path, action = answer.get("path"), answer.get("action")
    if not isinstance(path, str) or action not in ACTIONS:
        raise ValueError(f"a breakpoint answer needs a path and one of {', '.join(ACTIONS)}")
    return path, str(action)


def _top(call_id: str) -> str:
    return parse(call_id).step


class PauseHandlers:
    """The ``answer_breakpoint`` update and the ``paused`` query over ``self.pauses``:
    ``PlanWorkflow`` and ``AgentStepWorkflow`` share them."""

    pauses: PauseDesk

    @workflow.update(name=ANSWER_UPDATE)
    def answer_breakpoint(self, answer: Any) -> str:
        """Continue, skip or abort the call paused at ``answer["path"]``."""
        return self.pauses.answer(answer)

    @answer_breakpoint.validator
    def _validate_answer(self, answer: Any) -> None:
        self.pauses.validate(answer)

    @workflow.query(name=PAUSED_QUERY)
    def paused_calls(self) -> list[dict[str, Any]]:
        """The calls paused now: path, tool, bound arguments, the scope they read."""
        return self.pauses.paused()

    @workflow.query(name=PAUSED_CHILDREN_QUERY)
    def paused_children(self) -> list[list[str]]:
        """The child workflows running now, ``[kind, call id]`` each (their calls' pauses
        are in them)."""
        return [list(key) for key in self.pauses.children]


def call_scope(run: PlanRun | None, loops: Mapping[str, ItemRun], call: StepCall) -> Any:
    """What a plan's call's bindings read: a step's dependencies, an item's with ``item``
    and ``index`` (shown beside its arguments when it pauses)."""
    if run is None:
        return None
    cs = run.checked.steps.get(call.step_id)
    if cs is not None:
        return run.binder.scope_of(cs)
    items = loops.get(parse(call.step_id).step)
    return items.scope(call) if items is not None else None
