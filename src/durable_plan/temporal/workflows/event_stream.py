"""A durable plan's events on its Workflow Stream (``temporalio.contrib.workflow_streams``).

The workflow appends each event to the stream's log in workflow code; subscribers read it
through the stream's poll update (``PlanHandle.events``), each batch of events in one
update, so a plan with no subscriber pays for its events in memory only, and a watched one
pays one update per batch, not per event. A replay rebuilds the log from the same code
and publishes nothing twice; a subscriber resumes from the offset it saw last.

Pinned behaviour of the experimental module we rely on (temporalio 1.35): the stream is
constructed from the workflow's ``__init__``; ``detach_pollers`` releases waiting polls
with what is left; a closed workflow's remaining items are read by query.
"""

from __future__ import annotations

import inspect
import typing
from contextlib import AbstractContextManager, nullcontext

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from temporalio.contrib.workflow_streams import WorkflowStream, WorkflowTopicHandle

    from durable_plan.language.json_text import sorted_json
    from durable_plan.run.events import EVENTS_TOPIC, Emitter, EventSink, PlanEvent
    from durable_plan.run.telemetry_sink import TelemetrySink
    from durable_plan.temporal.wire.messages import json_plain_payload
    from durable_plan.temporal.workflows.replay_safe_telemetry import workflow_telemetry


def _resolve_handler_annotations(stream_class: type) -> int:
    """Turn the stream's handler annotations from text into the types they name, and
    record each handler's signature, once.

    ``WorkflowStream.__init__`` registers five bound methods with ``workflow.set_*_handler``
    on every run, and the SDK reads each one's signature and type hints then
    (``_type_hints_from_func``, temporalio 1.35): its module's annotations are text (``from
    __future__ import annotations``), so ``typing.get_type_hints`` compiled seven
    ``ForwardRef``s per plan, about 0.5 ms of each plan's worker CPU (issue 31), and
    ``inspect.signature`` rebuilt each handler's parameters from its code. The types put in
    their place are what ``get_type_hints`` returns for them, and the signature is what
    ``inspect.signature`` computes from them (``__signature__``, which it reads first), so
    every later reading is the same, only cheaper. An annotation that does not resolve at
    run time stays text (and that handler is left as it is)."""
    resolved = 0
    for name, method in vars(stream_class).items():
        if not name.startswith("_") or name.startswith("__"):
            continue  # the handlers are its private methods; its public API stays as written
        notes = getattr(method, "__annotations__", None)
        if not isinstance(notes, dict) or not any(isinstance(n, str) for n in notes.values()):
            continue
        try:
            method.__annotations__ = typing.get_type_hints(method)
        except Exception:  # a name only a type checker sees: that one stays text
            continue
        method.__signature__ = inspect.signature(method)
        resolved += 1
    return resolved


_resolve_handler_annotations(WorkflowStream)


class PlanEventStream:
    """The workflow's stream and its events topic; construct in the workflow's __init__."""

    def __init__(self) -> None:
        self._stream = WorkflowStream()
        self._topic: WorkflowTopicHandle[dict[str, object]] = self._stream.topic(
            EVENTS_TOPIC, type=dict
        )
        self.published = 0

    def __call__(self, event: PlanEvent) -> None:
        # The payload the JSON converter would make of the event (a plain dict of JSON
        # values), made here: asking the workflow's converter builds a context-bound copy
        # of it per call, which was most of what an event cost. Subscribers decode alike.
        # default=str: an event never fails the workflow task (its values are plain JSON,
        # and anything else is written as text rather than retried forever).
        self._topic.publish(json_plain_payload(sorted_json(event.to_wire()).encode()))
        self.published += 1

    async def close(self) -> None:
        """Hand waiting subscribers the last events, then let the workflow end: a poll
        left waiting would be cut off (and warned about) when the run completes."""
        self._stream.detach_pollers()
        await workflow.wait_condition(workflow.all_handlers_finished)


def workflow_emitter(
    plan_id: str, stream: PlanEventStream | None
) -> tuple[Emitter, TelemetrySink | None]:
    """The events of this workflow: to its stream (when on) and to spans and metrics when
    the worker's process set up OpenTelemetry the replay-safe way (that sink is returned
    too: the workflow makes a step's span current while it starts the step's work)."""
    sinks: list[EventSink] = [stream] if stream is not None else []
    telemetry = workflow_telemetry()
    if telemetry is not None:
        sinks.append(telemetry)
    return Emitter(plan_id, workflow.time, sinks), telemetry


def traced(telemetry: TelemetrySink | None, step_id: str) -> AbstractContextManager[None]:
    """The step's span current (for the activity or child it starts), or nothing."""
    return telemetry.activate(step_id) if telemetry is not None else nullcontext()
