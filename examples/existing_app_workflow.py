"""Your workflow, with an agent that plans: a TemporalAgent and the plan tool plugin.

A module of its own: Temporal's workflow sandbox re-imports the module that defines a workflow.
"""

from datetime import timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from monster_tools import TOOLS
    from temporalio.strands_agents import TemporalAgent

    from durable_plan import WorkflowPlanPlugin, fail_on_agent_error


@workflow.defn
class MyAppWorkflow:
    @workflow.run
    async def run(self, prompt: str) -> str:
        agent = TemporalAgent(
            model="default",  # a name registered with StrandsPlugin(models=...)
            plugins=[WorkflowPlanPlugin(registry=TOOLS)],  # plans, and each tool directly
            callback_handler=None,
            start_to_close_timeout=timedelta(seconds=120),
        )
        with fail_on_agent_error():  # an agent's error ends the workflow, with its root cause
            return str(await agent.invoke_async(prompt)).strip()
