"""Tools for the crash test: each call leaves a trace in a side-effect log.

Every call appends ``{"step", "attempt", "event": "start", "key"}`` to the file
named by ``DURABLE_PLAN_CRASH_LOG``, sleeps ``sleep_s`` (so a kill can land in
the middle of the step), then appends the matching ``"done"`` line and returns
JSON the next step binds to. The log is the "outside world": a step whose side
effect happened twice shows two ``done`` lines.

The test process and the worker subprocess both build the registry here, so
the tool table the plan carries matches the activities the worker runs.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from pathlib import Path
from typing import Any

from durable_plan import current_step
from durable_plan.protect.payload_file_driver import FileStorageDriver
from durable_plan.temporal.activities.exactly_once import SQLiteEffects, exactly_once
from durable_plan.tools.registry import ToolRegistry

LOG_ENV = "DURABLE_PLAN_CRASH_LOG"
HEARTBEAT_TIMEOUT_S = 1.0
TIMEOUT_S = 30.0
STEP_SLEEP_S = 1.0
FAST_SLEEP_S = 0.05


def _log(event: str) -> None:
    step = current_step()
    if step is None:
        raise RuntimeError("crash tools run only as plan step activities")
    line = {
        "step": step.step_id,
        "attempt": step.attempt,
        "event": event,
        "key": step.idempotency_key,
        "pid": os.getpid(),
        "t": time.time(),
    }
    data = (json.dumps(line) + "\n").encode()
    # One O_APPEND write per line: lines from concurrent steps never interleave.
    fd = os.open(os.environ[LOG_ENV], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def _side_effect(sleep_s: float) -> None:
    _log("start")
    time.sleep(sleep_s)
    _log("done")


def crash_work(value: int, add: int = 1, sleep_s: float = STEP_SLEEP_S) -> dict[str, Any]:
    """Add ``add`` to ``value`` after a slow side effect. Returns {"value": int}."""
    _side_effect(sleep_s)
    return {"value": value + add}


def crash_combine(values: list[int], sleep_s: float = STEP_SLEEP_S) -> dict[str, Any]:
    """Sum ``values`` after a slow side effect. Returns {"value": int}."""
    _side_effect(sleep_s)
    return {"value": sum(values)}


EFFECTS_ENV = "DURABLE_PLAN_EFFECTS_DB"


def _effects_db() -> str:
    return os.environ.get(EFFECTS_ENV) or str(Path(os.environ[LOG_ENV]).with_suffix(".db"))


def _refund_row(conn: sqlite3.Connection, ticket: int) -> None:
    conn.execute("CREATE TABLE IF NOT EXISTS refunds (ticket INTEGER)")
    conn.execute("INSERT INTO refunds (ticket) VALUES (?)", (ticket,))


def _refund_once(ticket: int, effects: sqlite3.Connection) -> dict[str, Any]:
    _refund_row(effects, ticket)
    return {"refunded": ticket}


def crash_refund(ticket: int, once: bool = True) -> dict[str, Any]:
    """Refund a ticket (a row in SQLite), then linger: a kill in that window comes after
    the effect but before Temporal records the completion. Returns {"refunded": int}."""
    _log("start")
    if once:
        result = exactly_once(SQLiteEffects(_effects_db()))(_refund_once)(ticket)
    else:
        conn = sqlite3.connect(_effects_db(), isolation_level=None)
        try:
            _refund_row(conn, ticket)
        finally:
            conn.close()
        result = {"refunded": ticket}
    _log("committed")
    time.sleep(STEP_SLEEP_S)
    _log("done")
    return result


def crash_big(kib: int) -> dict[str, Any]:
    """A result of ``kib`` KiB, over External Storage's threshold. Returns {"text": str}."""
    _log("start")
    _log("done")
    return {"text": "b" * (kib * 1024)}


def crash_fail(message: str) -> None:
    """Always fail, as a broken tool does."""
    raise RuntimeError(message)


def crash_registry(retries: int | None = None, route: str | None = None) -> ToolRegistry:
    """The crash tools with a short heartbeat timeout, so a dead worker is noticed fast.

    ``route``: ``crash_combine`` runs on that task queue (a ``tool_worker``'s)."""
    registry = ToolRegistry()
    if route is not None:
        registry.route("crash_combine", route)
    for fn in (crash_work, crash_combine, crash_refund, crash_fail):
        registry.add(
            fn, timeout_s=TIMEOUT_S, heartbeat_timeout_s=HEARTBEAT_TIMEOUT_S, retries=retries
        )
    # Its result is stored (External Storage) after it returned: longer than the store.
    registry.add(crash_big, timeout_s=STORING_S + 3.0, retries=retries)
    return registry


def crash_plan(fast: str | None = None) -> dict[str, Any]:
    """Six steps, five levels: a -> b -> (c1, c2) -> d -> e; ``e`` ends at 12.

    ``fast`` names a fan-out sibling that sleeps only briefly, so that sibling has
    landed before the other one is killed.
    """

    def sleep(step: str) -> float:
        return FAST_SLEEP_S if step == fast else STEP_SLEEP_S

    return {
        "steps": [
            {"id": "a", "tool": "crash_work", "args": {"value": 0, "sleep_s": sleep("a")}},
            {
                "id": "b",
                "tool": "crash_work",
                "args": {"add": 1, "sleep_s": sleep("b")},
                "bind": {"value": "steps.a.value"},
            },
            {
                "id": "c1",
                "tool": "crash_work",
                "args": {"add": 1, "sleep_s": sleep("c1")},
                "bind": {"value": "steps.b.value"},
            },
            {
                "id": "c2",
                "tool": "crash_work",
                "args": {"add": 2, "sleep_s": sleep("c2")},
                "bind": {"value": "steps.b.value"},
            },
            {
                "id": "d",
                "tool": "crash_combine",
                "args": {"sleep_s": sleep("d")},
                "bind": {"values": "[steps.c1.value, steps.c2.value]"},
            },
            {
                "id": "e",
                "tool": "crash_work",
                "args": {"add": 5, "sleep_s": sleep("e")},
                "bind": {"value": "steps.d.value"},
            },
        ],
        "returns": ["e"],
    }


AGENT_PROMPT = "crash loop"
MODEL_LATENCY_S = 1.0
AGENT_SCHEMA = {
    "type": "object",
    "required": ["total"],
    "properties": {"total": {"type": "integer"}},
}


def crash_agent_scripts() -> dict[str, list[Any]]:
    """Two slow tool calls in two rounds, then the answer: three model calls in all."""
    from durable_plan.testing import call
    from durable_plan.testing.scripted_model import output

    return {
        AGENT_PROMPT: [
            call("crash_work", value=0, add=1),
            call("crash_work", value=1, add=2),
            output({"total": 3}),
        ]
    }


def crash_agent_plan() -> dict[str, Any]:
    return {
        "steps": [
            {
                "id": "loop",
                "tool": "agent",
                "args": {
                    "prompt": AGENT_PROMPT,
                    "output_schema": AGENT_SCHEMA,
                    "tools": ["crash_work"],
                },
            }
        ]
    }


def crash_map_plan() -> dict[str, Any]:
    """Six slow items, one at a time, so a kill lands on a known item."""
    return {
        "steps": [
            {
                "id": "m",
                "tool": "map",
                "args": {
                    "over": [0, 1, 2, 3, 4, 5],
                    "concurrency": 1,
                    "do": {"tool": "crash_work", "args": {"add": 10}, "bind": {"value": "item"}},
                },
            }
        ]
    }


SLOW_STORE_ENV = "DURABLE_PLAN_SLOW_STORE"
"""Set (a directory): the worker stores payloads there through ``SlowFileStorageDriver``."""
STORING_S = 3.0


class SlowFileStorageDriver(FileStorageDriver):
    """Writes half of the first payload's temporary file, says so in the side-effect log,
    lingers, then the rest: a kill lands while the payload is being written. (A store slower
    than the activity's heartbeat timeout would time the attempt out by itself: the
    completion is stored after the tool returned, when nothing heartbeats; crash_big's
    timeout is longer than this.)"""

    def _write(self, path: Path, data: bytes) -> None:
        once = self.root.parent / "slowed-once"  # the replacement worker stores at once
        if once.exists():
            super()._write(path, data)
            return
        once.touch()
        half = len(data) // 2
        with path.open("wb") as out:
            out.write(data[:half])
            out.flush()
            fd = os.open(os.environ[LOG_ENV], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                line = {"step": "store", "event": "storing", "pid": os.getpid(), "t": time.time()}
                os.write(fd, (json.dumps(line) + "\n").encode())
            finally:
                os.close(fd)
            time.sleep(STORING_S)
            out.write(data[half:])
