"""A chaos run: mixed plans while workers are SIGKILLed at random moments and the
server restarts once, with what happened counted.

Shared by ``tests/chaos/`` (a CI-sized run) and ``bench/chaos.py`` (larger counts).
Workers are ``tests/support/crash_worker.py`` subprocesses (the scripted model on their
client, so agent steps run); every tool writes its side effects to a log, and
refunds go to SQLite, with and without the exactly-once helper.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import sqlite3
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from durable_plan import PlanHandle, start_plan
from durable_plan.server.devserver import DevServer, free_port
from tests.support.crash_tools import (
    LOG_ENV,
    crash_agent_plan,
    crash_plan,
    crash_registry,
)
from tests.support.warm_python import WarmProcess
from tests.support.worker_processes import warm_python

ROOT = Path(__file__).resolve().parents[2]
WORKER = ROOT / "tests" / "support" / "crash_worker.py"


@dataclass
class ChaosReport:
    plans: int = 0
    completed_ok: int = 0
    completed_with_failed_steps: dict[str, int] = field(default_factory=dict)
    workflows_failed: dict[str, int] = field(default_factory=dict)
    lost: int = 0
    kills: int = 0
    server_restarts: int = 0
    retried_steps: int = 0
    rerun_after_recorded: int = 0
    """Steps run again although the worker that ran them lived on (so their completion
    was recorded): must be 0. Re-runs of steps a killed worker ran are at-least-once."""
    duplicate_effects_plain: int = 0
    duplicate_effects_once: int = 0
    kill_to_resume_ms: list[float] = field(default_factory=list)
    seconds: float = 0.0
    errors: dict[str, str] = field(default_factory=dict)
    """One failed step's error per plan kind, for the report."""

    def lines(self) -> list[str]:
        resume = sorted(self.kill_to_resume_ms)
        median = statistics.median(resume) if resume else float("nan")
        p90 = resume[int(0.9 * (len(resume) - 1))] if resume else float("nan")
        return [
            f"plans started               {self.plans}",
            f"completed, every step ok    {self.completed_ok}",
            f"completed, a step failed    {sum(self.completed_with_failed_steps.values())} "
            f"{self.completed_with_failed_steps or ''}",
            f"workflows failed            {sum(self.workflows_failed.values())} "
            f"{self.workflows_failed or ''}",
            f"lost (still open)           {self.lost}",
            f"worker kills                {self.kills}",
            f"server restarts             {self.server_restarts}",
            f"steps retried (attempts>1)  {self.retried_steps}",
            f"re-run after recorded       {self.rerun_after_recorded}",
            f"duplicate effects, plain    {self.duplicate_effects_plain}",
            f"duplicate effects, helper   {self.duplicate_effects_once}",
            f"kill to resume, ms          median {median:.0f}  p90 {p90:.0f}  (n={len(resume)})",
            f"wall clock                  {self.seconds:.1f} s",
            *(f"  {kind} failed: {error}" for kind, error in self.errors.items()),
        ]


def mixed_plan(n: int) -> tuple[dict[str, Any], str]:
    """Plan ``n`` of the mix: chains with fan-out and joins, a map, a failing tool, refunds
    with and without the exactly-once helper, and an agent step. Returns (plan, kind)."""
    kind = ("fanout", "map", "failing", "refund_once", "refund_plain", "agent")[n % 6]
    if kind == "fanout":
        return crash_plan(fast="c1"), kind
    if kind == "map":
        return {
            "steps": [
                {
                    "id": "m",
                    "tool": "map",
                    "args": {
                        "over": [1, 2, 3, 4],
                        "concurrency": 2,
                        "do": {"tool": "crash_work", "bind": {"value": "item"}},
                    },
                }
            ]
        }, kind
    if kind == "failing":
        return {
            "steps": [
                {"id": "ok", "tool": "crash_work", "args": {"value": 1, "sleep_s": 0.2}},
                {"id": "bad", "tool": "crash_fail", "args": {"message": "expected"}},
            ],
            "on_error": "continue",
        }, kind
    if kind in ("refund_once", "refund_plain"):
        once = kind == "refund_once"
        return {
            "steps": [{"id": "r", "tool": "crash_refund", "args": {"ticket": n, "once": once}}]
        }, kind
    return crash_agent_plan(), kind


class _Workers:
    """Crash worker subprocesses; ``replace()`` kills the current one and starts another."""

    def __init__(self, target: str, task_queue: str, log: Path, tmp: Path) -> None:
        self.target, self.task_queue, self.log, self.tmp = target, task_queue, log, tmp
        self.current: WarmProcess | None = None
        self.all: list[WarmProcess] = []
        self.killed: set[int] = set()

    async def spawn(self) -> WarmProcess:
        env = {
            **os.environ,
            LOG_ENV: str(self.log),
            "PYTHONPATH": str(ROOT),
            "PYTHONUNBUFFERED": "1",
        }
        launcher = await warm_python()  # forked, the libraries imported once
        with (self.tmp / f"worker-{len(self.all)}.stderr").open("wb") as stderr:
            proc = await launcher.spawn(
                WORKER,
                *("--target", self.target, "--task-queue", self.task_queue, "--agents"),
                env=env,
                cwd=ROOT,
                stderr=stderr,
            )
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), 60)
        if line.strip() != b"READY":
            raise RuntimeError(f"chaos worker did not start: {line!r}")
        self.all.append(proc)
        self.current = proc
        return proc

    async def kill_current(self) -> int:
        assert self.current is not None
        pid = self.current.pid
        self.killed.add(pid)
        with contextlib.suppress(ProcessLookupError):
            self.current.kill()
        await self.current.wait()
        return pid

    async def close(self) -> None:
        for proc in self.all:
            if proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                await proc.wait()


def _log_entries(log: Path) -> list[dict[str, Any]]:
    import json

    if not log.exists():
        return []
    return [json.loads(x) for x in log.read_text().splitlines() if x.endswith("}")]


async def _resume_time(log: Path, killed_at: float, old_pid: int, timeout: float) -> float | None:
    """Milliseconds from the kill until a step starts on another worker."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for entry in _log_entries(log):
            if entry["event"] == "start" and entry["pid"] != old_pid and entry["t"] > killed_at:
                return (entry["t"] - killed_at) * 1000.0
        await asyncio.sleep(0.02)
    return None


async def run_chaos(
    tmp: Path, *, plans: int, kills: int, restart_server: bool = True, seed: int = 0
) -> ChaosReport:
    rng = random.Random(seed)
    report = ChaosReport(plans=plans)
    log, db, port = tmp / "effects.jsonl", tmp / "server.db", free_port()
    task_queue = f"chaos-{seed}-{rng.randrange(10**6)}"
    started = time.monotonic()
    server: DevServer | None = DevServer(headless=True, db_filename=db, port=port)
    await server.start_async()
    workers = _Workers(server.target, task_queue, log, tmp)
    handles: list[tuple[PlanHandle, str]] = []
    try:
        client = await server.connect()
        await workers.spawn()
        registry = crash_registry()
        for n in range(plans):
            plan, kind = mixed_plan(n)
            handle = await start_plan(
                client,
                plan,
                task_queue=task_queue,
                registry=registry,
                model="scripted",
                retry_initial_interval_s=0.2,
                model_heartbeat_timeout_s=1.0,
                workflow_id=f"{task_queue}-{n}-{kind}",
            )
            handles.append((handle, kind))
        for k in range(kills):
            await asyncio.sleep(rng.uniform(0.3, 2.0))
            old = await workers.kill_current()
            killed_at = time.time()
            report.kills += 1
            if restart_server and k == kills // 2:
                server.stop()  # the db file keeps every plan
                server = DevServer(headless=True, db_filename=db, port=port)
                await server.start_async()
                report.server_restarts += 1
            await workers.spawn()
            resumed = await _resume_time(log, killed_at, old, timeout=30.0)
            if resumed is not None:
                report.kill_to_resume_ms.append(resumed)
        client = await server.connect()
        for handle, kind in handles:
            await _collect(client, handle, kind, report)
    finally:
        await workers.close()
        if server is not None:
            server.stop()
    _count_effects(log, report)
    report.rerun_after_recorded = _reruns_after_recorded(log, workers.killed)
    report.seconds = time.monotonic() - started
    return report


async def _collect(client: Any, handle: PlanHandle, kind: str, report: ChaosReport) -> None:
    fresh = PlanHandle(client.get_workflow_handle(handle.id))
    try:
        result = await asyncio.wait_for(fresh.result(), 120)
    except TimeoutError:
        report.lost += 1
        return
    except Exception as exc:
        reason = type(exc).__name__
        report.workflows_failed[reason] = report.workflows_failed.get(reason, 0) + 1
        return
    report.retried_steps += sum(1 for o in result.ledger if o.attempts > 1)
    if result.ok:
        report.completed_ok += 1
    else:
        report.completed_with_failed_steps[kind] = (
            report.completed_with_failed_steps.get(kind, 0) + 1
        )
        failed = next((o for o in result.ledger if o.status == "failed"), None)
        if failed is not None and kind not in report.errors:
            report.errors[kind] = (failed.error or "")[:200]


def _reruns_after_recorded(log: Path, killed: set[int]) -> int:
    """Keys whose effect finished on a worker that was never killed, then ran again."""
    first_done: dict[str, int] = {}
    reruns = 0
    for entry in _log_entries(log):
        if entry["event"] != "done":
            continue
        key = entry["key"]
        if key in first_done and first_done[key] not in killed:
            reruns += 1
        first_done.setdefault(key, entry["pid"])
    return reruns


def _count_effects(log: Path, report: ChaosReport) -> None:
    db = log.with_suffix(".db")
    if not db.exists():
        return
    conn = sqlite3.connect(db)
    try:
        rows = conn.execute("SELECT ticket, COUNT(*) FROM refunds GROUP BY ticket").fetchall()
    except sqlite3.OperationalError:
        rows = []
    finally:
        conn.close()
    for ticket, count in rows:
        once = ticket % 6 == 3  # mixed_plan: kind 3 is refund_once, 4 refund_plain
        if once:
            report.duplicate_effects_once += count - 1
        else:
            report.duplicate_effects_plain += count - 1
