"""Test helpers shared across test modules (fixtures live in conftest.py).

* ``running_worker``: an in-process worker for the duration of a block.
* ``until_progress`` / ``until_phase``: poll a plan's ``progress`` query until it shows
  what a test waits for (a step running, awaiting approval, ...).
* ``run_cli`` / ``arun_cli``: ``durable-plan ARGS`` in this process, as a subprocess would
  report it; ``cli_subprocess`` / ``acli_subprocess`` / ``spawn_cli``: the real thing.
* ``examples``: a Hypothesis example count that follows the profile (conftest.py).
* ``tool_results``: the tool results in a Strands agent's conversation.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import io
import os
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TextIO

from hypothesis import settings
from temporalio.client import Client
from temporalio.worker import Worker

ROOT = Path(__file__).resolve().parents[2]
"""The repository: where the command line runs (``examples.plan_tools`` imports from here)."""

Lines = list[dict[str, Any]]


# -- Hypothesis ------------------------------------------------------------------------------


def examples(count: int) -> int:
    """``count`` examples under the ``ci`` profile (the default), a tenth under ``dev``."""
    return max(1, count * settings.default.max_examples // 100)


# -- agents ----------------------------------------------------------------------------------


def tool_results(agent: Any) -> list[dict[str, Any]]:
    """Every tool result in a Strands agent's conversation, in order."""
    return [
        block["toolResult"]
        for message in agent.messages
        for block in message["content"]
        if "toolResult" in block
    ]


# -- workers ---------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def running_worker(
    client: Client,
    *,
    task_queue: str,
    workflows: Sequence[type] = (),
    activities: Sequence[Callable[..., Any]] = (),
    **kwargs: Any,
) -> AsyncIterator[Worker]:
    """An in-process worker that polls for exactly the duration of the block.

    Sync activities need a thread pool; one is made only when some activity needs it.
    """
    needs_threads = any(not inspect.iscoroutinefunction(a) for a in activities)
    with contextlib.ExitStack() as stack:
        if needs_threads and "activity_executor" not in kwargs:
            kwargs["activity_executor"] = stack.enter_context(ThreadPoolExecutor(16))
        worker = Worker(
            client,
            task_queue=task_queue,
            workflows=list(workflows),
            activities=list(activities),
            **kwargs,
        )
        async with worker:
            yield worker


# -- waiting for a plan to get somewhere -----------------------------------------------------


async def until_progress(
    handle: Any,
    done: Callable[[Any], bool],
    *,
    what: str = "the awaited progress",
    timeout_s: float = 30.0,
    interval_s: float = 0.05,
) -> Any:
    """Poll a plan's ``progress`` until ``done(progress)``; returns that progress.

    ``handle`` is a ``PlanHandle`` (``progress()``: the ledger lines, with live attempts)
    or a bare workflow handle (``query("progress")``: a plan's lines, an agent step's
    round and calls awaiting approval). A query that fails (the workflow has not run its
    first task yet, or ended and no worker answers) counts as no progress yet. Past
    ``timeout_s`` it fails with the last progress seen, or the last query error.
    """
    deadline = time.monotonic() + timeout_s
    lines: Any = None
    error: BaseException | None = None
    while True:
        try:
            if hasattr(handle, "progress"):
                lines = await handle.progress()
            else:
                lines = await handle.query("progress")
            error = None
        except Exception as exc:
            error = exc
        else:
            if done(lines):
                return lines
        if time.monotonic() >= deadline:
            seen = f"last query failed: {error!r}" if error is not None else f"last: {lines}"
            raise AssertionError(f"{what} not reached within {timeout_s:g} s ({seen})")
        await asyncio.sleep(interval_s)


def phase_is(step_id: str, phase: str) -> Callable[[Lines], bool]:
    return lambda lines: any(line["id"] == step_id and line["phase"] == phase for line in lines)


async def until_phase(
    handle: Any, step_id: str, phase: str, *, timeout_s: float = 30.0
) -> dict[str, Any]:
    """Poll until step ``step_id`` is in ``phase`` ("running", "awaiting_approval", ...);
    returns that step's line (``until_progress`` for the whole ledger)."""
    lines = await until_progress(
        handle,
        phase_is(step_id, phase),
        what=f"step {step_id!r} in phase {phase!r}",
        timeout_s=timeout_s,
    )
    return next(dict(line) for line in lines if line["id"] == step_id)


# -- the command line ------------------------------------------------------------------------

Ran = subprocess.CompletedProcess[str]
"""What a command did: ``returncode``, ``stdout``, ``stderr`` (in-process or not)."""


class _PerThread(io.TextIOBase):
    """sys.stdout or sys.stderr while a command runs in-process: each thread that runs a
    command writes to its own buffer, every other thread to the stream this replaced."""

    def __init__(self, fallback: TextIO) -> None:
        self.fallback = fallback
        self.buffers: dict[int, io.StringIO] = {}

    def _target(self) -> TextIO:
        return self.buffers.get(threading.get_ident(), self.fallback)

    def write(self, text: str) -> int:
        return self._target().write(text)

    def flush(self) -> None:
        self._target().flush()

    def isatty(self) -> bool:
        return self._target().isatty()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return "utf-8"


_streams_lock = threading.Lock()
_streams: list[_PerThread] = []  # [stdout, stderr] while any in-process command runs
_users = 0


def _exit_command(status: int | None = 0) -> None:
    """``durable_plan.server.connection.exit_now`` for an in-process command: flush, and end the
    command (not the process) with its status."""
    sys.stdout.flush()
    sys.stderr.flush()
    raise SystemExit(status or 0)


@contextlib.contextmanager
def _captured() -> Iterator[tuple[io.StringIO, io.StringIO]]:
    """This thread's stdout and stderr, captured; ``exit_now`` ends only the command."""
    global _users
    import durable_plan.cli.commands.server as server_commands

    out, err = io.StringIO(), io.StringIO()
    me = threading.get_ident()
    with _streams_lock:
        if _users == 0:
            _streams[:] = [_PerThread(sys.stdout), _PerThread(sys.stderr)]
            sys.stdout, sys.stderr = _streams[0], _streams[1]  # type: ignore[assignment]
            server_commands.exit_now = _exit_command  # type: ignore[assignment]
        _users += 1
        _streams[0].buffers[me], _streams[1].buffers[me] = out, err
    try:
        yield out, err
    finally:
        with _streams_lock:
            del _streams[0].buffers[me], _streams[1].buffers[me]
            _users -= 1
            if _users == 0:
                sys.stdout, sys.stderr = _streams[0].fallback, _streams[1].fallback
                from durable_plan.server.connection import exit_now

                server_commands.exit_now = exit_now
                _streams.clear()


@contextlib.contextmanager
def _environment(env: Mapping[str, str | None] | None) -> Iterator[None]:
    if not env:
        yield
        return
    saved = {name: os.environ.get(name) for name in env}
    try:
        for name, value in env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _main_in_this_thread(args: Sequence[str], env: Mapping[str, str | None] | None) -> Ran:
    from durable_plan.cli.main import main

    code: int | str | None
    with _environment(env), contextlib.chdir(ROOT), _captured() as (out, err):
        try:
            code = main(list(args))
        except SystemExit as exc:  # argparse, --version, or a command's exit_now
            code = exc.code
    if not isinstance(code, int):
        code = 0 if code is None else 1
    return subprocess.CompletedProcess(
        ["durable-plan", *args], code, out.getvalue(), err.getvalue()
    )


def run_cli(*args: str, env: Mapping[str, str | None] | None = None) -> Ran:
    """``durable-plan ARGS`` in this process: ``durable_plan.cli.main.main`` with its output
    captured, reported as a subprocess would be, without a new interpreter's seconds of
    imports.

    It runs on a thread of its own: a command that talks to a server runs its own event
    loop (``asyncio.run``) and leaves through ``exit_now``, which here ends the command,
    not the process. ``env`` sets variables for the call (None removes one); the command
    runs from the repository root, as ``cli_subprocess`` does. Run from an
    async test with ``arun_cli``, so that the test's event loop (an in-process worker, the
    session's client) keeps running meanwhile. Commands that install signal handlers
    (``worker``, ``codec-server``) need the main thread: run those with ``spawn_cli``.
    """
    result: list[Ran] = []
    failure: list[BaseException] = []

    def target() -> None:
        try:
            result.append(_main_in_this_thread(args, env))
        except BaseException as exc:
            failure.append(exc)

    thread = threading.Thread(target=target, name=f"durable-plan {' '.join(args[:1])}")
    thread.start()
    thread.join()
    if failure:
        raise failure[0]
    return result[0]


async def arun_cli(*args: str, env: Mapping[str, str | None] | None = None) -> Ran:
    """``run_cli`` without blocking the running event loop."""
    return await asyncio.to_thread(run_cli, *args, env=env)


def _subprocess_env(env: Mapping[str, str | None] | None) -> dict[str, str] | None:
    if env is None:
        return None
    merged = dict(os.environ)
    for name, value in env.items():
        if value is None:
            merged.pop(name, None)
        else:
            merged[name] = value
    return merged


def cli_subprocess(
    *args: str,
    env: Mapping[str, str | None] | None = None,
    cwd: Path = ROOT,
    timeout: float = 120,
) -> Ran:
    """``python -m durable_plan ARGS`` as a subprocess (``env`` added to this one's)."""
    return subprocess.run(
        [sys.executable, "-m", "durable_plan", *args],
        cwd=cwd,
        env=_subprocess_env(env),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


async def spawn_cli(
    *args: str, env: Mapping[str, str | None] | None = None
) -> asyncio.subprocess.Process:
    """``python -m durable_plan ARGS`` started, its stdout and stderr piped."""
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "durable_plan",
        *args,
        cwd=ROOT,
        env=_subprocess_env(env),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


async def finish(proc: asyncio.subprocess.Process, timeout: float = 120) -> tuple[int, str, str]:
    """Wait for a spawned command: (exit status, stdout, stderr)."""
    out, err = await asyncio.wait_for(proc.communicate(), timeout)
    return proc.returncode if proc.returncode is not None else -1, out.decode(), err.decode()


async def acli_subprocess(
    *args: str, env: Mapping[str, str | None] | None = None, timeout: float = 120
) -> tuple[int, str, str]:
    """``spawn_cli`` then ``finish``: the subprocess, without blocking the event loop."""
    return await finish(await spawn_cli(*args, env=env), timeout)


def s3_client(endpoint: str) -> Any:
    """A boto3 S3 client for moto's server at ``endpoint`` (the ``s3_endpoint`` fixture)."""
    import boto3

    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
