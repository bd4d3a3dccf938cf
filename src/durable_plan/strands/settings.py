"""The plan tool's settings a plan needs, as a Protocol: ``WorkflowPlanPlugin`` has them.

Named in a module of its own, below the plugin and the modules it calls, so none of those
imports the plugin (which imports them) and a plain agent loads no workflow code for it."""

from __future__ import annotations

from typing import Any, Protocol

from durable_plan.language.options import ToolOptions
from durable_plan.tools.registry import ToolRegistry


class PlanToolSettings(Protocol):
    """What a plan's child needs of the plan tool."""

    max_steps: int
    max_result_bytes: int | None
    plan_options: dict[str, Any]
    hooked_tools: list[str] | None
    hook_relay_bytes: int
    agent_models: list[str]
    task_queue: str | None
    plan_stream: Any

    def tool_options(self, registry: ToolRegistry) -> dict[str, ToolOptions]: ...
