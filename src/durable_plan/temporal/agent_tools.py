"""The registry's tools as Strands tools, for calls the model makes directly.

Inside a workflow each call runs the tool's activity (the same activity a plan
step uses, so one worker registration serves both); outside a workflow the
tool runs in-process. Results go back as JSON blocks, so the model sees exactly
the shape a plan binding would address.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from strands.types.tools import AgentTool, ToolGenerator, ToolResult, ToolUse
from temporalio import workflow
from temporalio.exceptions import ActivityError

from durable_plan.language.errors import describe_exception
from durable_plan.temporal.messages import StepRequest, StepResponse, failure_message
from durable_plan.temporal.policy import CallPolicy, retry_policy
from durable_plan.tools.limits import call_slot
from durable_plan.tools.named_tool import NamedTool
from durable_plan.tools.registry import Tool, ToolRegistry
from durable_plan.tools.results import tool_result


class DurableTool(NamedTool):
    """One registry tool exposed to the model; an activity when called from a workflow."""

    def __init__(self, tool: Tool, task_queue: str | None = None) -> None:
        super().__init__(tool.name, tool.tool_spec_json)
        self._tool = tool
        self._task_queue = task_queue

    async def stream(
        self, tool_use: ToolUse, invocation_state: dict[str, Any], **kwargs: Any
    ) -> ToolGenerator:
        yield await self._call(tool_use)

    async def _call(self, tool_use: ToolUse) -> ToolResult:
        tool_use_id = tool_use["toolUseId"]
        args = dict(tool_use.get("input") or {})
        try:
            if workflow.in_workflow():
                value = await self._run_activity(tool_use_id, args)
            else:
                async with call_slot(self._tool.options):  # the limits, as in-process
                    value = await self._tool.invoke(args)
        except ActivityError as exc:
            return tool_result(tool_use_id, False, failure_message(exc))
        except Exception as exc:
            return tool_result(tool_use_id, False, describe_exception(exc))
        return tool_result(tool_use_id, True, value)

    async def _run_activity(self, tool_use_id: str, args: dict[str, Any]) -> Any:
        options = self._tool.options
        where = CallPolicy.of(options).remote_options(self._task_queue, workflow.info().workflow_id)
        wire = await workflow.execute_activity(
            self._tool.name,
            StepRequest(step_id=f"direct/{tool_use_id}", args=args).to_wire(),
            result_type=dict,
            start_to_close_timeout=timedelta(seconds=options.timeout_s),
            retry_policy=retry_policy(options.retries + 1),
            summary=f"direct: {self._tool.name}",
            **where,
        )
        return StepResponse.from_wire(wire).result


def durable_tools(registry: ToolRegistry, *, task_queue: str | None = None) -> list[AgentTool]:
    """Every tool of ``registry`` as a Strands tool (activities inside workflows)."""
    return [DurableTool(tool, task_queue) for tool in registry]
