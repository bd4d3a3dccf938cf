"""A sandbox tool's step, in its wrapper activity: the conversation's environment, through the
worker's own registered factory. Activity code.

``StrandsPlugin(sandboxes={"work": factory})`` registers the SDK's sandbox activities, which
call ``factory`` with the chain of the workflow that scheduled them (the workflow id from the
activity's own info). A plan step runs in the plan's child workflow, another chain, so this
module calls the same factory itself, with the chain the plan's input carries
(``StepRequest.sandbox``, written by workflow code from the conversation's trusted record:
``workflows/sandbox_chain.py``), and hands the sandbox it returns to the tool as its agent's
``sandbox``. Everything else is the wrapper's, as for any tool: argument checks, the step's
timeout and retries, heartbeats, bounded results stored by reference when large.

The SDK's semantics are kept: the factory is called for every attempt (it must find or
provision idempotently; a context manager it returns is exited when the call ends),
``SandboxTimeoutError`` fails the attempt retryably (the owner's ``retries`` decide),
``FileNotFoundError`` fails the step at once, commands run at least once, env references
(``temporal_worker_env_ref``) resolve as the worker allows. Where the conversation's sandbox
streams (``TemporalSandbox(streaming_topic=...)``), each output chunk is published to the
conversation's stream on that topic, as a ``PlanSandboxStreamEvent`` naming the step's path.

The factories are the ones ``StrandsPlugin`` registered on this worker: the plugin keeps no
public handle on them, so they are read from its activities' definitions once the worker is
built (``bind_worker_sandboxes``, from ``DurablePlanPlugin.run_worker``), whatever the order
of the plugins; a test holds that the installed SDK still has them where we look.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from strands.sandbox import ExecutionResult, FileInfo, Sandbox, StreamChunk
from temporalio import activity
from temporalio.contrib.workflow_streams import WorkflowStreamClient
from temporalio.exceptions import ApplicationError
from temporalio.strands_agents import (
    SandboxStreamEvent,
    SandboxWorkflowChain,
    SandboxWorkflowContext,
)

from durable_plan.tools.registered_tool import Tool
from durable_plan.tools.sandbox_tools import SandboxAgent, SandboxFailure

logger = logging.getLogger(__name__)

SDK_PROBE_ACTIVITY = "strands-sandbox-read-file"
"""One of the activities ``StrandsPlugin(sandboxes=...)`` registers: its definition leads to
the plugin's factories."""
SANDBOX_NOT_FOUND_ERROR_TYPE = "StrandsSandboxNotFoundError"
STREAM_BATCH = timedelta(milliseconds=100)
"""As ``TemporalSandbox``'s default ``streaming_batch_interval``."""
STREAM_RETRY = timedelta(seconds=10)
"""How long a chunk's publication is retried: observer-facing, it never fails the step."""


@dataclass(frozen=True)
class PlanSandboxStreamEvent(SandboxStreamEvent):
    """A plan step's output chunk on the conversation's sandbox topic: the SDK's event (a
    subscriber reading ``SandboxStreamEvent`` sees its fields) plus the step's ``path``."""

    path: str = ""


class WorkerSandboxes:
    """The sandbox factories of one worker (``StrandsPlugin(sandboxes=...)``'s), once bound."""

    def __init__(self) -> None:
        self._sdk: Any = None

    def bind(self, activities: Iterable[Any]) -> bool:
        """Find the factories among ``activities`` (a worker's); True when found."""
        sdk = sdk_sandbox_activities(activities)
        if sdk is not None:
            self._sdk = sdk
        return self._sdk is not None

    def factory(self, name: str) -> Any:
        factories = getattr(self._sdk, "_factories", None) or {}
        factory = factories.get(name)
        if factory is None:
            raise ApplicationError(
                f"this worker has no sandbox named {name!r} (known: {sorted(factories)}): "
                f"register StrandsPlugin(sandboxes={{{name!r}: factory}}) on the client (or "
                "the worker) of every worker that runs this tool's steps",
                type=SANDBOX_NOT_FOUND_ERROR_TYPE,
            )
        return factory

    def resolve_env(self, env: dict[str, str] | None) -> dict[str, str] | None:
        """``env`` with the worker environment references the worker allows resolved."""
        refs = getattr(self._sdk, "_worker_env_refs", None)
        return refs.resolve(env) if refs is not None else env


def sdk_sandbox_activities(activities: Iterable[Any]) -> Any:
    """The SDK's ``SandboxActivities`` behind its registered sandbox activities, or None."""
    for fn in activities:
        definition = getattr(fn, "__temporal_activity_definition", None)
        if getattr(definition, "name", None) != SDK_PROBE_ACTIVITY:
            continue
        inner = getattr(fn, "__wrapped__", fn)
        for cell in getattr(inner, "__closure__", None) or ():
            try:
                value = cell.cell_contents
            except ValueError:  # an empty cell
                continue
            if hasattr(value, "_factories") and hasattr(value, "_worker_env_refs"):
                return value
    return None


def bind_worker_sandboxes(activities: Iterable[Any]) -> None:
    """Bind every sandbox tool activity among ``activities`` to the factories among them."""
    listed = list(activities)
    for fn in listed:
        holder = getattr(fn, "_durable_plan_sandboxes", None)
        if isinstance(holder, WorkerSandboxes):
            holder.bind(listed)


@asynccontextmanager
async def sandbox_state(
    tool: Tool, scope: dict[str, Any] | None, sandboxes: WorkerSandboxes
) -> AsyncIterator[dict[str, Any]]:
    """The invocation state a sandbox tool runs with: an agent whose ``sandbox`` is the
    conversation's environment. Its failures leave as the SDK's ``ApplicationError``s."""
    if not scope or not scope.get("workflow_id") or not scope.get("first_execution_run_id"):
        raise ApplicationError(
            f"tool '{tool.name}' runs in a sandbox, and this call names no workflow chain: "
            "it is started by a plan or a conversation's workflow, never on its own",
            type="SandboxChainMissing",
            non_retryable=True,
        )
    info = activity.info()
    context = SandboxWorkflowContext(
        chain=SandboxWorkflowChain(
            namespace=str(scope.get("namespace") or info.namespace),
            workflow_id=str(scope["workflow_id"]),
            first_execution_run_id=str(scope["first_execution_run_id"]),
        ),
        run_id=str(scope.get("run_id") or ""),
    )
    name = tool.options.sandbox or ""
    try:
        async with _factory_sandbox(sandboxes.factory(name), context) as backing:
            topic = scope.get("topic")
            sandbox = _Relay(backing, sandboxes, name, str(scope.get("path") or ""))
            if isinstance(topic, str) and topic:
                async with _published(sandbox, context.chain.workflow_id, topic):
                    yield {"agent": SandboxAgent(sandbox)}
            else:
                yield {"agent": SandboxAgent(sandbox)}
    except SandboxFailure as exc:
        raise ApplicationError(
            str(exc), type=exc.kind or "SandboxError", non_retryable=not exc.retryable
        ) from exc


@asynccontextmanager
async def _factory_sandbox(factory: Any, context: SandboxWorkflowContext) -> AsyncIterator[Any]:
    """What the SDK's activities do with a factory: call it, await it, enter it when it is a
    context manager (exited when the call ends)."""
    result = factory(context)
    if inspect.isawaitable(result):
        result = await result
    if isinstance(result, Sandbox):
        yield result
        return
    async with result as sandbox:
        yield sandbox


@asynccontextmanager
async def _published(sandbox: _Relay, workflow_id: str, topic: str) -> AsyncIterator[None]:
    """Publish the relay's chunks to the conversation's stream while the call runs; a failed
    publication is logged, never the step's failure (observer-facing, as in the SDK)."""
    stream = WorkflowStreamClient.create(
        activity.client(), workflow_id, batch_interval=STREAM_BATCH, max_retry_duration=STREAM_RETRY
    )
    handle = stream.topic(topic, type=PlanSandboxStreamEvent)
    try:
        await stream.__aenter__()
    except Exception:  # pragma: no cover - the flusher task only starts
        logger.warning("sandbox output of %s is not published", sandbox.path, exc_info=True)
        yield
        return
    sandbox.publish = handle.publish
    try:
        yield
    finally:
        sandbox.publish = None
        try:
            await stream.__aexit__(None, None, None)
        except Exception:
            logger.warning(
                "sandbox output of %s was not all published", sandbox.path, exc_info=True
            )


MAX_STREAMED_CHARS = 256 * 1024
"""Output one sandbox call publishes to the conversation's stream. Each chunk becomes part
of the conversation's history (a stream publication is a signal), and a plan's command is
the model's: ``yes | head -c 1G`` must not fill the conversation toward Temporal's limits.
Past it one last chunk says the rest is left out; the call's result still holds its output
(bounded like any result, by reference when large)."""


class _Relay(Sandbox):
    """The factory's sandbox, as the tool sees it: every operation passed on, env references
    resolved as the SDK's activities do, and output chunks published when asked."""

    def __init__(self, backing: Sandbox, sandboxes: WorkerSandboxes, name: str, path: str) -> None:
        self._backing = backing
        self._sandboxes = sandboxes
        self._name = name
        self.path = path
        self.publish: Any = None
        self._sequence = 0
        self._streamed = 0

    async def execute_streaming(
        self,
        command: str,
        *,
        timeout: float | None = None,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        **kwargs: Any,
    ) -> AsyncGenerator[StreamChunk | ExecutionResult, None]:
        stream = self._backing.execute_streaming(
            command, timeout=timeout, cwd=cwd, env=self._sandboxes.resolve_env(env), **kwargs
        )
        async for item in stream:
            self._emit(item)
            yield item

    async def execute_code_streaming(
        self,
        code: str,
        language: str,
        *,
        timeout: float | None = None,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        **kwargs: Any,
    ) -> AsyncGenerator[StreamChunk | ExecutionResult, None]:
        stream = self._backing.execute_code_streaming(
            code,
            language,
            timeout=timeout,
            cwd=cwd,
            env=self._sandboxes.resolve_env(env),
            **kwargs,
        )
        async for item in stream:
            self._emit(item)
            yield item

    async def read_file(self, path: str, **kwargs: Any) -> bytes:
        return await self._backing.read_file(path, **kwargs)

    async def write_file(self, path: str, content: bytes, **kwargs: Any) -> None:
        await self._backing.write_file(path, content, **kwargs)

    async def remove_file(self, path: str, **kwargs: Any) -> None:
        await self._backing.remove_file(path, **kwargs)

    async def list_files(self, path: str, **kwargs: Any) -> list[FileInfo]:
        return await self._backing.list_files(path, **kwargs)

    def __getattr__(self, name: str) -> Any:  # a backend's own API, for owner-built tools
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._backing, name)

    def _emit(self, item: StreamChunk | ExecutionResult) -> None:
        if self.publish is None or not isinstance(item, StreamChunk):
            return
        if self._streamed >= MAX_STREAMED_CHARS:
            return  # the notice below was the last chunk
        room = MAX_STREAMED_CHARS - self._streamed
        self._streamed += len(item.data)
        if len(item.data) > room:
            left = f"\n[output past {MAX_STREAMED_CHARS} characters not streamed: see the result]"
            item = StreamChunk(data=item.data[:room] + left, stream_type=item.stream_type)
            self._streamed = MAX_STREAMED_CHARS
        info = activity.info()
        self.publish(
            PlanSandboxStreamEvent(
                sandbox_name=self._name,
                execution_id=f"{info.workflow_run_id}:{info.activity_id}",
                attempt=info.attempt,
                sequence=self._sequence,
                chunk=item,
                path=self.path,
            )
        )
        self._sequence += 1
