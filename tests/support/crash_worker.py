"""A plan worker for the crash test, run as a subprocess so the test can SIGKILL it.

    python tests/support/crash_worker.py --target HOST:PORT --task-queue Q [--hold]

Prints ``READY`` once the worker polls, then runs until killed, SIGTERM/SIGINT, or
the end of stdin (the test process is gone).
With ``--hold`` it imports, connects and prints ``LOADED``, then waits for a line
on stdin before it starts polling: a replacement worker can be warmed up while
the plan runs and take over the moment the first one is killed.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import threading
from collections.abc import Coroutine
from datetime import timedelta
from pathlib import Path
from typing import Any

# Run as a script, so make `tests.support.crash_tools` importable the same way the test imports it.
ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from temporalio.client import Client  # noqa: E402

from durable_plan import plan_worker, tool_worker  # noqa: E402
from tests.support.crash_tools import SLOW_STORE_ENV, crash_registry  # noqa: E402

SPANS_ENV = "DURABLE_PLAN_SPANS_FILE"
"""Set: the worker records the plans' spans to this file (the events tests)."""


async def main(
    target: str,
    task_queue: str,
    namespace: str,
    hold: bool,
    agents: bool,
    mcp: bool = False,
    route: str | None = None,
    tools_only: bool = False,
    sandbox: bool = False,
) -> None:
    plugins: list[Any] = []
    workflows: list[Any] = []
    if sandbox:
        # The sandbox tests' conversation, its scripted model and its sandbox factory.
        from temporalio.strands_agents import StrandsPlugin

        from durable_plan.testing import ScriptedModel
        from tests.support.sandbox_support import SANDBOX, chain_sandboxes, sandbox_scripts
        from tests.support.sandbox_workflows import SandboxChatWorkflow

        plugins.append(
            StrandsPlugin(
                models={"scripted": lambda: ScriptedModel(scripts=sandbox_scripts())},
                sandboxes={SANDBOX: chain_sandboxes()},
            )
        )
        workflows.append(SandboxChatWorkflow)
    if mcp:
        # The test MCP server as "github": its call-tool activity runs MCP plan steps.
        from temporalio.strands_agents import StrandsPlugin

        from tests.support.mcp_support import tracker_client

        plugins.append(StrandsPlugin(models={}, mcp_clients={"github": tracker_client}))
    if agents:
        # Agent steps: the scripted model, slowed so a kill can land mid model call.
        from temporalio.strands_agents import StrandsPlugin

        from durable_plan.testing import ScriptedModel
        from tests.support.crash_tools import MODEL_LATENCY_S, crash_agent_scripts

        def model() -> ScriptedModel:
            return ScriptedModel(scripts=crash_agent_scripts(), latency_s=MODEL_LATENCY_S)

        plugins.append(StrandsPlugin(models={"scripted": model}))
    slow_store = os.environ.get(SLOW_STORE_ENV)
    if slow_store:
        from durable_plan.protect.payload_storage import PayloadStoragePlugin, external_storage
        from tests.support.crash_tools import SlowFileStorageDriver

        driver = SlowFileStorageDriver(slow_store)
        plugins.append(PayloadStoragePlugin(external_storage(driver, threshold=64 * 1024)))
    spans = os.environ.get(SPANS_ENV)
    if spans:
        # Traces of this worker, each span written as it ends (a kill loses none ended).
        from durable_plan import JsonLinesExporter, tracing_plugin

        plugins.append(tracing_plugin(JsonLinesExporter(spans), batch=False))
    client = await Client.connect(target, namespace=namespace, plugins=plugins)
    if mcp:
        await _connect_mcp_server()
    registry = crash_registry(route=route)
    if sandbox:
        from tests.support.sandbox_support import SLOW_SANDBOX_TOOLS

        registry = SLOW_SANDBOX_TOOLS
    if tools_only:  # the routed tool's own worker: its activities, no workflows
        assert route is not None, "--tools-only serves the --route queue"
        worker = tool_worker(client, task_queue=route, registry=registry)
    else:
        worker = plan_worker(
            client,
            task_queue=task_queue,
            registry=registry,
            workflows=workflows,
            # A SIGKILLed worker never tells the server it is gone: its cached workflows'
            # next tasks go to its sticky queue and wait this long before falling back to
            # the shared queue the replacement worker polls (default: 10 s).
            sticky_queue_schedule_to_start_timeout=timedelta(seconds=1),
        )
    stop = asyncio.Event()
    go = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    def watch_stdin() -> None:
        # A line means "go"; end of file means the test process is gone: exit too.
        while sys.stdin.readline():
            loop.call_soon_threadsafe(go.set)
        loop.call_soon_threadsafe(stop.set)

    threading.Thread(target=watch_stdin, daemon=True).start()
    if hold:
        print("LOADED", flush=True)
        await _first(go.wait(), stop.wait())
        if stop.is_set():
            return
    async with worker:
        print("READY", flush=True)
        await stop.wait()


async def _connect_mcp_server() -> None:
    """Start the worker's MCP server now, as a long-running worker has it by the time a
    step calls it: opened lazily by the first call instead, its start-up (a Python
    process importing the MCP SDK: seconds on a busy machine) ran inside that step's
    5 s start-to-close timeout and cost a retry now and then."""
    from temporalio.strands_agents._temporal_mcp_client import (
        _MCP_CONNECTION_IDLE,
        get_connection,
    )

    from tests.support.mcp_support import tracker_client

    _, _, record = await get_connection("github", tracker_client, _MCP_CONNECTION_IDLE)
    record.release()


async def _first(*aws: Coroutine[Any, Any, Any]) -> None:
    tasks = [asyncio.ensure_future(a) for a in aws]
    await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    for task in tasks:
        task.cancel()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--target", required=True, help="Temporal frontend, HOST:PORT")
    parser.add_argument("--task-queue", required=True)
    parser.add_argument("--namespace", default="default")
    parser.add_argument("--hold", action="store_true", help="poll only after a line on stdin")
    parser.add_argument("--agents", action="store_true", help="register the scripted model")
    parser.add_argument("--mcp", action="store_true", help="register the test MCP server")
    parser.add_argument("--route", help="crash_combine runs on this task queue")
    parser.add_argument("--tools-only", action="store_true", help="serve the --route queue")
    parser.add_argument("--sandbox", action="store_true", help="the sandbox tests' conversation")
    args = parser.parse_args()
    asyncio.run(
        main(
            args.target,
            args.task_queue,
            args.namespace,
            args.hold,
            args.agents,
            args.mcp,
            args.route,
            args.tools_only,
            args.sandbox,
        )
    )
