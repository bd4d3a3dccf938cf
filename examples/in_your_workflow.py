"""Run MyAgentWorkflow: a worker for plans, tools and the workflow, then one conversation.

.venv/bin/durable-plan dev                      # terminal 1 (or TEMPORAL_ADDRESS=host:port)
.venv/bin/python examples/in_your_workflow.py   # --live: Bedrock writes the plan
"""

import sys
import uuid

from agent_workflow import MyAgentWorkflow
from monster_tools import ATTACK_PLAN, TOOLS
from temporalio.strands_agents import StrandsPlugin

from durable_plan.connection import connect, run_script
from durable_plan.temporal import plan_worker
from durable_plan.testing import ScriptedModel, call

PROMPT = "The mage attacks the goblin. Resolve the attack."


def model() -> object:
    if "--live" in sys.argv:
        from strands.models.bedrock import BedrockModel

        return BedrockModel()
    return ScriptedModel(scripts={PROMPT: [call("submit_workflow_plan", **ATTACK_PLAN)]})


async def main() -> None:
    # Models go on the client only: on the worker as well, invoke_model would be registered
    # twice. The plugin also gives the client the data converter TemporalAgent needs.
    client = await connect(plugins=[StrandsPlugin(models={"default": model})])
    # One worker: PlanWorkflow, every tool of TOOLS as an activity, and your workflows.
    async with plan_worker(
        client, task_queue="my-agents", registry=TOOLS, workflows=[MyAgentWorkflow]
    ):
        answer = await client.execute_workflow(
            MyAgentWorkflow.run,
            PROMPT,
            id=f"my-agent-{uuid.uuid4().hex[:8]}",
            task_queue="my-agents",
        )
    print(answer)


if __name__ == "__main__":
    run_script(main())  # asyncio.run, then exit without waiting on the SDK's threads
