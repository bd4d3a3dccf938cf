"""What a plan may put into one workflow task and into its history, and when it must wait.

Temporal does not fail a workflow that goes over its limits: it terminates it. A
workflow task's commands travel in one gRPC message of at most 4 MiB, history
stops at 50 MiB or 51,200 events, and a workflow may have 2,000 pending
activities. A plan is written by a model, so every command a plan sends with a
payload (a step's activity, a map item, an agent step's child workflow, a
request to the agent's tool hooks) passes through one ``Admission`` first, and
each path asks the same three questions in the same order:

* room in this workflow task: the bytes already scheduled in it, against
  ``max_task_bytes``; over it, the command waits for the next task;
* room in history: what is in it, plus what this task adds, plus a full result
  for every activity still running; near the limit a new activity waits for
  the running ones to end, and with none running it is refused (the step
  fails, saying why);
* room for one more pending activity.

Waiters are served first come, first served (a small call never overtakes a
large one), and a call whose plan was stopped while it waited is withdrawn
(``fail_fast``, ``exit``). Everything here is workflow code: decisions use only
the workflow's own history counters, so a replay decides the same.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from temporalio import workflow

from durable_plan.language.json_text import compact_json

MAX_PENDING_ACTIVITIES = 1_000
"""Half the server's 2,000 pending activities per workflow."""
MAX_HISTORY_EVENTS = 40_000
"""Well below the server's 51,200 events per workflow."""

Verdict = Literal["go", "withdrawn", "full"]


def json_size(value: Any) -> int:
    """Bytes of ``value`` as compact JSON: what a payload adds to a task and to history."""
    return len(compact_json(value).encode())


@dataclass
class Wanted:
    """Whether a handed-out call should still start; once withdrawn, it stays withdrawn
    (the check it wraps records the withdrawal, so it must be asked at most until then)."""

    check: Callable[[], bool]
    gone: bool = False

    def __call__(self) -> bool:
        if not self.gone and not self.check():
            self.gone = True
        return not self.gone


ALWAYS = Wanted(lambda: True)


class Admission:
    """One workflow's budget for what it schedules; every path draws on the same one."""

    def __init__(
        self,
        *,
        max_task_bytes: int,
        max_history_bytes: int,
        max_result_bytes: int,
        results_travel: int = 1,
        max_pending: int = MAX_PENDING_ACTIVITIES,
        max_events: int = MAX_HISTORY_EVENTS,
    ) -> None:
        """``results_travel``: how many times a result lands in this history (2 when each
        result also goes to the agent's tool hooks in a request)."""
        self.max_task_bytes = max_task_bytes
        self.max_history_bytes = max_history_bytes
        self.max_result_bytes = max_result_bytes
        self.results_travel = results_travel
        self.max_pending = max_pending
        self.max_events = max_events
        self.running = 0
        """Activities and child workflows started and not ended."""
        self._sent = 0
        self._task = -1
        self._queue: deque[int] = deque()
        self._tickets = 0
        self._pacer: asyncio.Task[None] | None = None
        self._run_info: workflow.Info | None = None

    # -- the one way in ---------------------------------------------------------------

    async def enter(self, size: int, *, starts: bool = True, wanted: Wanted = ALWAYS) -> Verdict:
        """Wait until a command of ``size`` bytes may go out in this workflow task.

        ``starts``: the command starts an activity or child (it takes a pending slot and
        may add a full result to history when it ends; call ``leave`` then); False for a
        message (a hook request). "withdrawn": the plan stopped meanwhile; "full": the
        history has no room and nothing running will make any.
        """
        ticket = self._tickets
        self._tickets += 1
        self._queue.append(ticket)
        try:
            while True:
                if not wanted():
                    return "withdrawn"
                if self._queue[0] == ticket:
                    verdict = self._room(size, starts)
                    if verdict == "go":
                        self._sent += size
                        if starts:
                            self.running += 1
                        return "go"
                    if verdict == "full":
                        return "full"
                    if verdict == "next task":
                        self._pace()
                await self._changed(self.running, self._task_marker())
        finally:
            self._queue.remove(ticket)

    def leave(self) -> None:
        """An activity or child started through ``enter`` has ended."""
        self.running -= 1

    def spend(self, size: int) -> None:
        """Bytes this task carries that were not asked for (a local activity's result)."""
        self._refresh()
        self._sent += size

    async def settle(self, *, absorb_cancel: bool = True) -> None:
        """Before the workflow completes: let a pending pacer's timer fire first.

        A timer firing while the completing workflow task runs is an event the server must
        hand to the workflow first: it rejects the completion (``UnhandledCommand``) and the
        task runs again. That happens when a reply ended the wait the timer was started for
        and the plan finished before the timer fired (a server whose timers lag under load).
        Waiting costs one workflow task, and only while a timer is pending.
        ``absorb_cancel``: a cancel during the wait leaves the decided outcome standing (a
        workflow about to complete); False where work goes on after (a conversation's hook
        relay), so the cancel reaches the caller instead of being lost."""
        pacer = self._pacer
        if pacer is None or pacer.done():
            return
        if not absorb_cancel:
            await asyncio.wait([pacer])
            return
        # The outcome is decided: a cancel request meanwhile must not replace it.
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait([pacer])

    def history_full_message(self) -> str:
        info = self._info()
        return (
            f"not started: the plan's history is {info.get_current_history_size() // 2**20} "
            f"MiB in {info.get_current_history_length()} events, near Temporal's limit per "
            "workflow (50 MiB, 51,200 events); split the work into several plans or return "
            "smaller results"
        )

    # -- internals --------------------------------------------------------------------

    def _info(self) -> workflow.Info:
        """The run's ``workflow.Info``, asked once: the SDK hands every call the same
        object, whose history figures are read live (``get_current_history_*``), and
        looking it up is a context lookup per call, several per step (issue 31)."""
        info = self._run_info
        if info is None:
            info = self._run_info = workflow.info()
        return info

    def _task_marker(self) -> int:
        """Changes with every workflow task (a new task appends its started event)."""
        return self._info().get_current_history_length()

    def _refresh(self) -> None:
        marker = self._task_marker()
        if marker != self._task:
            self._task, self._sent = marker, 0

    def _room(self, size: int, starts: bool) -> str:
        self._refresh()
        if self._sent and self._sent + size > self.max_task_bytes:
            return "next task"
        reserved = self.running + (1 if starts else 0)
        growth = self._sent + size + reserved * self.max_result_bytes * self.results_travel
        info = self._info()
        near = (
            info.get_current_history_size() + growth > self.max_history_bytes
            or info.get_current_history_length() > self.max_events
        )
        if near:
            return "wait" if self.running else "full"
        if starts and self.running >= self.max_pending:
            return "wait"
        return "go"

    def _pace(self) -> None:
        """A 1 ms timer opens the next workflow task when nothing else would."""
        if self._pacer is not None and not self._pacer.done():
            return

        async def tick() -> None:
            await workflow.sleep(0.001)

        self._pacer = asyncio.create_task(tick())

    async def _changed(self, running: int, marker: int) -> None:
        """Until a running call ends, a new workflow task begins, or the queue moves."""
        head = self._queue[0] if self._queue else None
        await workflow.wait_condition(
            lambda: (
                self.running < running
                or self._task_marker() != marker
                or (self._queue[0] if self._queue else None) != head
            )
        )
