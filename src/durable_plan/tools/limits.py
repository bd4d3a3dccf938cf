"""A tool's limits where no Temporal server holds them: in-process calls.

Durably a limited tool's calls wait on its task queue, where the server holds the rate and
each worker its slots (``language.routing``, ``temporal.worker.tool_worker``). A plan run
in-process (``execute_plan``, a plain Strands agent's plans, ``durable-plan run --local``)
has no queue, so the same options are held here instead, per process: at most
``max_concurrent`` calls at once (as one worker of the queue allows) and starts spaced to
``max_per_second`` by a token bucket that, like the server's, starts full with one
second's worth. Tools that share a queue share its limits here too.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import weakref
from collections.abc import AsyncIterator

from durable_plan.language.options import ToolOptions


class QueueLimiter:
    """The limits of one task queue in one event loop."""

    def __init__(self, max_concurrent: int | None, max_per_second: float | None) -> None:
        self._slots = asyncio.Semaphore(max_concurrent) if max_concurrent else None
        self._rate = max_per_second
        self._capacity = max(1.0, max_per_second or 0.0)
        self._tokens = self._capacity
        self._refilled = time.monotonic()

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Held while one call runs: a slot first, then a token (its start)."""
        if self._slots is not None:
            await self._slots.acquire()
        try:
            await self._start()
            yield
        finally:
            if self._slots is not None:
                self._slots.release()

    async def _start(self) -> None:
        rate = self._rate
        if rate is None:
            return
        while True:
            now = time.monotonic()
            self._tokens = min(self._capacity, self._tokens + (now - self._refilled) * rate)
            self._refilled = now
            if self._tokens >= 1.0:
                self._tokens -= 1.0
                return
            await asyncio.sleep((1.0 - self._tokens) / rate)


_LIMITERS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, QueueLimiter]] = (
    weakref.WeakKeyDictionary()
)
"""Per event loop (asyncio primitives belong to one), per queue."""


def call_slot(options: ToolOptions) -> contextlib.AbstractAsyncContextManager[None]:
    """Where an in-process call of a tool waits for its limits (nothing to wait for when the
    tool has none)."""
    if options.task_queue is None or (
        options.max_concurrent is None and options.max_per_second is None
    ):
        return contextlib.nullcontext()
    per_queue = _LIMITERS.setdefault(asyncio.get_running_loop(), {})
    limiter = per_queue.get(options.task_queue)
    if limiter is None:
        limiter = per_queue[options.task_queue] = QueueLimiter(
            options.max_concurrent, options.max_per_second
        )
    return limiter.slot()
