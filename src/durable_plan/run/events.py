"""What happens in a plan, as events: one vocabulary, emitted in one place, for both runners.

``PlanRun`` (steps, items, exits, the end), ``RoundTracker`` (an agent step's rounds and
tool calls) and the approval desk emit through an ``Emitter``; the runner decides where
the events go: durably into the workflow's Workflow Stream (``temporal/workflows/event_stream.py``),
in-process to a callback or an ``EventQueue``; spans and metrics are made from the same
events (``telemetry_sink.py``), so what a trace shows and what a subscriber sees cannot drift.

An event is small and bounded whatever the plan does: no arguments or results, error
texts cut to ``MAX_EVENT_ERROR_CHARS`` and every other text (a tool name a model made up)
to ``MAX_EVENT_TEXT_CHARS``, and at most ``MAX_ITEM_EVENTS`` item events per plan (later
items have no events of their own; their step's result counts them). Nothing here reads
a clock: the runner passes ``now`` (durably ``workflow.time()``, so a replay rebuilds the
same events and publishes nothing twice).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, Literal

from durable_plan.language.plan_limits import truncate_text
from durable_plan.language.step_path import rooted

EventKind = Literal[
    "plan_started",
    "step_started",
    "step_finished",
    "awaiting_approval",
    "approval_decided",
    "paused",
    "resumed",
    "agent_round",
    "agent_tool_call",
    "item_finished",
    "plan_exited",
    "plan_finished",
]
EVENT_KINDS: tuple[str, ...] = EventKind.__args__  # type: ignore[attr-defined]
MAX_EVENT_ERROR_CHARS = 500
MAX_EVENT_TEXT_CHARS = 200
MAX_ITEM_EVENTS = 1_000
"""Per plan: a map of a thousand items under a reduce of a thousand must not put two
thousand events into every subscriber's poll results (and the history they land in)."""
_SHORTEST_LIMIT = min(MAX_EVENT_ERROR_CHARS, MAX_EVENT_TEXT_CHARS)
"""A text no longer than this is kept whole under either limit (``emit`` cuts only longer)."""
EVENTS_TOPIC = "events"
"""The Workflow Streams topic of a plan's (and an agent step's) events."""


@dataclass(frozen=True)
class PlanEvent:
    """One thing that happened; fields a kind does not use stay None (and off the wire)."""

    kind: EventKind
    plan: str
    at: float
    """Seconds since the epoch: durably the workflow task's time, in-process the wall clock."""
    step: str | None = None
    tool: str | None = None
    level: int | None = None
    status: str | None = None
    duration_ms: float | None = None
    attempts: int | None = None
    error: str | None = None
    item: int | None = None
    round: int | None = None
    usage: dict[str, int] | None = None
    """Model tokens (``input``, ``output``, ``total``): an agent round's, an agent step's,
    or the plan's total on ``plan_finished``."""
    detail: dict[str, Any] | None = None
    """Per kind: ``plan_started`` the steps (id, tool, level); ``awaiting_approval`` the
    arguments' digest; ``step_finished`` of a map its item counts; ``plan_exited`` why."""
    path: str | None = None
    """The call's step path from the top-level plan's root (``language.step_path``:
    ``e1/do.3``, ``e1/agent.2/lookup``), when it is not ``step`` itself."""
    offset: int | None = field(default=None, compare=False)
    """The event's place in its stream, set by a subscriber (None in-process)."""

    def to_wire(self) -> dict[str, Any]:
        """The fields that are set, by reference: published at once (the stream encodes it
        as it is appended), so no deep copy (``asdict``'s was a tenth of a plan's work).
        ``kind``, ``plan`` and ``at`` come first; the rest in field order for an event built
        by ``__init__``, in the emitter's keyword order for one ``made`` (the stream's
        encoder sorts keys, so the published text is the same either way)."""
        return {k: v for k, v in self.__dict__.items() if v is not None and k != "offset"}

    @classmethod
    def made(cls, kind: EventKind, plan: str, at: float, values: dict[str, Any]) -> PlanEvent:
        """The event as ``PlanEvent(kind=..., plan=..., at=..., **values)`` makes it, without
        the frozen dataclass's sixteen ``object.__setattr__`` calls (a third of what an
        event cost a durable plan; ``Emitter.emit`` makes two per step). ``values`` must
        name fields of this class (``emit``'s callers are this package's runners).

        Only the fields set go into the instance: a field left out reads its default
        from the class (a dataclass keeps each field's default there), so equality, the
        hash and the repr are ``__init__``'s and ``to_wire`` has the same keys and values
        (in the emitter's order after the first three), and the event is built and read in
        fewer steps (issue 31)."""
        if not _FIELD_DEFAULTS.keys() >= values.keys():
            unknown = sorted(values.keys() - _FIELD_DEFAULTS.keys())
            raise TypeError(f"PlanEvent has no field {unknown[0]!r}")
        event = object.__new__(cls)
        state = event.__dict__
        state["kind"] = kind
        state["plan"] = plan
        state["at"] = at
        for key, value in values.items():
            if value is not None:
                state[key] = value
        return event

    @classmethod
    def from_wire(cls, raw: Mapping[str, Any], offset: int | None = None) -> PlanEvent:
        names = {f.name for f in fields(cls)}
        values = {k: v for k, v in raw.items() if k in names and k != "offset"}
        return cls(**values, offset=offset)


_FIELD_DEFAULTS: dict[str, Any] = {
    f.name: f.default for f in fields(PlanEvent) if f.name not in ("kind", "plan", "at")
}
# ``PlanEvent.made`` sets only the fields given, in place of ``__init__``: every other one
# must read its default from the class (a field with a factory or without a default would
# need ``__init__``).
assert MISSING not in _FIELD_DEFAULTS.values() and not hasattr(PlanEvent, "__post_init__")
assert all(getattr(PlanEvent, name) is value for name, value in _FIELD_DEFAULTS.items())

EventSink = Callable[[PlanEvent], None]


def add_usage(
    total: dict[str, int] | None, more: Mapping[str, int] | None
) -> dict[str, int] | None:
    """Token counts summed key by key (None: nothing counted yet)."""
    if not more:
        return total
    summed = dict(total or {})
    for key, value in more.items():
        summed[key] = summed.get(key, 0) + int(value)
    return summed


def usage_of(strands_usage: Mapping[str, Any] | None) -> dict[str, int] | None:
    """Strands' ``Usage`` (``inputTokens``...) in our names; None when the model said nothing."""
    if not strands_usage:
        return None
    usage = {
        "input": int(strands_usage.get("inputTokens", 0) or 0),
        "output": int(strands_usage.get("outputTokens", 0) or 0),
        "total": int(strands_usage.get("totalTokens", 0) or 0),
    }
    return usage if any(usage.values()) else None


class Emitter:
    """Makes the events of one plan (or one agent step) and hands them to its sinks.

    ``now`` is the runner's clock; ``sinks`` receive every event in order, synchronously
    (a sink must not block: the durable one appends to the stream's log, the in-process
    queue puts without waiting). A sink that raises is the runner's bug and propagates.
    """

    def __init__(self, plan_id: str, now: Callable[[], float], sinks: list[EventSink]) -> None:
        self.plan_id = plan_id
        self.path_prefix = ""
        """The path of the call that started this run (a saved plan's): every ``step`` and
        ``path`` given is inside the run, and the event names it from the root."""
        self._now = now
        self._sinks = list(sinks)
        self._items = 0
        self.items_dropped = 0

    @property
    def active(self) -> bool:
        return bool(self._sinks)

    def emit(self, kind: EventKind, **values: Any) -> None:
        if not self._sinks:
            return
        if kind == "item_finished":
            if self._items >= MAX_ITEM_EVENTS:
                self.items_dropped += 1
                return
            self._items += 1
        if self.path_prefix or "path" in values:
            _root(values, self.path_prefix)
        for key, value in values.items():
            if isinstance(value, str) and len(value) > _SHORTEST_LIMIT:
                limit = MAX_EVENT_ERROR_CHARS if key == "error" else MAX_EVENT_TEXT_CHARS
                values[key] = truncate_text(value, limit)
        event = PlanEvent.made(kind, self.plan_id, self._now(), values)
        for sink in self._sinks:
            sink(event)


def _root(values: dict[str, Any], prefix: str) -> None:
    """``path`` from the root (``step_path.rooted``), left off when it is ``step`` itself."""
    own = values.get("path") or values.get("step")
    if own is None:
        return
    path = rooted(prefix, own)
    if path == values.get("step"):
        values.pop("path", None)
    else:
        values["path"] = path


SILENT = Emitter("", lambda: 0.0, [])
"""An emitter with no sinks: what a run gets when nobody listens (costs one check)."""

_CURRENT_STEP: contextvars.ContextVar[tuple[Emitter, str]] = contextvars.ContextVar(
    "durable_plan_current_step", default=(SILENT, "")
)


def step_context(events: Emitter, step_id: str) -> contextvars.Context:
    """A copy of the current context in which ``current_step()`` is this step: the
    in-process runner starts each step's task in one, so an agent step's loop (reached
    through the invoker, which knows only a tool and its arguments) emits as its step."""
    context = contextvars.copy_context()
    context.run(_CURRENT_STEP.set, (events, step_id))
    return context


def current_step() -> tuple[Emitter, str]:
    """The emitter and step id of the in-process step running in this task."""
    return _CURRENT_STEP.get()


class EventQueue:
    """An in-process sink that is also an async iterator: pass it as ``on_event``, then
    ``async for event in queue.run(execute_plan(..., on_event=queue))``; the plan runs as
    a task, iteration ends with it (its exception is raised there, a rejected plan's
    included), and ``result`` holds its ``PlanResult``. Iterating the queue itself ends
    after ``plan_finished`` (or ``close()``)."""

    def __init__(self) -> None:
        self._queue: asyncio.Queue[PlanEvent | None] = asyncio.Queue()
        self.result: Any = None

    def __call__(self, event: PlanEvent) -> None:
        self._queue.put_nowait(event)
        if event.kind == "plan_finished":
            self._queue.put_nowait(None)

    def close(self) -> None:
        self._queue.put_nowait(None)

    def __aiter__(self) -> AsyncIterator[PlanEvent]:
        return self._events()

    async def run(self, plan: Coroutine[Any, Any, Any]) -> AsyncIterator[PlanEvent]:
        task = asyncio.ensure_future(plan)
        task.add_done_callback(lambda _t: self.close())
        try:
            async for event in self:
                yield event
            self.result = await task
        finally:
            if not task.done():
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task

    async def _events(self) -> AsyncIterator[PlanEvent]:
        while (event := await self._queue.get()) is not None:
            yield event


class EventLedger:
    """The live ledger a subscriber keeps from a plan's events alone (the CLI's table):
    the lines of ``PlanWorkflow.progress``, without asking the workflow."""

    def __init__(self) -> None:
        self.lines: dict[str, dict[str, Any]] = {}
        self.finished: PlanEvent | None = None

    def apply(self, event: PlanEvent) -> None:
        if event.kind == "plan_started" and event.detail:
            for step in event.detail.get("steps", []):
                self.lines.setdefault(
                    step["id"],
                    {
                        "id": step["id"],
                        "tool": step["tool"],
                        "phase": "pending",
                        "level": step["level"],
                        "duration_ms": 0.0,
                        "attempts": 0,
                        "error": None,
                    },
                )
            return
        line = self.lines.get(event.step or "")
        if event.kind == "plan_finished":
            self.finished = event
        if line is None:
            return
        if event.kind == "step_started":
            line["phase"] = "running"
        elif event.kind == "awaiting_approval":
            line["phase"] = "awaiting_approval"
            if event.detail:
                line["args_digest"] = event.detail.get("args_digest")
        elif event.kind == "approval_decided":
            line["phase"] = "running"
            line.pop("args_digest", None)
        elif event.kind == "paused":
            line["phase"] = "paused"
        elif event.kind == "resumed":
            line["phase"] = "running"
        elif event.kind == "item_finished":
            items = line.setdefault("items", {"items": None, "done": 0, "failed": 0})
            items["items"] = (event.detail or {}).get("of", items["items"])
            items["done"] += 1
            items["failed"] += 1 if event.status == "failed" else 0
        elif event.kind == "agent_round":
            line["round"] = event.round
        elif event.kind == "step_finished":
            line.pop("items", None)
            line.pop("round", None)
            line.update(
                phase=event.status,
                duration_ms=event.duration_ms or 0.0,
                attempts=event.attempts or 0,
                error=event.error,
            )
            line.pop("args_digest", None)

    def progress(self) -> list[dict[str, Any]]:
        return [dict(line) for line in self.lines.values()]
