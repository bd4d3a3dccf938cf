"""A plain Strands agent with the plan tool: plans run in-process, no server.

python examples/plain_agent.py          # offline: a scripted model writes the plan
python examples/plain_agent.py --live   # Bedrock writes it (AWS credentials needed)
"""

import asyncio
import sys

from monster_tools import ATTACK_PLAN, apply_damage, look_up_monster, roll_attack
from strands import Agent

from durable_plan import WorkflowPlanPlugin
from durable_plan.testing import ScriptedModel, call

PROMPT = "The mage attacks the goblin. Resolve the attack."


def model() -> object:
    if "--live" in sys.argv:
        from strands.models.bedrock import BedrockModel

        return BedrockModel()
    # Offline: the one tool call a real model makes for this prompt.
    return ScriptedModel(scripts={PROMPT: [call("submit_workflow_plan", **ATTACK_PLAN)]})


async def main() -> None:
    agent = Agent(
        model=model(),
        tools=[look_up_monster, roll_attack, apply_damage],
        plugins=[WorkflowPlanPlugin()],  # adds submit_workflow_plan
        callback_handler=None,
    )
    result = await agent.invoke_async(PROMPT)
    # The plan was final: its results are the answer, with no second model call.
    print(str(result).strip())
    print(f"model calls: {result.metrics.cycle_count}")


if __name__ == "__main__":
    asyncio.run(main())
