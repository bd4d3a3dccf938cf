"""Turning on traces for durable plans: the replay-safe provider and the SDK's plugin.

``tracing_plugin(exporter, ...)`` is the one call an application makes, before it
connects: it sets the process's tracer provider to the SDK's replay-safe one
(``create_tracer_provider``) with the given exporters, and returns
``OpenTelemetryPlugin`` for ``Client.connect(plugins=[...])``. Then workflows record the
plan's spans (``temporal/workflows/replay_safe_telemetry.py``) and the plugin links them to the
activities and child workflows the plan starts, across processes. ``JsonLinesExporter``
writes finished spans to a file, one JSON object per line: what the tests, the crash test's
workers and ``bench/trace_picture.py`` read.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from temporalio.contrib.opentelemetry import OpenTelemetryPlugin, create_tracer_provider

from durable_plan.server.telemetry_exit import keep_flushed


def tracing_plugin(
    *exporters: SpanExporter,
    service_name: str = "durable-plan",
    batch: bool = True,
    temporal_spans: bool = True,
) -> OpenTelemetryPlugin:
    """Set the replay-safe tracer provider with ``exporters``; the plugin to connect with.

    ``batch=False`` exports each span as it ends, inside the workflow task that ends it:
    for file exporters and tests only (a network exporter there would block the task).
    ``temporal_spans``: the SDK's own spans too (StartActivity, RunActivity...), under
    the plan's step spans. The batch processor's last spans are exported when the process
    leaves through ``run_script``, a command or a worker's shutdown (``exit_now``, which
    skips ``atexit``, flushes the provider: ``server/telemetry_exit.py``)."""
    provider = create_tracer_provider(resource=Resource.create({"service.name": service_name}))
    for exporter in exporters:
        processor = BatchSpanProcessor(exporter) if batch else SimpleSpanProcessor(exporter)
        provider.add_span_processor(processor)
    trace.set_tracer_provider(provider)
    keep_flushed(provider)
    return OpenTelemetryPlugin(add_temporal_spans=temporal_spans)


def span_record(span: ReadableSpan) -> dict[str, Any]:
    """A finished span as plain JSON."""
    context = span.get_span_context()
    parent = span.parent
    return {
        "name": span.name,
        "trace_id": f"{context.trace_id:032x}" if context else None,
        "span_id": f"{context.span_id:016x}" if context else None,
        "parent_id": f"{parent.span_id:016x}" if parent else None,
        "start_ns": span.start_time,
        "end_ns": span.end_time,
        "status": span.status.status_code.name,
        "attributes": dict(span.attributes or {}),
        "events": [e.name for e in span.events],
    }


class JsonLinesExporter(SpanExporter):
    """Appends each finished span to ``path`` as one JSON line."""

    def __init__(self, path: str | Path) -> None:
        self._path = Path(path)
        self._lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        lines = "".join(json.dumps(span_record(s), default=str) + "\n" for s in spans)
        with self._lock, self._path.open("a", encoding="utf-8") as out:
            out.write(lines)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        return None


def read_spans(path: str | Path) -> list[dict[str, Any]]:
    """The spans a ``JsonLinesExporter`` wrote (a half-written last line is skipped)."""
    file = Path(path)
    if not file.exists():
        return []
    spans = []
    for line in file.read_text(encoding="utf-8").splitlines():
        try:
            spans.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return spans
