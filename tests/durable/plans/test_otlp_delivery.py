"""Spans reach a real OTLP collector when a process leaves (issue 46, item 11).

The README's set-up, ``tracing_plugin(OTLPSpanExporter(endpoint=...))`` with its default
batch processor, delivered 0 spans: our entry points leave with ``os._exit``, which skips
``atexit``, where OpenTelemetry would have exported the batch. Here a small collector
speaks OTLP over HTTP (``POST /v1/traces``, protobuf ``ExportTraceServiceRequest``, as an
OpenTelemetry Collector does) and counts what arrives from each exit path: a script
through ``run_script`` (the README's example, edited as the README says), Ctrl-C and
SIGTERM on such a script (``worker.py`` leaves this way), and ``durable-plan worker``
stopped with SIGTERM. ``OTEL_BSP_SCHEDULE_DELAY`` is a minute in every child, so only the
exit's flush can deliver the spans. A collector that never answers costs the exit a
bounded wait, said on stderr.

Every child and every wait has a timeout; the collector's threads end with the test.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from durable_plan.server.telemetry_exit import FLUSH_TIMEOUT_S
from tests.support.helpers import arun_cli, finish, spawn_cli

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "watch_a_plan.py"
PARTY = str(ROOT / "examples" / "plans" / "party_round.yaml")
FILE_EXPORTER = "tracing_plugin(JsonLinesExporter(spans), batch=False)"
"""What the README tells a reader to replace with ``OTLPSpanExporter(endpoint=...)``."""
OTLP_IMPORT = "from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter\n"
ONLY_THE_EXIT_FLUSHES = {"OTEL_BSP_SCHEDULE_DELAY": "60000"}
"""The batch processor's timer would export after 5 s; a minute leaves it to the exit."""


@dataclass
class Received:
    """What the collector was sent: each span's name and its resource's service name."""

    spans: list[tuple[str, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def names(self) -> list[str]:
        with self.lock:
            return [name for name, _ in self.spans]

    def services(self) -> set[str]:
        with self.lock:
            return {service for _, service in self.spans}


class _Collector(ThreadingHTTPServer):
    daemon_threads = True
    received: Received


class _OtlpHandler(BaseHTTPRequestHandler):
    timeout = 10  # a client that stops mid-request cannot hold a handler thread
    server: _Collector

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        if self.path != "/v1/traces":
            self.send_error(404)
            return
        request = ExportTraceServiceRequest.FromString(body)
        with self.server.received.lock:
            for resource_spans in request.resource_spans:
                service = next(
                    (
                        a.value.string_value
                        for a in resource_spans.resource.attributes
                        if a.key == "service.name"
                    ),
                    "",
                )
                for scope_spans in resource_spans.scope_spans:
                    self.server.received.spans.extend((s.name, service) for s in scope_spans.spans)
        reply = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, format: str, *args: object) -> None:
        return None  # quiet: pytest shows the assertions


@contextlib.contextmanager
def otlp_collector() -> Iterator[tuple[str, Received]]:
    """An OTLP/HTTP trace receiver on a free local port: (its /v1/traces URL, what came)."""
    server = _Collector(("127.0.0.1", 0), _OtlpHandler)
    server.received = Received()
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1})
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1/traces", server.received
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def _env(**extra: str) -> dict[str, str]:
    paths = [str(ROOT / "examples"), str(ROOT), os.environ.get("PYTHONPATH", "")]
    return {
        **os.environ,
        **ONLY_THE_EXIT_FLUSHES,
        "PYTHONPATH": os.pathsep.join(p for p in paths if p),
        **extra,
    }


def _script(tmp_path: Path, endpoint: str, body: str, *, timeout: int = 10) -> Path:
    """A script that sends its spans to ``endpoint`` through ``tracing_plugin``."""
    script = tmp_path / "traced.py"
    script.write_text(
        "import asyncio, os, signal\n"
        "from opentelemetry import trace\n"
        + OTLP_IMPORT
        + "from durable_plan import run_script, tracing_plugin\n"
        f"tracing_plugin(OTLPSpanExporter(endpoint={endpoint!r}, timeout={timeout}))\n" + body,
        encoding="utf-8",
    )
    return script


def test_the_readme_otlp_setup_delivers_the_plans_spans(
    temporal_target: str, tmp_path: Path
) -> None:
    """``examples/watch_a_plan.py`` with the file exporter replaced as the README says: the
    collector gets the plan's spans (it got none while ``run_script`` left unflushed)."""
    source = EXAMPLE.read_text(encoding="utf-8")
    assert FILE_EXPORTER in source, "the README tells readers to replace this call; keep both"
    with otlp_collector() as (endpoint, received):
        script = tmp_path / "watch_a_plan_otlp.py"
        otlp = f"tracing_plugin(OTLPSpanExporter(endpoint={endpoint!r}))"  # default: batch
        script.write_text(OTLP_IMPORT + source.replace(FILE_EXPORTER, otlp), encoding="utf-8")
        done = subprocess.run(
            [sys.executable, str(script)],
            cwd=ROOT,
            env=_env(TEMPORAL_ADDRESS=temporal_target),
            capture_output=True,
            text=True,
            timeout=180,
        )
        names = received.names()
    assert done.returncode == 0, done.stdout + done.stderr
    assert "durable: 6 damage ok" in done.stdout
    assert names, f"the collector got no span; stderr: {done.stderr}"
    assert {"plan", "step attack", "step damage", "step lookup"} <= set(names), names
    assert received.services() == {"durable-plan"}
    assert "telemetry:" not in done.stderr, done.stderr


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_script_stopped_by_a_signal_delivers_its_spans(
    tmp_path: Path, signum: signal.Signals, status: int
) -> None:
    """Ctrl-C or SIGTERM on a ``run_script`` process (``worker.py``, the examples): the
    spans it ended before are exported on the way out."""
    with otlp_collector() as (endpoint, received):
        script = _script(
            tmp_path,
            endpoint,
            "async def main() -> None:\n"
            "    with trace.get_tracer('test').start_as_current_span('before the signal'):\n"
            "        pass\n"
            f"    os.kill(os.getpid(), {int(signum)})\n"
            "    await asyncio.sleep(60)\n"
            "run_script(main())\n",
        )
        done = subprocess.run(
            [sys.executable, str(script)],
            cwd=ROOT,
            env=_env(),
            capture_output=True,
            text=True,
            timeout=60,
        )
        names = received.names()
    assert done.returncode == status, done.stderr
    assert names == ["before the signal"], done.stderr


async def test_a_command_line_worker_stopped_by_sigterm_delivers_the_plans_spans(
    temporal_target: str, task_queue: str, workflow_id: str, tmp_path: Path
) -> None:
    """``durable-plan worker`` whose tools module turns tracing on: a plan it ran, then
    SIGTERM (a deploy): the plan's spans reach the collector before the worker leaves."""
    with otlp_collector() as (endpoint, received):
        tools = tmp_path / "traced_tools.py"
        tools.write_text(
            '"""The examples\' tools, with the worker\'s spans sent to the test\'s collector."""\n'
            + OTLP_IMPORT
            + "from durable_plan import tracing_plugin\n"
            "from examples.plan_tools import registry as registry\n"
            f"tracing_plugin(OTLPSpanExporter(endpoint={endpoint!r}))\n",
            encoding="utf-8",
        )
        worker = await spawn_cli(
            "worker",
            "--tools",
            str(tools),
            "--task-queue",
            task_queue,
            "--address",
            temporal_target,
            env=ONLY_THE_EXIT_FLUSHES,
        )
        try:
            assert worker.stdout is not None
            banner = (await asyncio.wait_for(worker.stdout.readline(), 60)).decode()
            assert banner.startswith("worker: "), banner  # it polls from here on
            ran = await arun_cli(
                "run",
                PARTY,
                "--tools",
                "examples.plan_tools",
                "--no-worker",
                "--task-queue",
                task_queue,
                "--workflow-id",
                workflow_id,
                "--address",
                temporal_target,
            )
            assert ran.returncode == 0, ran.stderr
            assert received.names() == [], "the batch timer exported: the test proves nothing"
            worker.send_signal(signal.SIGTERM)
            code, _, err = await finish(worker, 60)
        finally:
            if worker.returncode is None:
                worker.kill()
                await worker.wait()
        names = received.names()
    assert code == 0, err
    assert {"plan", "step monster", "step tally"} <= set(names), (names, err)
    assert "telemetry:" not in err, err


def test_a_collector_that_never_answers_costs_the_exit_a_bounded_wait(tmp_path: Path) -> None:
    """A collector that accepts and never replies, with an exporter that would wait two
    minutes: the script still leaves, after ``FLUSH_TIMEOUT_S``, and says what it dropped."""
    with socket.create_server(("127.0.0.1", 0)) as silent:  # listens; nobody ever answers
        endpoint = f"http://127.0.0.1:{silent.getsockname()[1]}/v1/traces"
        script = _script(
            tmp_path,
            endpoint,
            "async def main() -> None:\n"
            "    with trace.get_tracer('test').start_as_current_span('never delivered'):\n"
            "        pass\n"
            "run_script(main())\n",
            timeout=120,
        )
        started = time.monotonic()
        done = subprocess.run(
            [sys.executable, str(script)],
            cwd=ROOT,
            env=_env(),
            capture_output=True,
            text=True,
            timeout=90,
        )
        elapsed = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    assert elapsed < FLUSH_TIMEOUT_S + 40, elapsed  # imports included; unbounded: 120 s
    assert done.stderr.strip().splitlines()[-1] == (
        f"durable-plan: telemetry: spans and metrics not exported within {FLUSH_TIMEOUT_S:g} s "
        "are dropped on exit (does the OpenTelemetry collector answer?)"
    )
