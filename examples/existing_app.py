"""Your existing Temporal client and worker, plus durable plans: one plugin on the client.

.venv/bin/durable-plan dev                  # terminal 1 (or TEMPORAL_ADDRESS=host:port)
.venv/bin/python examples/existing_app.py
"""

import os

from existing_app_workflow import MyAppWorkflow
from monster_tools import ATTACK_PLAN, TOOLS
from temporalio.client import Client
from temporalio.strands_agents import StrandsPlugin
from temporalio.worker import Worker

from durable_plan import DurablePlanPlugin, run_script
from durable_plan.testing import ScriptedModel, call

PROMPT = "The mage attacks the goblin. Resolve the attack."
SCRIPT = {PROMPT: [call("submit_workflow_plan", **ATTACK_PLAN)]}  # or BedrockModel()


async def main() -> None:
    client = await Client.connect(
        os.environ.get("TEMPORAL_ADDRESS", "localhost:7233"),
        plugins=[
            StrandsPlugin(models={"default": lambda: ScriptedModel(scripts=SCRIPT)}),
            DurablePlanPlugin(TOOLS),  # plans, tools, recovery: on every worker of this client
        ],
    )
    async with Worker(client, task_queue="my-app", workflows=[MyAppWorkflow]):
        print(
            await client.execute_workflow(
                MyAppWorkflow.run, PROMPT, id="my-app-1", task_queue="my-app"
            )
        )


if __name__ == "__main__":
    run_script(main())  # asyncio.run, then exit without waiting on the SDK's threads
