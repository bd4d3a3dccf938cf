"""Tools as Temporal activities: one activity type per tool name.

One type per tool (rather than one generic "call_tool") keeps the history and
the UI readable and lets each tool have its own timeout, retry policy and task
queue. The wrapper validates arguments (a bad argument is non-retryable and
names the parameter), heartbeats while long tools run, returns the raw JSON
result, and refuses results too large for history before they land there.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import time
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any

from strands.interrupt import InterruptException, _InterruptState
from temporalio import activity
from temporalio.common import RawValue
from temporalio.exceptions import ApplicationError

from durable_plan.language.errors import StepError, describe_exception, interrupt_message
from durable_plan.language.json_text import compact_json
from durable_plan.language.plan_limits import truncate_text
from durable_plan.protect.result_store import ResultStore
from durable_plan.run.json_results import as_json, non_json_message
from durable_plan.temporal.activities.claim_check import (
    ClaimCheckError,
    keep_large_result,
    resolve_args,
    worker_store,
)
from durable_plan.temporal.activities.sandbox_calls import WorkerSandboxes, sandbox_state
from durable_plan.temporal.wire.messages import StepRequest, StepResponse
from durable_plan.tools.registered_tool import Tool, ToolArgumentError


@dataclass(frozen=True)
class StepContext:
    """Where a tool call runs; ``idempotency_key`` is stable across retries."""

    workflow_id: str
    step_id: str
    attempt: int

    @property
    def idempotency_key(self) -> str:
        return f"{self.workflow_id}/{self.step_id}"


_NOTHING = contextlib.nullcontext()
"""The wrapper's deadline or heartbeats when it has none (stateless: shared by every call)."""

_CURRENT: contextvars.ContextVar[StepContext | None] = contextvars.ContextVar(
    "durable_plan_step", default=None
)


def current_step() -> StepContext | None:
    """The step being executed, for tools that pass an idempotency key downstream."""
    return _CURRENT.get()


def tool_activity(
    tool: Tool, store: ResultStore | None = None, sandboxes: WorkerSandboxes | None = None
) -> Callable[[RawValue], Any]:
    """Build the activity that runs ``tool`` for a plan step.

    It takes its argument raw (``StepRequest`` on the wire as plain JSON, decoded once: the
    data converter's type-hint walk of a ``dict`` argument cost more than the decoding) and
    answers with a raw JSON payload, ``[result, duration_ms(, attempt)]``, the tool's JSON
    text as it is (no re-encoding, no key sort; ``StepResponse``).
    ``store``: where results stored by reference live (default: ``$DURABLE_PLAN_STORE``).
    ``sandboxes``: the worker's sandbox factories, for a sandbox tool (``sandbox_calls``).
    """
    sandboxes = (sandboxes or WorkerSandboxes()) if tool.kind == "sandbox" else None

    async def run_tool(wire: RawValue) -> RawValue:
        info = activity.info()
        request = StepRequest.from_payload(
            wire, activity.payload_converter, info.activity_id, info.workflow_run_id or ""
        )
        started = time.perf_counter()
        token = _CURRENT.set(StepContext(info.workflow_id or "", request.step_id, info.attempt))
        failed_before = _failures_recorded(info.heartbeat_details)
        record = {"failures": failed_before}

        def failure(message: str, kind: str, *, retryable: bool, **extra: Any) -> ApplicationError:
            # Our details come first; error texts are cut so history stays small.
            details = {"attempt": info.attempt, "duration_ms": _ms_since(started)}
            return ApplicationError(
                truncate_text(message),
                details,
                *extra.pop("details", ()),
                type=kind,
                non_retryable=not retryable,
                **extra,
            )

        def retryable_failure(message: str, kind: str, **extra: Any) -> ApplicationError:
            """A failure of the tool's own: it spends the step's retry budget (recorded in
            the heartbeat details the next attempt reads), and ends the step once spent."""
            if request.retries is None:
                return failure(message, kind, retryable=True, **extra)
            record["failures"] = failed_before + 1
            activity.heartbeat(record)
            spent = record["failures"] > request.retries
            return failure(message, kind, retryable=not spent, **extra)

        own_timeout = _own_timeout(info.start_to_close_timeout, request.retries)
        # No deadline of its own (a local step, or every attempt counted): no timer context.
        deadline = asyncio.timeout(own_timeout) if own_timeout is not None else None
        try:
            async with (
                _heartbeating(info.heartbeat_timeout, record),
                deadline if deadline is not None else _NOTHING,
            ):
                args = request.args
                if request.store_over_bytes is not None:  # references read back first
                    args = await resolve_args(
                        worker_store(store),
                        workflow_id=info.workflow_id or "",
                        step_id=request.step_id,
                        args=args,
                        max_bytes=request.max_stored_bytes,
                        chain=request.store_chain,
                    )
                if sandboxes is not None:  # the conversation's environment (sandbox_calls)
                    async with sandbox_state(tool, request.sandbox, sandboxes) as state:
                        raw = await tool.invoke(args, state)
                else:
                    raw = await tool.invoke(args, {"agent": _NoAgent()})
        except TimeoutError as exc:
            if deadline is not None and deadline.expired():
                step_timeout = info.start_to_close_timeout
                limit = step_timeout.total_seconds() if step_timeout else own_timeout
                raise retryable_failure(f"timed out after {limit:g} s", "Timeout") from None
            raise retryable_failure(describe_exception(exc), type(exc).__name__) from exc
        except ToolArgumentError as exc:
            raise failure(str(exc), "BadArgument", retryable=False) from None
        except ClaimCheckError as exc:
            raise failure(str(exc), exc.kind, retryable=False) from None
        except InterruptException:
            # Retrying cannot answer a person's question: fail once, with what to do.
            raise failure(interrupt_message(tool.name), "Interrupted", retryable=False) from None
        except ApplicationError as exc:
            # The tool's own decision (type, retryable, delay) stands; its details follow ours.
            extra = {"details": exc.details, "next_retry_delay": exc.next_retry_delay}
            kind = exc.type or "ApplicationError"
            if exc.non_retryable:
                raise failure(exc.message, kind, retryable=False, **extra) from exc
            raise retryable_failure(exc.message, kind, **extra) from exc
        except Exception as exc:
            raise retryable_failure(describe_exception(exc), type(exc).__name__) from exc
        finally:
            _CURRENT.reset(token)
        try:
            value = as_json(raw)
        except StepError as exc:
            raise failure(
                non_json_message(tool.name, exc), "NonJsonResult", retryable=False
            ) from None
        text = compact_json(value)
        size = len(text.encode())
        if request.store_over_bytes is not None and size > request.store_over_bytes:
            try:
                text = await keep_large_result(
                    worker_store(store),
                    workflow_id=info.workflow_id or "",
                    step_id=request.step_id,
                    tool=tool.name,
                    attempt=info.attempt,
                    text=text,
                    size=size,
                    max_stored_bytes=request.max_stored_bytes,
                    chain=request.store_chain,
                )
            except ClaimCheckError as exc:
                raise failure(str(exc), exc.kind, retryable=False) from None
            except Exception as exc:  # the store's own error (disk full, S3 down): the
                # step's retries, with the attempt and duration like any tool failure
                raise retryable_failure(
                    f"the result could not be stored: {describe_exception(exc)}",
                    type(exc).__name__,
                ) from exc
        elif size > request.max_result_bytes:
            message = (
                f"step '{request.step_id}': the result of tool '{tool.name}' is "
                f"{_kib(size)}, over the {_kib(request.max_result_bytes)} limit for results "
                "kept in history; make the tool return less (or a reference to stored data)"
            )
            raise failure(message, "ResultTooLarge", retryable=False)
        return RawValue(StepResponse.compact(text, info.attempt, _ms_since(started)))

    run_tool.__name__ = f"tool_{tool.name}"
    run_tool.__qualname__ = run_tool.__name__
    defined = activity.defn(name=tool.name)(run_tool)
    if sandboxes is not None:  # bound to the worker's factories when it runs
        defined._durable_plan_sandboxes = sandboxes  # type: ignore[attr-defined]
    return defined


class _NoAgent:
    """What a Strands tool taking a ``ToolContext`` sees as its agent inside an activity.

    No agent runs there (it is in the workflow, or in another process). Its
    interrupt state is fresh, so a tool asking a person raises Strands'
    interrupt, which the wrapper turns into one non-retryable failure.
    """

    def __init__(self) -> None:
        self._interrupt_state = _InterruptState()


def registry_activities(
    registry: Iterable[Tool], store: ResultStore | None = None
) -> list[Callable[..., Any]]:
    """Every tool's activity: wrappers for functions, existing activities as they are (MCP
    tools have none here: ``StrandsPlugin(mcp_clients=...)`` registers their server's;
    declared tools neither: their queue's workers have their code). Sandbox tools share one
    holder of the worker's factories (``sandbox_calls.bind_worker_sandboxes``)."""
    sandboxes = WorkerSandboxes()
    return [
        t.target if t.kind == "activity" else tool_activity(t, store, sandboxes)
        for t in registry
        if t.kind != "mcp" and t.target is not None
    ]


def _failures_recorded(details: Any) -> int:
    """How many earlier attempts failed on their own (attempts a lost worker cut short
    left no record), from the heartbeat details the last attempt sent."""
    for item in details or ():
        if isinstance(item, dict) and isinstance(item.get("failures"), int):
            return int(item["failures"])
    return 0


def _own_timeout(start_to_close: Any, retries: int | None) -> float | None:
    """The wrapper times the tool itself, just inside Temporal's start-to-close timeout,
    so a hung tool is a failure of its own (it spends a retry), unlike a lost worker."""
    if retries is None or not start_to_close:
        return None
    seconds = float(start_to_close.total_seconds())
    return max(seconds * 0.9, seconds - 1.0)


def _heartbeating(timeout: Any, record: dict[str, int]) -> AbstractAsyncContextManager[None]:
    """Heartbeats while the tool runs when the step has a heartbeat timeout; else nothing
    (no generator-based context per call: most steps have none)."""
    return _beating(timeout, record) if timeout else _NOTHING


@contextlib.asynccontextmanager
async def _beating(timeout: Any, record: dict[str, int]) -> AsyncIterator[None]:
    """Heartbeat while the tool runs, so a crashed worker is noticed within the timeout.

    Each heartbeat carries ``record`` (the failures so far), which Temporal hands
    to the next attempt.
    """
    interval = max(timeout.total_seconds() / 3, 0.05)

    async def beat() -> None:
        while True:
            activity.heartbeat(record)
            await asyncio.sleep(interval)

    task = asyncio.create_task(beat())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def _ms_since(started: float) -> float:
    return round((time.perf_counter() - started) * 1000.0, 3)


def _kib(size: int) -> str:
    return f"{size / 1024:.0f} KiB"
