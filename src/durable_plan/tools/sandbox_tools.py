"""A sandbox's tools as plan tools: ``sandbox_shell``, ``sandbox_file_editor`` and any tool an
owner builds on the sandbox API, run in the conversation's own environment.

A ``TemporalAgent`` with ``sandbox=TemporalSandbox("work")`` calls its sandbox's tools
directly: each sandbox operation is an activity of ``temporalio.strands_agents`` whose worker
finds the backing environment by the calling workflow's chain (namespace, workflow id, first
run id). A plan runs in a child workflow of its own, so the SDK's activities, scheduled from
there, would find (or provision) another environment: the file the agent wrote is not there.

Registered here, such a tool is an ordinary registry tool of kind ``"sandbox"``: plannable,
gated, hooked, retried, timed, routed and limited like any tool, from plan steps, map items
and agent steps alike. Durably its step runs in our wrapper activity, which calls the
worker's registered factory (``StrandsPlugin(sandboxes={"work": factory})``) with the
conversation's chain, carried in the plan's input by the plugin (never by the model:
``temporal/activities/sandbox_calls.py``), and runs the tool there against the sandbox the
factory returns. In-process the tool reads the agent's own ``sandbox``.

    registry = ToolRegistry([...])
    add_sandbox_tools(registry, "work", timeout_s=120, retries=1)
    registry.add(on_sandbox(run_tests, "work"), requires_approval=True)

An owner-built tool is a Strands ``@tool(context=True)`` that reads
``tool_context.agent.sandbox`` (as Strands' own ``make_shell()`` does): in a plan that
agent is the conversation's environment, reached through the factory.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from strands.interrupt import InterruptException
from strands.sandbox.errors import SandboxTimeoutError
from strands.types._events import ToolInterruptEvent
from strands.types.tools import AgentTool
from strands.vended_tools import make_file_editor, make_shell

SHELL = "sandbox_shell"
FILE_EDITOR = "sandbox_file_editor"
"""The names ``TemporalSandbox.get_tools()`` vends, and plans use."""

SANDBOX_TIMEOUT_ERROR_TYPE = "StrandsSandboxTimeoutError"
SANDBOX_PATH_NOT_FOUND_ERROR_TYPE = "StrandsSandboxPathNotFoundError"
"""The SDK's failure types (``temporalio.strands_agents._sandbox_activity``): a plan step's
failure reads as a direct call's does."""


@dataclass(frozen=True)
class OnSandbox:
    """A Strands tool to run in the sandbox ``sandbox`` names (``ToolRegistry.add`` takes it)."""

    tool: AgentTool
    sandbox: str


def on_sandbox(tool: Any, sandbox: str) -> OnSandbox:
    """``tool`` (a Strands ``@tool(context=True)`` reading ``tool_context.agent.sandbox``) as a
    sandbox tool of the factory ``sandbox``: ``registry.add(on_sandbox(run_tests, "work"))``."""
    if not isinstance(tool, AgentTool):
        raise TypeError(
            f"on_sandbox() takes a Strands tool (a @tool(context=True) function reading "
            f"tool_context.agent.sandbox), not {type(tool).__name__}"
        )
    if not sandbox:
        raise ValueError(
            "on_sandbox() needs the sandbox's name, as StrandsPlugin(sandboxes=) has it"
        )
    return OnSandbox(tool, sandbox)


def vended_tools(sandbox: str) -> list[OnSandbox]:
    """Strands' shell and file editor under the names ``TemporalSandbox`` vends them, unbound:
    each reads the sandbox of the agent it runs for (in a plan, the conversation's)."""
    return [
        OnSandbox(make_shell(name=SHELL), sandbox),
        OnSandbox(make_file_editor(name=FILE_EDITOR), sandbox),
    ]


def add_sandbox_tools(registry: Any, sandbox: str, **options: Any) -> list[Any]:
    """Register ``sandbox_shell`` and ``sandbox_file_editor`` of the factory ``sandbox`` on
    ``registry`` (a ``ToolRegistry``), each with ``options`` (``ToolRegistry.add``'s:
    ``timeout_s``, ``retries``, ``heartbeat_timeout_s``, ``requires_approval``, ``task_queue``,
    ...); returns the registered tools."""
    return [registry.add(tool, **options) for tool in vended_tools(sandbox)]


class SandboxAgent:
    """What a sandbox tool sees as ``tool_context.agent`` in a plan step's activity: the
    conversation's environment as ``sandbox``, and a fresh interrupt state (a tool asking a
    person fails its step once, as any tool's does)."""

    def __init__(self, sandbox: Any) -> None:
        from strands.interrupt import _InterruptState

        self.sandbox = sandbox
        self._interrupt_state = _InterruptState()


async def invoke_sandbox_tool(
    agent_tool: AgentTool, name: str, args: dict[str, Any], state: Mapping[str, Any]
) -> Any:
    """Run ``agent_tool`` with ``state`` (its ``agent`` has the sandbox) and return its JSON
    result; the sandbox's failures keep the SDK's meaning: a timeout is retried under the
    step's policy, a missing path is not (``SandboxFailure``)."""
    if getattr(state.get("agent"), "sandbox", None) is None:
        raise SandboxFailure(
            f"tool '{name}' runs in a sandbox and this call has none: call it from an agent "
            "with a sandbox, or from a plan its conversation started",
            retryable=False,
        )
    tool_use = {"toolUseId": f"plan-{name}", "name": name, "input": args}
    last: Any = None
    async for event in agent_tool.stream(tool_use, dict(state)):  # type: ignore[arg-type]
        if isinstance(event, ToolInterruptEvent):
            raise InterruptException(event.interrupts[0])
        last = event
    error = getattr(last, "exception", None)
    if error is not None:
        raise _failure(name, error) from error
    result = getattr(last, "tool_result", last)
    if isinstance(result, Mapping) and result.get("status") == "error":
        raise SandboxFailure(_text(result) or f"tool '{name}' reported an error", retryable=True)
    return _value(result)


class SandboxFailure(RuntimeError):
    """A sandbox tool's failure, with the SDK's type and whether another attempt may help."""

    def __init__(self, message: str, *, retryable: bool, kind: str | None = None) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.kind = kind


def _failure(name: str, error: BaseException) -> SandboxFailure:
    """The SDK's semantics: ``SandboxTimeoutError`` retried under the owner's policy, a
    ``FileNotFoundError`` (``SandboxPathNotFoundError`` too) never (the path is absent on every
    attempt), a ``ValueError`` (a relative path, a string to replace that is not there) never
    (the same arguments get the same answer); anything else, like the SDK's other sandbox
    failures, retried. Strands' shell wraps what the sandbox raised: its cause decides."""
    cause = error
    if not isinstance(error, SandboxTimeoutError) and isinstance(error.__cause__, Exception):
        cause = error.__cause__
    message = f"tool '{name}': {error}"
    if isinstance(cause, SandboxTimeoutError):
        return SandboxFailure(message, retryable=True, kind=SANDBOX_TIMEOUT_ERROR_TYPE)
    if isinstance(cause, FileNotFoundError):
        return SandboxFailure(message, retryable=False, kind=SANDBOX_PATH_NOT_FOUND_ERROR_TYPE)
    if isinstance(cause, ValueError):
        return SandboxFailure(message, retryable=False, kind="BadArgument")
    return SandboxFailure(message, retryable=True, kind=type(cause).__name__)


def _text(result: Mapping[str, Any]) -> str:
    return "; ".join(
        str(b["text"])
        for b in result.get("content") or []
        if isinstance(b, Mapping) and "text" in b
    )


def _value(result: Any) -> Any:
    """A tool result's JSON: a json block as is, a text parsed when it is JSON (the shell's
    ``{"output", "error", "exit_code"}``), else the text (the file editor's answer)."""
    if not (isinstance(result, Mapping) and "content" in result):
        return result
    values: list[Any] = []
    for block in result.get("content") or []:
        if "json" in block:
            values.append(block["json"])
        elif "text" in block:
            try:
                values.append(json.loads(block["text"]))
            except (TypeError, ValueError, RecursionError):
                values.append(block["text"])
    if not values:
        return None
    return values[0] if len(values) == 1 else values
