"""A plan over an MCP server: in-process on a plain agent, then durably in a TemporalAgent.

.venv/bin/durable-plan dev                  # terminal 1 (or TEMPORAL_ADDRESS=host:port)
.venv/bin/python examples/issue_agent.py    # --live: Bedrock writes the plan
"""

import sys
import uuid

from issue_agent_workflow import LOCAL, PLAN, PLANNABLE, IssueAgentWorkflow, github_client, triage
from strands import Agent, tool
from temporalio.strands_agents import StrandsPlugin

from durable_plan import WorkflowPlanPlugin, connect, plan_worker, run_script
from durable_plan.testing import ScriptedModel, call

PROMPT = "Label issue 7 the way triage says."


def model() -> object:
    if "--live" in sys.argv:
        from strands.models.bedrock import BedrockModel

        return BedrockModel()
    return ScriptedModel(scripts={PROMPT: [call("submit_workflow_plan", **PLAN)]})


async def main() -> None:
    # In-process: the agent's MCPClient runs the github__ steps; no server needed.
    github = github_client()
    agent = Agent(
        model=model(),
        tools=[github, tool(triage)],
        plugins=[WorkflowPlanPlugin(PLANNABLE)],
        callback_handler=None,
    )
    print("in-process:", str(await agent.invoke_async(PROMPT)).strip())
    github.stop(None, None, None)

    # Durable: the worker runs the MCP server (StrandsPlugin(mcp_clients=...), on the
    # client only, like models); each github__ step is its call-tool activity.
    plugin = StrandsPlugin(models={"default": model}, mcp_clients={"github": github_client})
    client = await connect(plugins=[plugin])
    async with plan_worker(
        client, task_queue="issue-agents", registry=LOCAL, workflows=[IssueAgentWorkflow]
    ):
        answer = await client.execute_workflow(
            IssueAgentWorkflow.run,
            PROMPT,
            id=f"issue-agent-{uuid.uuid4().hex[:8]}",
            task_queue="issue-agents",
        )
    print("durable:", answer)


if __name__ == "__main__":
    run_script(main())
