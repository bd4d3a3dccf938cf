"""A ``TemporalAgent`` conversation for the durable return-shape tests: one prompt, the plan
tool, and the tools of ``tests/support/shape_tools.py`` as ``SHAPES`` says."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from temporalio.strands_agents import TemporalAgent

    from durable_plan.strands.plugin import WorkflowPlanPlugin
    from durable_plan.temporal.workflows.agent_tools import durable_tools
    from durable_plan.testing import TurnLike, call, say
    from tests.support.shape_tools import MISSPELLED_PLAN, WITH_SHAPES, shape_tools

ATTACK_PROMPT = "Attack the goblin."
SCRIPTS: dict[str, list[TurnLike]] = {
    ATTACK_PROMPT: [call("submit_workflow_plan", **MISSPELLED_PLAN), say("That did not work.")],
}


@workflow.defn
class ShapeConversationWorkflow:
    """One prompt to a ``TemporalAgent`` whose plans run as ``PlanWorkflow`` children."""

    @workflow.run
    async def run(self, prompt: str) -> list[str]:
        registry = shape_tools()
        agent = TemporalAgent(
            model="scripted",
            tools=durable_tools(WITH_SHAPES),
            plugins=[WorkflowPlanPlugin(registry=registry)],
            callback_handler=None,
            start_to_close_timeout=timedelta(seconds=30),
            retry_policy=RetryPolicy(maximum_attempts=2),
        )
        try:
            await agent.invoke_async(prompt)
        except Exception as exc:
            raise ApplicationError(f"{type(exc).__name__}: {exc}", non_retryable=True) from exc
        return [
            str(part.get("text", ""))
            for message in agent.messages
            for block in message["content"]
            if "toolResult" in block
            for part in block["toolResult"]["content"]
        ]
