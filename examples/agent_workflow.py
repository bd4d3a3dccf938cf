"""MyAgentWorkflow: a TemporalAgent whose plans run durably, each as a PlanWorkflow child.

A module of its own, not the script that runs it: Temporal's workflow sandbox re-imports
the module that defines a workflow, and a ``__main__`` script would run again inside it.
"""

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from monster_tools import TOOLS
    from temporalio.strands_agents import TemporalAgent

    from durable_plan.plugin import WorkflowPlanPlugin
    from durable_plan.temporal.agent_tools import durable_tools
    from durable_plan.temporal.failures import root_message


@workflow.defn
class MyAgentWorkflow:
    @workflow.run
    async def run(self, prompt: str) -> str:
        agent = TemporalAgent(
            model="default",  # a name registered with StrandsPlugin(models=...) on the client
            tools=durable_tools(TOOLS),  # direct calls: each one the tool's activity
            plugins=[WorkflowPlanPlugin(registry=TOOLS)],  # plans: one PlanWorkflow child each
            callback_handler=None,
            start_to_close_timeout=timedelta(seconds=120),
            retry_policy=RetryPolicy(maximum_attempts=3),
        )
        try:
            return str(await agent.invoke_async(prompt)).strip()
        except Exception as exc:
            # Fail the workflow with the root cause; an exception that is not a Temporal
            # failure would fail only the workflow task, and Temporal retries that forever.
            raise ApplicationError(root_message(exc), non_retryable=True) from exc
