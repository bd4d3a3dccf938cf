"""Plan worker subprocesses a test can SIGKILL: the crash tests' ``tests/support/crash_worker.py``.

``worker_processes`` yields ``spawn``: a worker that polls (``READY``), or with
``hold=True`` one that has loaded and connected and waits for ``release`` (a
replacement warmed up while the plan runs). Each is forked from a launcher that
imported the libraries once (``tests/support/warm_python.py``), so a worker is ready in about a
second instead of three of imports; it is still a process of its own, and a SIGKILL
leaves the server with a lost worker exactly as it would a spawned one.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from durable_plan import PlanHandle
from tests.support.crash_tools import LOG_ENV
from tests.support.warm_python import WarmProcess, WarmPython

ROOT = Path(__file__).resolve().parents[2]
WORKER_SCRIPT = ROOT / "tests" / "support" / "crash_worker.py"
READY_TIMEOUT_S = 30.0
RESULT_TIMEOUT_S = 60.0

_launchers: dict[asyncio.AbstractEventLoop, WarmPython] = {}


async def warm_python() -> WarmPython:
    """This event loop's launcher, started on first use; it ends with this process."""
    loop = asyncio.get_running_loop()
    if loop not in _launchers:
        launcher = WarmPython()
        await launcher.start()
        _launchers[loop] = launcher
    return _launchers[loop]


class WorkerProcess:
    """One crash worker subprocess; its stderr goes to a file for post-mortems."""

    def __init__(self, proc: WarmProcess, stderr_path: Path) -> None:
        self.proc = proc
        self.stderr_path = stderr_path

    def stderr_tail(self, lines: int = 30) -> str:
        try:
            text = self.stderr_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    async def expect(self, word: bytes) -> None:
        assert self.proc.stdout is not None
        try:
            line = await asyncio.wait_for(self.proc.stdout.readline(), READY_TIMEOUT_S)
        except TimeoutError:
            line = b""
        if line.strip() != word:
            self.kill()
            await self.proc.wait()
            pytest.fail(
                f"crash worker did not print {word.decode()} (exit {self.proc.returncode}):\n"
                f"{self.stderr_tail()}"
            )

    async def release(self) -> None:
        """Let a ``--hold`` worker start polling; returns once it polls."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"go\n")
        await self.proc.stdin.drain()
        await self.expect(b"READY")

    def kill(self) -> None:
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()  # SIGKILL: no shutdown, no goodbye to the server


@contextlib.asynccontextmanager
async def worker_processes(
    target: str, task_queue: str, log: Path, tmp: Path, *extra: str
) -> AsyncIterator[Any]:
    """Yields ``spawn(hold=False)``; every process spawned is SIGKILLed and reaped on exit."""
    procs: list[WorkerProcess] = []
    env = {
        **os.environ,
        LOG_ENV: str(log),
        "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p),
        "PYTHONUNBUFFERED": "1",
    }

    async def spawn(hold: bool = False) -> WorkerProcess:
        """A polling worker, or with ``hold`` one that is loaded and waits for ``release``."""
        stderr_path = tmp / f"worker-{len(procs) + 1}.stderr"
        cmd = [str(WORKER_SCRIPT), "--target", target, "--task-queue", task_queue, *extra]
        launcher = await warm_python()
        with stderr_path.open("wb") as stderr:
            proc = await launcher.spawn(
                *cmd, *(["--hold"] if hold else []), env=env, cwd=ROOT, stderr=stderr
            )
        worker = WorkerProcess(proc, stderr_path)
        procs.append(worker)
        await worker.expect(b"LOADED" if hold else b"READY")
        return worker

    try:
        yield spawn
    finally:
        for worker in procs:
            worker.kill()
        for worker in procs:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(worker.proc.wait(), 10)


def read_log(log: Path) -> list[dict[str, Any]]:
    if not log.exists():
        return []
    lines = log.read_text().splitlines()
    # The last line may be half-written while a worker appends to it.
    return [json.loads(line) for line in lines if line.endswith("}")]


def in_flight(entries: list[dict[str, Any]]) -> set[str]:
    """Steps with a "start" line but no "done" line yet."""
    started = {e["step"] for e in entries if e["event"] == "start"}
    done = {e["step"] for e in entries if e["event"] == "done"}
    return started - done


async def only_pending_activity(handle: PlanHandle, target: str) -> bool:
    """The server waits for ``target`` alone: no other activity, no workflow task."""
    raw = (await handle.handle.describe()).raw_description
    pending = {a.activity_id for a in raw.pending_activities}
    return pending == {target} and not raw.HasField("pending_workflow_task")


async def kill_and_replace(
    spawn: Any, first: WorkerProcess, handle: PlanHandle, log: Path, kill_point: Any
) -> tuple[WorkerProcess, Any]:
    """SIGKILL ``first`` at ``kill_point``; a replacement, warmed up meanwhile, takes over.

    Returns the replacement and the plan's result.
    """
    loading = asyncio.create_task(spawn(hold=True))
    try:
        await kill_point
    except BaseException:
        loading.cancel()
        with contextlib.suppress(BaseException):
            await loading
        raise
    first.kill()
    await first.proc.wait()
    second: WorkerProcess = await loading
    await second.release()
    try:
        result = await asyncio.wait_for(handle.result(), RESULT_TIMEOUT_S)
    except TimeoutError:
        pytest.fail(
            f"plan did not finish after the crash; log: {read_log(log)}\n"
            f"new worker stderr:\n{second.stderr_tail()}"
        )
    return second, result
