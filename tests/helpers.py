"""Test helpers shared across test modules (fixtures live in conftest.py)."""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from temporalio.client import Client
from temporalio.worker import Worker


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
