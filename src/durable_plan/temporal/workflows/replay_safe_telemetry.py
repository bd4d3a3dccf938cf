"""OpenTelemetry in workflow code: the plan's spans and metrics, only when replay-safe.

A span ended twice (once live, once when another worker replays the history) would be a
duplicate in every trace; a counter added twice, a wrong metric. So a workflow records
telemetry only when the process's tracer provider is the SDK's ``ReplaySafeTracerProvider``
(``temporalio.contrib.opentelemetry.create_tracer_provider``, with ``OpenTelemetryPlugin``
on the client), and records metrics through ``ReplaySafeMeterProvider``: both skip
while a history is replayed, and span ids come from the workflow's seeded random, so the
spans of a replayed task are the same spans. ``tracing_plugin`` (``tracing.py``) sets
this up.
"""

from __future__ import annotations

import time

from opentelemetry import metrics, trace
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from temporalio.contrib.opentelemetry import ReplaySafeMeterProvider, ReplaySafeTracerProvider

    from durable_plan.run.telemetry_sink import INSTRUMENTATION, TelemetrySink, is_configured

_METERS: dict[int, tuple[metrics.MeterProvider, metrics.Meter]] = {}


def workflow_telemetry() -> TelemetrySink | None:
    """A sink for this workflow's events, or None when telemetry is off or not replay-safe."""
    tracer_provider = trace.get_tracer_provider()
    if not isinstance(tracer_provider, ReplaySafeTracerProvider):
        return None
    return TelemetrySink(
        tracer_provider.get_tracer(INSTRUMENTATION), _replay_safe_meter(), clock=span_clock
    )


def span_clock() -> int:
    """Span times: the wall clock live, the workflow's time while replaying (the spans a
    replay starts end live later; those it ends are never exported). Telemetry only: no
    workflow decision reads it."""
    if workflow.unsafe.is_replaying_history_events():
        return workflow.time_ns()
    return time.time_ns()


def _replay_safe_meter() -> metrics.Meter | None:
    provider = metrics.get_meter_provider()
    if not is_configured(provider):
        return None
    cached = _METERS.get(id(provider))
    if cached is None or cached[0] is not provider:
        safe = provider if isinstance(provider, ReplaySafeMeterProvider) else None
        meter = (safe or ReplaySafeMeterProvider(provider)).get_meter(INSTRUMENTATION)
        cached = (provider, meter)
        _METERS[id(provider)] = cached
    return cached[1]
