"""Kill the worker in the middle of an MCP step: the step is retried, finished calls are not.

The worker (``tests/support/crash_worker.py --mcp``) runs the test MCP server as its
"github" server (``StrandsPlugin(mcp_clients=...)``), as a subprocess of its own.
While the plan's ``github__slow_count`` call runs, and the server waits for that
activity alone, the worker is SIGKILLed (its MCP server goes with its stdin); a
warmed-up replacement takes over, Temporal retries the step's
``github-call-tool`` activity there after its start-to-close timeout, and the
plan finishes. The server's call log is the outside world: ``get_issue`` and
``add_label`` each ran once.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from durable_plan import PlanHandle, start_plan
from durable_plan.tools.mcp import mcp_tool_table
from tests.support.mcp_server import LOG_ENV
from tests.support.mcp_support import LOCAL_TOOLS, tracker_client
from tests.support.worker_processes import kill_and_replace, only_pending_activity, worker_processes

STEP_TIMEOUT_S = 8.0  # the replacement starts its own MCP server inside the second call
SLOW_S = 3.0  # long enough for the kill to land mid-call on a busy machine
PLAN: dict[str, Any] = {
    "steps": [
        {"id": "issue", "tool": "github__get_issue", "args": {"number": 7}},
        {
            "id": "slow",
            "tool": "github__slow_count",
            "args": {"seconds": SLOW_S},
            "bind": {"number": "steps.issue.number"},
        },
        {
            "id": "labelled",
            "tool": "github__add_label",
            "args": {"label": "counted"},
            "bind": {"number": "steps.slow.number"},
        },
    ],
    "returns": ["slow", "labelled"],
}


def server_log(log: Path) -> list[dict[str, Any]]:
    if not log.exists():
        return []
    return [json.loads(x) for x in log.read_text().splitlines() if x.endswith("}")]


def events(log: Path, tool: str, event: str) -> list[dict[str, Any]]:
    return [e for e in server_log(log) if e["tool"] == tool and e["event"] == event]


async def slow_step_alone(handle: PlanHandle, log: Path) -> None:
    """Until the server is mid ``slow_count`` and the plan waits for that step alone."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        running = len(events(log, "slow_count", "start")) > len(events(log, "slow_count", "done"))
        if running and await only_pending_activity(handle, "slow"):
            return
        if events(log, "slow_count", "done"):
            pytest.fail(f"the slow MCP call finished before the kill: {server_log(log)}")
        await asyncio.sleep(0.02)
    pytest.fail(f"the slow MCP step never ran alone; server log: {server_log(log)}")


async def test_kill_worker_mid_mcp_step(
    client: Client,
    temporal_target: str,
    task_queue: str,
    workflow_id: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    log = tmp_path / "mcp-calls.jsonl"
    monkeypatch.setenv(LOG_ENV, str(log))  # the workers' MCP servers inherit it
    with tracker_client() as listing:  # the tool table, listed from this process
        table = mcp_tool_table(
            "github", listing.list_tools_sync(), timeout_s=STEP_TIMEOUT_S, retries=1
        )
    log.unlink(missing_ok=True)
    async with worker_processes(
        temporal_target, task_queue, tmp_path / "unused.jsonl", tmp_path, "--mcp"
    ) as spawn:
        first = await spawn()
        handle = await start_plan(
            client,
            PLAN,
            task_queue=task_queue,
            registry={**LOCAL_TOOLS.options(), **table},
            workflow_id=workflow_id,
            retry_initial_interval_s=0.2,
        )
        _, result = await kill_and_replace(spawn, first, handle, log, slow_step_alone(handle, log))

    assert result.ok, result.ledger
    assert result.returned == {
        "slow": {"number": 7, "comments": 21},
        "labelled": {"number": 7, "labels": ["bug", "counted"]},
    }
    # One attempt per call (nothing tells a slow server from a lost worker, so no spare
    # attempts): the killed call timed out and the plan called again as slow#2, within the
    # step's retries (issue 22, item 7).
    history = await handle.handle.fetch_history()
    started = {
        e.activity_task_scheduled_event_attributes.activity_id: e.event_id
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    }
    attempts = {
        step: e.activity_task_started_event_attributes.attempt
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
        for step, scheduled in started.items()
        if e.activity_task_started_event_attributes.scheduled_event_id == scheduled
    }
    assert attempts == {"issue": 1, "slow": 1, "slow#2": 1, "labelled": 1}, attempts
    # The outside world: calls that completed before the kill never ran again.
    assert len(events(log, "get_issue", "start")) == 1
    assert len(events(log, "add_label", "start")) == 1
    starts = events(log, "slow_count", "start")
    assert len(starts) == 2 and starts[0]["pid"] != starts[1]["pid"], starts
