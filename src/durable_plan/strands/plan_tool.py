"""The ``submit_workflow_plan`` tool as Strands sees it: its spec (an explicit schema and a
description that teaches the plan language), the peer tool's input shape, and the plan's
failures as a value for the model.

The tool knows the plugin only as ``PlanSubmitter`` (what it reads of it), so this module
does not import the plugin that imports it: no import cycle."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from strands.types.tools import AgentTool, ToolGenerator, ToolResult, ToolSpec, ToolUse

from durable_plan.language.schema import PLAN_TOOL_NAME, plan_input_schema, plan_tool_description
from durable_plan.temporal.workflows.failures import PlanFailed as PlanFailed
from durable_plan.tools.results import tool_result


class PlanSubmitter(Protocol):
    """What the plan tool reads of ``WorkflowPlanPlugin``: its description and its submit."""

    max_steps: int
    _mcp_servers: dict[str, Any]

    def described_plannable(self) -> list[str] | None: ...

    def described_tools(self) -> tuple[dict[str, str], dict[str, str]]: ...

    async def submit(self, tool_use: ToolUse, agent: Any) -> ToolResult: ...


class PlanTool(AgentTool):
    """The ``submit_workflow_plan`` tool, with an explicit schema and teaching description."""

    def __init__(self, plugin: PlanSubmitter) -> None:
        super().__init__()
        self._plugin = plugin
        self._spec: ToolSpec | None = None
        self._described: tuple[list[str] | None, dict[str, str], dict[str, str]] | None = None

    @property
    def tool_name(self) -> str:
        return PLAN_TOOL_NAME

    @property
    def tool_type(self) -> str:
        return "plan"

    @property
    def tool_spec(self) -> ToolSpec:
        if self._spec is not None and not self._plugin._mcp_servers:
            return self._spec
        # MCP servers list their tools as the conversation goes: describe them afresh.
        described = (self._plugin.described_plannable(), *self._plugin.described_tools())
        if self._spec is None or described != self._described:
            self._described = described
            self._spec = {
                "name": PLAN_TOOL_NAME,
                "description": plan_tool_description(
                    described[0],
                    self._plugin.max_steps,
                    mcp_servers=sorted(self._plugin._mcp_servers),
                    returns=described[1],
                    signatures=described[2],
                ),
                "inputSchema": {"json": plan_input_schema()},
            }
        return self._spec

    async def stream(
        self, tool_use: ToolUse, invocation_state: dict[str, Any], **kwargs: Any
    ) -> ToolGenerator:
        yield await self._plugin.submit(tool_use, invocation_state.get("agent"))


def unwrap_peer_input(raw: Any) -> Any:
    """Accept ``{"plan": {...}}``, the input shape of strands-plan-tool, as the plan itself.

    Prompts and transcripts written for that tool keep working. Only the exact
    one-key shape is unwrapped, so a plan's own fields are never guessed at.
    """
    if isinstance(raw, Mapping) and set(raw) == {"plan"}:
        inner = raw["plan"]
        if isinstance(inner, Mapping | str):
            return inner
    return raw


def error_result(tool_use_id: str, text: str) -> ToolResult:
    return tool_result(tool_use_id, False, text)
