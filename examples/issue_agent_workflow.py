"""IssueAgentWorkflow: a TemporalAgent whose plans mix an MCP server's tools and a local one.

The "github" server's tools come from ``TemporalMCPClient("github")``: the agent lists
them (the ``github-list-tools`` activity) and a plan calls them as ``github__<tool>``,
each step the server's ``github-call-tool`` activity, run from the plan workflow.
"""

import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from mcp import StdioServerParameters
    from mcp.client.stdio import stdio_client
    from strands.tools.mcp import MCPClient
    from temporalio.strands_agents import TemporalAgent, TemporalMCPClient

    from durable_plan import ToolRegistry, WorkflowPlanPlugin
    from durable_plan.temporal.workflows.agent_tools import durable_tools
    from durable_plan.temporal.workflows.failures import root_message

SERVER = str(Path(__file__).parent / "issue_server.py")


def github_client() -> MCPClient:
    """The "github" server (here the example tracker, started over stdio)."""
    params = StdioServerParameters(command=sys.executable, args=[SERVER])
    return MCPClient(lambda: stdio_client(params), prefix="github")


async def triage(title: str) -> dict[str, Any]:
    """Pick a label for an issue from its title; returns {"label": str}.

    Args:
        title: The issue's title.
    """
    return {"label": "monsters" if "Goblin" in title else "other"}


LOCAL = ToolRegistry([triage])
PLANNABLE = ["*", "!github__delete_*"]  # every tool but the server's deletes
PLAN = {
    "steps": [
        {"id": "issue", "tool": "github__get_issue", "args": {"number": 7}},
        {"id": "pick", "tool": "triage", "bind": {"title": "steps.issue.title"}},
        {
            "id": "label",
            "tool": "github__add_label",
            "bind": {"number": "steps.issue.number", "label": "steps.pick.label"},
        },
    ],
    "returns": ["label"],
    "final": True,
}


@workflow.defn
class IssueAgentWorkflow:
    @workflow.run
    async def run(self, prompt: str) -> str:
        github = TemporalMCPClient("github", start_to_close_timeout=timedelta(seconds=30))
        agent = TemporalAgent(
            model="default",
            tools=[github, *durable_tools(LOCAL)],
            plugins=[WorkflowPlanPlugin(PLANNABLE, registry=LOCAL)],
            callback_handler=None,
            start_to_close_timeout=timedelta(seconds=120),
            retry_policy=RetryPolicy(maximum_attempts=3),
        )
        try:
            return str(await agent.invoke_async(prompt)).strip()
        except Exception as exc:
            raise ApplicationError(root_message(exc), non_retryable=True) from exc
