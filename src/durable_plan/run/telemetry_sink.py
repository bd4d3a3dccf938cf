"""Spans and metrics made from a plan's events, for both runners.

The events (``events.py``) are the one record of what a plan did; this sink turns them
into OpenTelemetry spans (a plan span, a span per step that ran, a span per agent round
and tool call, with the plan id, step id, tool, level, attempts and status as attributes
and errors on the span) and metrics (plans started and finished, steps started and failed by tool,
step durations, agent rounds, model tokens). Span times are the events' times, so an
in-process plan and a durable one give the same trace shape.

Durably the tracer and meter must be replay-safe (``temporal/workflows/replay_safe_telemetry.py``
gives this sink the SDK's ``ReplaySafeTracerProvider`` and ``ReplaySafeMeterProvider``, which end
no span and record no metric while a history is replayed): the sink itself keeps no
state a replay could double.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.trace import Span, Status, StatusCode

from durable_plan.language.step_path import StepPathError, parse
from durable_plan.run.events import PlanEvent

INSTRUMENTATION = "durable_plan"


def _ns(seconds: float) -> int:
    return int(seconds * 1_000_000_000)


class Instruments:
    """The metrics of plans, created once per meter."""

    def __init__(self, meter: metrics.Meter) -> None:
        # Plans in flight = started - finished, in the metrics backend: an up-down counter
        # would be wrong per worker (a plan started on one worker ends on another).
        self.plans_started = meter.create_counter(
            "durable_plan.plans.started", description="Plans started"
        )
        self.plans_finished = meter.create_counter(
            "durable_plan.plans.finished", description="Plans finished, by status"
        )
        self.started = meter.create_counter(
            "durable_plan.steps.started", description="Steps started, by tool"
        )
        self.failed = meter.create_counter(
            "durable_plan.steps.failed", description="Steps failed, by tool"
        )
        self.duration = meter.create_histogram(
            "durable_plan.step.duration", unit="ms", description="Step durations, by tool"
        )
        self.rounds = meter.create_counter(
            "durable_plan.agent.rounds", description="Model rounds of agent steps"
        )
        self.tokens = meter.create_counter(
            "durable_plan.model.tokens", description="Model tokens of agent steps, by direction"
        )


_INSTRUMENTS: dict[int, tuple[metrics.Meter, Instruments]] = {}


def instruments_for(meter: metrics.Meter) -> Instruments:
    cached = _INSTRUMENTS.get(id(meter))
    if cached is None or cached[0] is not meter:
        cached = (meter, Instruments(meter))
        _INSTRUMENTS[id(meter)] = cached
    return cached[1]


class TelemetrySink:
    """An event sink (``Emitter``) that records spans and metrics.

    ``clock`` gives span times in nanoseconds; None: the events' own times (in-process,
    the wall clock when they happened). Durably an event's time is the workflow task's,
    which is right for the event and early for a span, so workflows pass the wall clock
    (the workflow's time while replaying, as the SDK's replay-safe tracer does): span
    times are telemetry, never workflow state."""

    def __init__(
        self,
        tracer: trace.Tracer,
        meter: metrics.Meter | None,
        clock: Callable[[], int] | None = None,
    ) -> None:
        self._clock = clock
        self._origin = clock() if clock is not None else None
        """Durably, when this workflow began: an agent step's child has no step_started, so
        its first round starts here."""
        self._tracer = tracer
        self._metrics = instruments_for(meter) if meter is not None else None
        self._plan: Span | None = None
        self._steps: dict[str, Span] = {}
        self._mark: dict[str, int] = {}  # agent step -> when its last round or call ended (ns)

    def _time(self, event: PlanEvent) -> int:
        return self._clock() if self._clock is not None else _ns(event.at)

    def __call__(self, event: PlanEvent) -> None:
        handler = getattr(self, f"_on_{event.kind}", None)
        if handler is not None:
            handler(event)

    @contextmanager
    def activate(self, step_id: str) -> Iterator[None]:
        """Make the step's span current, so what the runner starts for it (an activity,
        an agent step's child workflow) is traced under it."""
        span = self._steps.get(step_id.split("[", 1)[0])
        if span is None:
            yield
            return
        # No exception recorded here: a replay-safe span that recorded one that is not a
        # Temporal failure (a cancellation) would skip its end.
        with trace.use_span(
            span, end_on_exit=False, record_exception=False, set_status_on_exception=False
        ):
            yield

    # -- the plan ---------------------------------------------------------------------

    def _on_plan_started(self, event: PlanEvent) -> None:
        steps = (event.detail or {}).get("steps", [])
        self._plan = self._tracer.start_span(
            "plan",
            start_time=self._time(event),
            attributes={"durable_plan.plan.id": event.plan, "durable_plan.plan.steps": len(steps)},
        )
        if self._metrics is not None:
            self._metrics.plans_started.add(1)

    def _on_plan_exited(self, event: PlanEvent) -> None:
        if self._plan is not None:
            self._plan.add_event(
                "plan_exited",
                {"durable_plan.step.id": event.step or "", "status": event.status or ""},
                timestamp=self._time(event),
            )

    def _on_plan_finished(self, event: PlanEvent) -> None:
        span = self._plan
        if span is None:  # a plan rejected before it started: one span that says why
            span = self._tracer.start_span(
                "plan",
                start_time=self._time(event),
                attributes={"durable_plan.plan.id": event.plan},
            )
        if self._metrics is not None:
            self._metrics.plans_finished.add(1, {"status": event.status or ""})
        # A plan that ended as a whole (cancelled, failed) leaves steps running: their
        # spans end with it, so none is left open (and never exported).
        for step, open_span in list(self._steps.items()):
            open_span.set_status(Status(StatusCode.ERROR, f"the plan ended: {event.status}"))
            open_span.end(end_time=self._time(event))
            del self._steps[step]
        span.set_attribute("durable_plan.plan.status", event.status or "")
        _set_usage(span, event.usage)
        if event.status != "ok":
            span.set_status(Status(StatusCode.ERROR, event.error or "a step failed"))
        span.end(end_time=self._time(event))
        self._plan = None

    # -- steps ------------------------------------------------------------------------

    def _on_step_started(self, event: PlanEvent) -> None:
        parent = trace.set_span_in_context(self._plan) if self._plan is not None else None
        step = event.step or ""
        self._steps[step] = self._tracer.start_span(
            f"step {step}",
            context=parent,
            start_time=self._time(event),
            attributes={
                "durable_plan.plan.id": event.plan,
                "durable_plan.step.id": step,
                "durable_plan.step.path": event.path or step,
                "durable_plan.tool": event.tool or "",
                "durable_plan.level": event.level or 0,
            },
        )
        self._mark[step] = self._time(event)
        if self._metrics is not None:
            self._metrics.started.add(1, {"tool": event.tool or ""})

    def _on_step_finished(self, event: PlanEvent) -> None:
        span = self._steps.pop(event.step or "", None)
        if self._metrics is not None and span is not None:
            tool = {"tool": event.tool or "", "status": event.status or ""}
            self._metrics.duration.record(event.duration_ms or 0.0, tool)
            if event.status == "failed":
                self._metrics.failed.add(1, {"tool": event.tool or ""})
        if span is None:
            if self._plan is not None:  # skipped, not taken, reused: a mark on the plan
                self._plan.add_event(
                    f"step {event.step} {event.status}",
                    {"durable_plan.step.id": event.step or "", "reason": event.error or ""},
                    timestamp=self._time(event),
                )
            return
        span.set_attributes(
            {
                "durable_plan.status": event.status or "",
                "durable_plan.attempts": event.attempts or 0,
                "durable_plan.duration_ms": event.duration_ms or 0.0,
            }
        )
        _set_usage(span, event.usage)
        if event.status == "failed":
            _record_error(span, event.error or "failed", self._time(event))
        span.end(end_time=self._time(event))

    def _on_item_finished(self, event: PlanEvent) -> None:
        span = self._steps.get(event.step or "")
        if span is not None:
            attributes: dict[str, Any] = {
                "index": event.item or 0,
                "status": event.status or "",
                "durable_plan.step.path": event.path or "",
            }
            if event.error:
                attributes["error"] = event.error
            span.add_event("item_finished", attributes, timestamp=self._time(event))

    def _on_awaiting_approval(self, event: PlanEvent) -> None:
        self._step_mark(event, "awaiting_approval")

    def _on_approval_decided(self, event: PlanEvent) -> None:
        self._step_mark(event, "approval_decided")

    def _step_mark(self, event: PlanEvent, name: str) -> None:
        span = self._steps.get(_top(event.step or ""))
        if span is not None:
            call = event.path or event.step or ""
            span.add_event(name, {"call": call, "status": event.status or ""}, self._time(event))

    # -- agent steps --------------------------------------------------------------------

    def _on_agent_round(self, event: PlanEvent) -> None:
        step = event.step or ""
        now = self._time(event)
        span = self._tracer.start_span(
            f"agent round {event.round}",
            context=self._context_of(step),
            start_time=self._mark.get(step, self._origin or now),
            attributes={
                "durable_plan.plan.id": event.plan,
                "durable_plan.step.id": step,
                "durable_plan.step.path": event.path or step,
                "durable_plan.round": event.round or 0,
            },
        )
        _set_usage(span, event.usage)
        if event.status == "failed":
            _record_error(span, event.error or "the model call failed", now)
        span.end(end_time=now)
        self._mark[step] = now
        if self._metrics is not None:
            self._metrics.rounds.add(1)
            for direction in ("input", "output"):
                count = (event.usage or {}).get(direction, 0)
                if count:
                    self._metrics.tokens.add(count, {"direction": direction})

    def _on_agent_tool_call(self, event: PlanEvent) -> None:
        step = event.step or ""
        now = self._time(event)
        span = self._tracer.start_span(
            f"tool call {event.tool}",
            context=self._context_of(step),
            start_time=self._mark.get(step, self._origin or now),
            attributes={
                "durable_plan.plan.id": event.plan,
                "durable_plan.step.id": step,
                "durable_plan.step.path": event.path or step,
                "durable_plan.tool": event.tool or "",
                "durable_plan.round": event.round or 0,
                "durable_plan.status": event.status or "",
            },
        )
        if event.status == "failed":
            span.set_status(Status(StatusCode.ERROR, "the tool call failed"))
        span.end(end_time=now)
        self._mark[step] = now

    def _context_of(self, step: str) -> Any:
        """Under the step's span in-process; durably the agent step's child workflow has
        no step span of its own and its context is the one the plan gave the child."""
        span = self._steps.get(_top(step))  # an item's agent step: its map's
        return trace.set_span_in_context(span) if span is not None else None


def _top(call: str) -> str:
    """The top-level step of a call's path (an item's, an agent's call's): its span's key."""
    try:
        return parse(call).step
    except StepPathError:
        return call


def _set_usage(span: Span, usage: dict[str, int] | None) -> None:
    for key, value in (usage or {}).items():
        span.set_attribute(f"durable_plan.tokens.{key}", value)


def _record_error(span: Span, error: str, at: int) -> None:
    """The error on the span as OpenTelemetry's exception event, without an exception
    object (a replay-safe span skips its end after ``record_exception`` of anything but
    a Temporal failure)."""
    span.set_status(Status(StatusCode.ERROR, error))
    span.add_event(
        "exception",
        {"exception.type": "StepFailed", "exception.message": error},
        timestamp=at,
    )


def is_configured(provider: object) -> bool:
    """Did the application set an OpenTelemetry provider (not the API's no-op default)?"""
    name = type(provider).__name__
    return name not in {
        "ProxyTracerProvider",
        "NoOpTracerProvider",
        "_ProxyMeterProvider",
        "NoOpMeterProvider",
    }


def telemetry_sink() -> TelemetrySink | None:
    """In-process: a sink when the application set a tracer provider (metrics too when it
    set a meter provider); None costs nothing per event."""
    tracer_provider = trace.get_tracer_provider()
    if not is_configured(tracer_provider):
        return None
    meter_provider = metrics.get_meter_provider()
    meter = meter_provider.get_meter(INSTRUMENTATION) if is_configured(meter_provider) else None
    return TelemetrySink(tracer_provider.get_tracer(INSTRUMENTATION), meter)
