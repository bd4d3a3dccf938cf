"""The MCP tests' TemporalAgent workflow, in its own module so the sandbox can re-import it."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from temporalio.strands_agents import TemporalAgent, TemporalMCPClient

    from durable_plan.strands.plugin import WorkflowPlanPlugin
    from durable_plan.temporal.workflows.agent_tools import durable_tools
    from durable_plan.temporal.workflows.failures import root_message
    from tests.support.mcp_support import LOCAL_TOOLS

MCP_TIMEOUT_S = 10.0


@dataclass
class McpAgentInput:
    prompt: str
    plannable: list[str] | None = None
    approval_required: list[str] = field(default_factory=list)


@workflow.defn
class McpAgentWorkflow:
    """A TemporalAgent whose tools are the "github" MCP server and ``triage``."""

    @workflow.run
    async def run(self, request: McpAgentInput) -> dict[str, Any]:
        plugin = WorkflowPlanPlugin(
            request.plannable,
            registry=LOCAL_TOOLS,
            approval_required=request.approval_required,
        )
        github = TemporalMCPClient(
            "github",
            start_to_close_timeout=timedelta(seconds=MCP_TIMEOUT_S),
            retry_policy=RetryPolicy(maximum_attempts=3),
        )
        agent = TemporalAgent(
            model="scripted",
            tools=[github, *durable_tools(LOCAL_TOOLS)],
            plugins=[plugin],
            callback_handler=None,
            start_to_close_timeout=timedelta(seconds=30),
            retry_policy=RetryPolicy(maximum_attempts=2),
        )
        try:
            result = await agent.invoke_async(request.prompt)
        except Exception as exc:  # never leave the workflow task retrying
            raise ApplicationError(root_message(exc), non_retryable=True) from exc
        return {
            "answer": str(result).strip(),
            "plans": [r.model_dump(mode="json") for r in plugin.results],
        }
