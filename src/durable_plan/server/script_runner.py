"""Running a script's main coroutine, and leaving the process without finalization.

Apart from the connection settings (``connection.py``) because it answers another
question: not where the server is, but how a script that used a Temporal client or worker
ends. SIGTERM and SIGHUP cancel the main coroutine as Ctrl-C does (so servers a command
started stop), telemetry is delivered and output flushed, then ``os._exit`` leaves before
the SDK's native runtime can crash the interpreter's finalization.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import Coroutine
from typing import Any, NoReturn, TypeVar

_T = TypeVar("_T")


def run_script(main: Coroutine[Any, Any, int | None], *, interrupted: int = 130) -> NoReturn:
    """``asyncio.run(main)``, then leave the process without interpreter finalization.

    A short script that used a Temporal client or worker can crash while the interpreter
    finalizes: the SDK's native runtime still holds threads that release the GIL late
    ("Fatal Python error: PyGILState_Release ... must be current", exit -6/134; open as
    temporalio/sdk-python#300). Leaving with ``os._exit`` after flushing output keeps the
    script's own exit status. ``main`` may return an exit status; None means 0.
    """
    try:
        status = run_until_signalled(main) or 0
    except KeyboardInterrupt:
        status = interrupted
    except Terminated as stop:
        status = stop.status
    exit_now(status)


class Terminated(Exception):
    """SIGTERM or SIGHUP ended the main coroutine; ``status`` is the shell's 128 + signal."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"terminated by signal {signum}")
        self.status = 128 + signum


def run_until_signalled(main: Coroutine[Any, Any, _T]) -> _T:
    """``asyncio.run(main)``, with SIGTERM and SIGHUP cancelling ``main`` as Ctrl-C does.

    Without this, SIGTERM (a CI job's timeout, ``kill``) ended the process at once: no
    ``finally`` ran, so a dev server a command had started for itself was left running,
    reparented to init. Cancelling the main task unwinds every ``async with`` (servers
    stopped, workers shut down, telemetry flushed); then ``Terminated`` says which signal.
    """
    import signal

    received: list[int] = []

    async def guarded() -> _T:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None
        previous: dict[int, Any] = {}
        for signum in (signal.SIGTERM, signal.SIGHUP):
            before = signal.getsignal(signum)
            if before is signal.SIG_IGN:
                continue  # ignored on purpose (`nohup`): it stays ignored
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(signum, _cancel_on, task, signum, received)
                previous[signum] = before
        try:
            return await main
        finally:
            for number, handler in previous.items():
                loop.remove_signal_handler(number)
                with contextlib.suppress(TypeError, ValueError):  # None: set outside Python
                    signal.signal(number, handler)  # as the caller had it

    try:
        return asyncio.run(guarded())
    except asyncio.CancelledError:
        if received:
            raise Terminated(received[0]) from None
        raise


def _cancel_on(task: asyncio.Task[Any], signum: int, received: list[int]) -> None:
    if not received:
        received.append(signum)
        task.cancel()


def exit_now(status: int | None = 0) -> NoReturn:
    """Deliver telemetry, flush output and leave without interpreter finalization (see
    `run_script`): for a script whose ``main`` already ran its own event loop.

    ``os._exit`` skips ``atexit``, where OpenTelemetry would shut its providers down: the
    spans a batch processor still holds are exported here first, within a bounded time
    (``telemetry_exit.flush_telemetry``), or the README's OTLP set-up delivers none."""
    from durable_plan.server.telemetry_exit import flush_telemetry

    flush_telemetry()
    for stream in (sys.stdout, sys.stderr):
        # A closed pipe (`| head`) or a closed stream: nothing is left to flush to.
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(status or 0)
