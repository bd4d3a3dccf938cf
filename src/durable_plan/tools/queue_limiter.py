"""A tool's limits where no Temporal server holds them: in-process calls.

Durably a limited tool's calls wait on its task queue, where the server holds the rate and
each worker its slots (``language.routing``, ``temporal.worker.tool_worker``). A plan run
in-process (``execute_plan``, a plain Strands agent's plans, ``durable-plan run --local``)
has no queue, so the same options are held here instead, per process: at most
``max_concurrent`` calls at once (as one worker of the queue allows) and starts spaced to
``max_per_second`` by a token bucket that, like the server's, starts full with one
second's worth.

Tools that share a queue share its limits here too, as on the queue's worker: a queue's
limiter is built from the limits the registry merges over every tool of the queue
(``ToolRegistry.queue_limits``, the same merge ``tool_worker`` turns into the worker's
options), and holds every call on the queue, a tool that states none included, whichever
tool is called first.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import weakref
from collections.abc import AsyncIterator, Mapping
from typing import Any


class QueueLimiter:
    """The limits of one task queue in one event loop."""

    def __init__(self, limits: Mapping[str, Any]) -> None:
        """``limits``: the queue's merged limits as worker options (``queue_limits``)."""
        self.limits = dict(limits)
        max_concurrent: int | None = limits.get("max_concurrent_activities")
        max_per_second: float | None = limits.get("max_task_queue_activities_per_second")
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


_LIMITERS: weakref.WeakKeyDictionary[
    asyncio.AbstractEventLoop, dict[tuple[str, tuple[tuple[str, Any], ...]], QueueLimiter]
] = weakref.WeakKeyDictionary()
"""Per event loop (asyncio primitives belong to one), per queue and its limits (two registries
that give one queue name different limits do not borrow each other's limiter)."""


def queue_limiter(task_queue: str, limits: Mapping[str, Any]) -> QueueLimiter | None:
    """The limiter of ``task_queue`` in this event loop for its merged ``limits`` (None when
    the queue has none)."""
    if not limits:
        return None
    loop = asyncio.get_running_loop()
    if loop not in _LIMITERS:
        # A semaphore that made a caller wait holds its loop: the weak key alone never
        # lets a closed loop go (one per asyncio.run). Closed loops are dropped here.
        for closed in [known for known in _LIMITERS if known.is_closed()]:
            del _LIMITERS[closed]
    per_queue = _LIMITERS.setdefault(loop, {})
    key = (task_queue, tuple(sorted(limits.items())))
    limiter = per_queue.get(key)
    if limiter is None:
        limiter = per_queue[key] = QueueLimiter(limits)
    return limiter


def call_slot(
    task_queue: str | None, limits: Mapping[str, Any]
) -> contextlib.AbstractAsyncContextManager[None]:
    """Where an in-process call on ``task_queue`` waits for the queue's merged ``limits``
    (``ToolRegistry.call_slot`` passes them; nothing to wait for without a queue or limits)."""
    limiter = None if task_queue is None else queue_limiter(task_queue, limits)
    return contextlib.nullcontext() if limiter is None else limiter.slot()
