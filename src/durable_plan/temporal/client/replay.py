"""Replay recorded histories against this version: what a user runs before deploying it.

A history replays when this version's workflow code issues, for every event of it, the
command the recording version issued. One that does not would fail a plan in flight
with a nondeterminism error after the upgrade. ``replay`` answers per history: ok, or
where the two versions part (the first event that diverges, as Temporal names it).

A history with no workflow task yet (a plan started with ``start_delay``, or whose first task
has not been scheduled) has nothing to replay: no workflow code has run, so no recorded
command can disagree with this version's, and the upgraded workers run it from its start.
It is ``ok`` without a replay; given to the SDK's replayer it would wait forever for a task.

Used by ``durable-plan replay`` and by the test that replays every release's corpus.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import threading
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer

from durable_plan.language.plan_limits import brief
from durable_plan.protect.encryption import ENCODING, KEYS_ENV

__all__ = ["ReplayOutcome", "ReplayTimedOut", "bounded_in_thread", "plan_workflows", "replay"]

T = TypeVar("T")

_EVENT = re.compile(r"HistoryEvent\(id: (\d+), ([A-Za-z]+)")
_NONDETERMINISM = re.compile(r"\[TMPRL1100\] Nondeterminism error: (.*?)\", source:")
_WFT_SCHEDULED = EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED
_WFT_COMPLETED = EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED


@dataclass(frozen=True)
class ReplayOutcome:
    """One history's verdict."""

    name: str
    workflow_id: str
    workflow_type: str
    error: str | None = None
    event_id: int | None = None
    """The first event that diverges, when Temporal names it."""
    event_type: str | None = None
    note: str | None = None
    """Why an ``ok`` needed no replay (``NOTHING_TO_REPLAY``)."""

    @property
    def ok(self) -> bool:
        return self.error is None

    def line(self) -> str:
        """``ok  name  Type id`` or ``FAIL  name  Type id: event N (Type): message``."""
        head = f"{self.name}  {self.workflow_type} {self.workflow_id}"
        if self.ok:
            return f"ok    {head}" + (f": {self.note}" if self.note else "")
        where = f"event {self.event_id} ({self.event_type}): " if self.event_id else ""
        return f"FAIL  {head}: {where}{self.error}"


NOTHING_TO_REPLAY = "no workflow task yet, nothing to replay (this version runs it from its start)"
"""The note of a history without a workflow task (``start_delay``): it cannot diverge."""


class ReplayTimedOut(TimeoutError):
    """The replay did not finish within its bound: what was answered by then, and the
    history the replayer was still on (when known)."""

    def __init__(self, timeout: float, answered: list[Any], waiting: str | None = None) -> None:
        super().__init__(f"no answer within {timeout:g} s")
        self.timeout = timeout
        self.answered = answered
        self.waiting = waiting


def plan_workflows() -> list[type]:
    """This package's workflows, which every plan history needs."""
    from durable_plan.temporal.workflows.agent_workflow import AgentStepWorkflow
    from durable_plan.temporal.workflows.plan_workflow import PlanWorkflow

    return [PlanWorkflow, AgentStepWorkflow]


async def replay(
    histories: Iterable[tuple[str, WorkflowHistory]],
    *,
    workflows: Sequence[type] = (),
    plugins: Sequence[Any] = (),
    timeout: float | None = None,
    **replayer_options: Any,
) -> list[ReplayOutcome]:
    """Replay each ``(name, history)`` with this package's workflows plus ``workflows``
    (the user's conversation workflows) and ``plugins`` (``StrandsPlugin(models={})`` for
    histories written through its converter, ``EncryptionPlugin(keys)`` for sealed ones).

    Outcomes come in the order of ``histories``. ``timeout``: seconds for the whole replay;
    past it ``ReplayTimedOut`` carries the outcomes known and the history being replayed
    (the replayer is left behind on a thread of its own, ``bounded_in_thread``)."""
    every = [*plan_workflows(), *workflows]
    known = {_type_name(cls) for cls in every}
    settled: dict[int, ReplayOutcome] = {}
    named: list[tuple[int, str, WorkflowHistory]] = []
    for index, (name, history) in enumerate(histories):
        workflow_type = _workflow_type(history)
        if workflow_type not in known:
            # Temporal would say only "not registered on this worker", after a traceback.
            settled[index] = _unknown_type(name, history, workflow_type, sorted(known))
        elif not any(event.event_type == _WFT_SCHEDULED for event in history.events):
            # The SDK's replayer would wait for a workflow task forever.
            settled[index] = ReplayOutcome(
                name, history.workflow_id, workflow_type, note=NOTHING_TO_REPLAY
            )
        else:
            named.append((index, name, history))

    def in_order(replayed: list[ReplayOutcome]) -> list[ReplayOutcome]:
        """Every outcome known, in the order given (``replayed``: the first of ``named``)."""
        outcomes = dict(settled)
        for (index, _, _), outcome in zip(named, replayed, strict=False):
            outcomes[index] = outcome
        return [outcomes[index] for index in sorted(outcomes)]

    if not named:
        return in_order([])

    def replayer() -> Replayer:
        # A new one per use: one reused after its replay iterator closed never answers.
        return Replayer(workflows=every, plugins=list(plugins), **replayer_options)

    by_run = {(h.workflow_id, _run_id(h)): (name, h) for _, name, h in named}

    async def replay_all(tell: Callable[[ReplayOutcome], None]) -> None:
        async def each() -> AsyncIterator[WorkflowHistory]:
            for _, _, history in named:
                yield history

        async with replayer().workflow_replay_iterator(each()) as results:
            async for result in results:
                key = (result.history.workflow_id, _run_id(result.history))
                name, history = by_run.get(key, (result.history.workflow_id, result.history))
                outcome = _outcome(name, history, result.replay_failure)
                if outcome.event_id is None and "nondeterminism" in str(outcome.error).lower():
                    outcome = await _locate(replayer(), history, outcome)
                tell(outcome)

    try:
        replayed = await bounded_in_thread(replay_all, timeout)
    except ReplayTimedOut as exc:
        if len(exc.answered) == len(named):  # every verdict is in; only a clean-up was late
            return in_order(exc.answered)
        waiting = named[len(exc.answered)][1]
        raise ReplayTimedOut(timeout or 0.0, in_order(exc.answered), waiting) from None
    return in_order(replayed)


async def bounded_in_thread(
    work: Callable[[Callable[[T], None]], Coroutine[Any, Any, None]], timeout: float | None
) -> list[T]:
    """What ``work`` tells (in order) by the time it returns, within ``timeout`` seconds.

    ``work`` runs in an event loop on a daemon thread of its own, because the SDK's replayer
    cannot be cancelled while it waits for a workflow task that never comes: its clean-up
    awaits that same task, so ``asyncio.timeout`` around it would hang too. Past the bound
    ``ReplayTimedOut`` carries what was told; the thread is left behind (a command leaves
    the process at once, ``exit_now``)."""
    if timeout is not None and timeout <= 0:
        raise ReplayTimedOut(timeout, [])
    loop = asyncio.get_running_loop()
    told: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()

    def send(kind: str, value: Any) -> None:
        # A closed loop: the caller stopped waiting long ago (its deadline passed).
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(told.put_nowait, (kind, value))

    def run() -> None:
        try:
            asyncio.run(work(lambda item: send("item", item)))
        except BaseException as exc:  # handed to the caller, who raises it
            send("error", exc)
        else:
            send("done", None)

    threading.Thread(target=run, name="durable-plan replay", daemon=True).start()
    deadline = None if timeout is None else loop.time() + timeout
    answered: list[T] = []
    while True:
        left = None if deadline is None else max(0.0, deadline - loop.time())
        try:
            kind, value = await asyncio.wait_for(told.get(), left)
        except TimeoutError:
            raise ReplayTimedOut(timeout or 0.0, answered) from None
        if kind == "done":
            return answered
        if kind == "error":
            raise value
        answered.append(value)


async def _locate(
    replayer: Replayer, history: WorkflowHistory, outcome: ReplayOutcome
) -> ReplayOutcome:
    """Name the first event that diverges when Temporal's message does not.

    Core says what differs ("Activity type of scheduled event 'x' does not match ...") but
    not where. A prefix of the history that ends before a workflow task is scheduled holds
    whole workflow tasks, and replays iff none of them diverged; so the shortest failing
    prefix ends with the diverging task. Binary searches cost a few replays of one history,
    only for the ones that fail."""
    events = list(history.events)
    first = next((i for i, e in enumerate(events) if e.event_type == _WFT_COMPLETED), None)
    if first is None:
        return outcome
    # A prefix without a completed workflow task gives the replayer nothing to do: it waits.
    cuts = [
        i for i, event in enumerate(events) if event.event_type == _WFT_SCHEDULED and i > first
    ] + [len(events)]
    high = await _shortest_failing(replayer, history, cuts)
    part = events[: cuts[high]]
    completed = max(i for i, event in enumerate(part) if event.event_type == _WFT_COMPLETED)
    # Within that task, the shortest failing prefix ends with the event that diverges: the
    # replayer takes commands beyond a history's end as new, so a prefix that stops before
    # the mismatch replays.
    within = list(range(completed + 2, len(part) + 1)) or [len(part)]
    at = within[await _shortest_failing(replayer, history, within)] - 1
    event = part[at]
    return replace(outcome, event_id=int(event.event_id), event_type=_type_label(event))


async def _shortest_failing(replayer: Replayer, history: WorkflowHistory, cuts: list[int]) -> int:
    """The index into ``cuts`` of the shortest prefix ``events[:cut]`` that fails to replay
    (the last one, the whole history or task, is known to fail)."""
    events = list(history.events)
    low, high = 0, len(cuts) - 1
    while low < high:
        middle = (low + high) // 2
        prefix = WorkflowHistory(history.workflow_id, events[: cuts[middle]])
        result = await replayer.replay_workflow(prefix, raise_on_replay_failure=False)
        if result.replay_failure is None:
            low = middle + 1
        else:
            high = middle
    return high


def _type_label(event: HistoryEvent) -> str:
    """``EVENT_TYPE_ACTIVITY_TASK_SCHEDULED`` -> ``ActivityTaskScheduled``."""
    name = EventType.Name(event.event_type).removeprefix("EVENT_TYPE_")
    return "".join(word.capitalize() for word in name.split("_"))


def _type_name(cls: type) -> str:
    definition = getattr(cls, "__temporal_workflow_definition", None)
    return str(getattr(definition, "name", None) or cls.__name__)


def _unknown_type(
    name: str, history: WorkflowHistory, workflow_type: str, known: list[str]
) -> ReplayOutcome:
    message = (
        f"workflow type {workflow_type!r} is not among the workflows given ({', '.join(known)}): "
        "pass the class that defines it (durable-plan replay --workflows MODULE:CLASS)"
    )
    return ReplayOutcome(name, history.workflow_id, workflow_type, message)


def _outcome(name: str, history: WorkflowHistory, failure: Exception | None) -> ReplayOutcome:
    workflow_type = _workflow_type(history)
    if failure is None:
        return ReplayOutcome(name, history.workflow_id, workflow_type)
    text = " ".join(str(failure).split())
    found = _EVENT.search(text)
    message = brief(text, 500, quote=False)
    core = _NONDETERMINISM.search(text)
    if core is not None:  # the one sentence that says what differs, not the Rust debug dump
        message = "nondeterminism: " + brief(core.group(1), 400, quote=False)
    if ENCODING.decode() in text and "Unknown payload encoding" in text:
        message = (
            f"its payloads are sealed and no keys were given: set ${KEYS_ENV} to the keys of "
            "the workers that wrote it (`durable-plan keygen` made them)"
        )
    if found is None:
        return ReplayOutcome(name, history.workflow_id, workflow_type, message)
    return ReplayOutcome(
        name, history.workflow_id, workflow_type, message, int(found.group(1)), found.group(2)
    )


def _workflow_type(history: WorkflowHistory) -> str:
    for event in history.events[:1]:
        if event.HasField("workflow_execution_started_event_attributes"):
            return str(event.workflow_execution_started_event_attributes.workflow_type.name)
    return "?"


def _run_id(history: WorkflowHistory) -> str:
    for event in history.events[:1]:
        if event.HasField("workflow_execution_started_event_attributes"):
            return str(event.workflow_execution_started_event_attributes.original_execution_run_id)
    return ""
