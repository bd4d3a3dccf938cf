"""Replay recorded histories against this version: what a user runs before deploying it.

A history replays when this version's workflow code issues, for every event of it, the
command the recording version issued. One that does not would fail a plan in flight
with a nondeterminism error after the upgrade. ``replay`` answers per history: ok, or
where the two versions part (the first event that diverges, as Temporal names it).

Used by ``durable-plan replay`` and by the test that replays every release's corpus.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer

from durable_plan.language.limits import brief

__all__ = ["ReplayOutcome", "plan_workflows", "replay"]

_EVENT = re.compile(r"HistoryEvent\(id: (\d+), ([A-Za-z]+)")


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

    @property
    def ok(self) -> bool:
        return self.error is None

    def line(self) -> str:
        """``ok  name  Type id`` or ``FAIL  name  Type id: event N (Type): message``."""
        head = f"{self.name}  {self.workflow_type} {self.workflow_id}"
        if self.ok:
            return f"ok    {head}"
        where = f"event {self.event_id} ({self.event_type}): " if self.event_id else ""
        return f"FAIL  {head}: {where}{self.error}"


def plan_workflows() -> list[type]:
    """This package's workflows, which every plan history needs."""
    from durable_plan.temporal.agent_workflow import AgentStepWorkflow
    from durable_plan.temporal.workflow import PlanWorkflow

    return [PlanWorkflow, AgentStepWorkflow]


async def replay(
    histories: Iterable[tuple[str, WorkflowHistory]],
    *,
    workflows: Sequence[type] = (),
    plugins: Sequence[Any] = (),
    **replayer_options: Any,
) -> list[ReplayOutcome]:
    """Replay each ``(name, history)`` with this package's workflows plus ``workflows``
    (the user's conversation workflows) and ``plugins`` (``StrandsPlugin(models={})`` for
    histories written through its converter, ``EncryptionPlugin(keys)`` for sealed ones)."""
    named = list(histories)
    replayer = Replayer(
        workflows=[*plan_workflows(), *workflows], plugins=list(plugins), **replayer_options
    )
    by_run = {(h.workflow_id, _run_id(h)): name for name, h in named}
    outcomes: list[ReplayOutcome] = []

    async def each() -> AsyncIterator[WorkflowHistory]:
        for _, history in named:
            yield history

    async with replayer.workflow_replay_iterator(each()) as results:
        async for result in results:
            history = result.history
            name = by_run.get((history.workflow_id, _run_id(history)), history.workflow_id)
            outcomes.append(_outcome(name, history, result.replay_failure))
    return outcomes


def _outcome(name: str, history: WorkflowHistory, failure: Exception | None) -> ReplayOutcome:
    workflow_type = _workflow_type(history)
    if failure is None:
        return ReplayOutcome(name, history.workflow_id, workflow_type)
    text = " ".join(str(failure).split())
    found = _EVENT.search(text)
    message = brief(text, 500, quote=False)
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
