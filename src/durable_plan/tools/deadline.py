"""A tool call in this process under its owner's timeout: the one place that bounds one.

Durably a call's timeout is its activity's ``start_to_close_timeout`` (``temporal.policy``).
In-process there is no activity, so the same ``timeout_s`` is held here, for every caller in
this process alike: a plan step, a map item and an agent step's tool call of the in-process
runner (``local.runner``), and a call the model makes directly (``temporal.agent_tools``
outside a workflow). In-process calls are not retried (the runners' one documented
difference); a failure is a value, never an exception, so the caller decides what the
model reads.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from durable_plan.language.errors import describe_exception

Outcome = tuple[bool, Any, float]
"""(ok, the result or the error's text, duration in ms)."""


async def within(call: Callable[[], Awaitable[Any]], timeout: float | None) -> Outcome:
    """``call()`` bounded by ``timeout`` seconds (None: unbounded); only the caller's own
    cancellation escapes."""
    started = time.perf_counter()
    deadline = asyncio.timeout(timeout)
    try:
        async with deadline:
            value = await call()
        return True, value, _ms_since(started)
    except TimeoutError as exc:
        if timeout is not None and deadline.expired():
            return False, f"timed out after {timeout:g} s", _ms_since(started)
        # The tool's own TimeoutError (a socket, a client): an ordinary failure.
        return False, describe_exception(exc), _ms_since(started)
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise  # the caller itself is being cancelled
        # The tool raised CancelledError on its own (a cancelled inner call): a failure.
        return False, "the tool was cancelled (CancelledError)", _ms_since(started)
    except Exception as exc:
        return False, describe_exception(exc), _ms_since(started)


def _ms_since(started: float) -> float:
    return (time.perf_counter() - started) * 1000.0
