"""The pause desk of one workflow (a plan, an agent step): calls paused at a breakpoint.

A call whose path a breakpoint names (``run.breakpoints``) waits here before its first
stage (``pipeline.Stages``), its arguments bound: a ``workflow.wait_condition`` and nothing
else, so a pause holds no activity slot, no timer and no admission budget, and a worker
that dies while a call is paused leaves only history behind (the next worker replays to
the same wait). A person answers with the ``answer_breakpoint`` update (``continue``,
``skip``, ``abort``), addressed by the call's path inside this workflow's run; the update's
validator refuses an answer for a call that is not paused (nothing enters history). The
``paused`` query lists the open pauses with their arguments and the scope they read, all
of them within one budget (``MAX_PAUSED_BYTES``: a query's answer must fit a message).

Each pause and each answer is a step event (``paused``, ``resumed``), and while any call
is paused the web UI's current details say ``paused at <path>`` with the commands that
answer it, addressed from the top-level plan (``Debugging.root_workflow_id``), beside the
calls awaiting approval (``plan_status.PersonWaits``). ``abort`` ends the top-level plan:
a pause in a child workflow (an agent step's, a saved plan's) asks the server to cancel
it. Workflow code.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from typing import TYPE_CHECKING, Any

from temporalio import workflow
from temporalio.exceptions import TemporalError

from durable_plan.language.json_text import compact_json
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
from durable_plan.temporal.workflows.plan_status import MAX_DETAILS_CHARS, PersonWaits

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
MAX_PAUSED_BYTES = 480 * 1024
"""All the arguments and scopes one ``paused`` query answers with, as JSON: each pause's
scope is bounded, its arguments are not (an activity's input may be large), and pauses
may be many (a wide map). Past it, a pause's arguments and scope are previews
(``{"omitted", "preview"}``), in the order the calls paused; a query's answer over the
server's message limit would fail every ``paused()``, ``show`` and ``continue``. Under
the SDK's 512 KiB payload warning, so a person polling ``paused()`` leaves no warning in
the worker's log each time."""
PREVIEW_CHARS = 200
MAX_PATHS_SHOWN = 5
"""Paused calls whose commands the details list (the rest are counted)."""


NO_BREAKPOINTS = Breakpoints()


class PauseDesk:
    """Which calls of this workflow are paused, and the answers given."""

    def __init__(
        self,
        breakpoints: Breakpoints = NO_BREAKPOINTS,
        events: Emitter = SILENT,
        path_prefix: str = "",
        on_paused: Callable[[bool], None] | None = None,
        *,
        root_workflow_id: str = "",
        waits: PersonWaits | None = None,
    ) -> None:
        """``path_prefix``: the run's place under the top-level plan (a saved plan's), so a
        pattern is matched against the path from the root; calls are addressed here by
        their path inside the run. ``on_paused``: told when the first call pauses (True)
        and the last is answered (False), as the plan's status attribute is.
        ``root_workflow_id``: the top-level plan's (``Debugging.root_workflow_id``; "":
        this workflow's own): what the details address and ``abort`` cancels. ``waits``:
        the workflow's calls waiting for a person, shared with its approval desk
        (``desk.waits``), which draw its details together."""
        self.breakpoints = breakpoints
        self.events = events
        self.path_prefix = path_prefix
        self.on_paused = on_paused
        self.root_workflow_id = root_workflow_id
        self._open: dict[str, Pause] = {}
        self._sizes: dict[str, tuple[int, int]] = {}
        """Per paused call: its arguments' and scope's size as JSON, measured once."""
        self._answers: dict[str, Action] = {}
        self.waits = waits if waits is not None else PersonWaits()
        self.waits.add(lambda: bool(self._open), self._section)
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
            size = json_size(scope)
        self._open[call_id] = Pause(call_id, tool, args, scope)
        self._sizes[call_id] = (json_size(args), size)
        self._answers.pop(call_id, None)
        first = len(self._open) == 1
        self.events.emit("paused", step=_top(call_id), path=call_id, tool=tool)
        if first and self.on_paused is not None:
            self.on_paused(True)
        self.waits.redraw()
        evicted = False
        try:
            await workflow.wait_condition(lambda: call_id in self._answers)
            action = self._answers[call_id]
            self.events.emit("resumed", step=_top(call_id), path=call_id, tool=tool, status=action)
            if action == "abort":
                # The plan ends cancelled. A child workflow asks the server to cancel the
                # top-level plan (recorded: an abort sent from anywhere, a child's id
                # included, ends the plan, not only this child); the top-level plan is
                # cancelled by whoever aborts (``PlanHandle.abort``). Until then the call
                # stays paused, so a cancel lost on the way can be asked again, and
                # nothing of it runs.
                await self._cancel_root()
                await workflow.wait_condition(lambda: False)
        except GeneratorExit:  # the worker evicted the run: no workflow call may be made
            evicted = True
            raise
        finally:
            if not evicted:
                self._close(call_id)
        return action

    async def _cancel_root(self) -> None:
        root = self.root_workflow_id
        if not root or root == workflow.info().workflow_id:
            return
        with suppress(TemporalError):  # the plan ended already: nothing is left to cancel
            await workflow.get_external_workflow_handle(root).cancel()

    def _close(self, call_id: str) -> None:
        self._open.pop(call_id, None)
        self._sizes.pop(call_id, None)
        self.waits.redraw()
        if not self._open and self.on_paused is not None:
            self.on_paused(False)

    def _section(self, limit: int = MAX_DETAILS_CHARS) -> str:
        """The web UI's current details' part for pauses: every paused call and the
        commands that answer it, from the top-level plan (``continue <root id> <path from
        the root>`` also routes to a call in a child workflow), whole lines within
        ``limit`` characters."""
        info = workflow.info()
        root = self.root_workflow_id or info.workflow_id
        namespace = f" --namespace {info.namespace}" if info.namespace != "default" else ""
        paths = self.paths()
        named: list[str] = []
        for path in paths[:10]:  # whole paths, in at most half the room
            if sum(len(n) + 4 for n in named) + len(path) + 4 > limit // 2:
                break
            named.append(f"`{path}`")
        head = f"**Paused at** {', '.join(named)}"
        if len(named) < len(paths):
            head += f" and {len(paths) - len(named)} more"
        lines = [head, ""]
        room = limit - sum(len(line) + 1 for line in lines) - 60  # "… more"
        shown = 0
        for path in paths[:MAX_PATHS_SHOWN]:
            line = (
                f"- `{path}`: `durable-plan continue {root} {path}{namespace}` (or `skip`, `abort`)"
            )
            room -= len(line) + 1
            if room < 0:
                break
            lines.append(line)
            shown += 1
        if shown < len(paths):
            lines.append(f"- … and {len(paths) - shown} more (`durable-plan show`)")
        return "\n".join(lines)

    def paths(self) -> list[str]:
        """The paused calls' paths from the top-level plan's root, in the order they paused."""
        return [rooted(self.path_prefix, own) for own in self._open]

    def is_paused(self, call_id: str) -> bool:
        return call_id in self._open

    def paused(self) -> list[dict[str, Any]]:
        """The ``paused`` query: each paused call, its arguments and scope (``path`` from
        the root, ``call`` as this workflow knows it), within ``MAX_PAUSED_BYTES`` in all:
        past it, previews (the calls that paused first are shown whole first)."""
        left = MAX_PAUSED_BYTES
        rows: list[dict[str, Any]] = []
        for own, pause in self._open.items():
            row = {**pause.to_wire(), "path": rooted(self.path_prefix, own), "call": own}
            args_bytes, scope_bytes = self._sizes.get(own, (0, 0))
            left -= len(own) + len(row["path"]) + len(pause.tool) + 64
            for key, size in (("args", args_bytes), ("scope", scope_bytes)):
                if row[key] is None or size <= left:
                    left -= size
                else:
                    row[key] = _preview(row[key], size)
                    left -= json_size(row[key])
            rows.append(row)
        return rows

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


def _preview(value: Any, size: int) -> dict[str, Any]:
    """What the ``paused`` query shows of a value past its budget."""
    text = compact_json(value)
    return {
        "omitted": (
            f"{size} bytes as JSON, past the {MAX_PAUSED_BYTES} bytes the paused query "
            "answers with in all; answer the calls paused before it, then ask again"
        ),
        "preview": text[:PREVIEW_CHARS],
    }


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
