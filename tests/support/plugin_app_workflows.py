"""The "existing app" workflow ``test_durable_plan_plugin.py`` runs: the user's own workflow,
with a ``TemporalAgent`` whose plan tool plugin also gives it the registry's tools directly,
and the user's own activity after the agent.

Its own module so the workflow sandbox can re-import it.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from temporalio.strands_agents import TemporalAgent

    from durable_plan.strands.plugin import WorkflowPlanPlugin
    from durable_plan.temporal.workflows.failures import fail_on_agent_error
    from tests.support.plugin_app_tools import APP_TOOLS, note_answer


@workflow.defn
class AppConversation:
    @workflow.run
    async def run(self, prompt: str) -> dict[str, Any]:
        agent = TemporalAgent(
            model="scripted",
            plugins=[WorkflowPlanPlugin(registry=APP_TOOLS)],
            callback_handler=None,
            start_to_close_timeout=timedelta(seconds=60),
            retry_policy=RetryPolicy(maximum_attempts=2),
        )
        with fail_on_agent_error():
            answer = str(await agent.invoke_async(prompt)).strip()
        noted = await workflow.execute_activity(
            note_answer, answer, start_to_close_timeout=timedelta(seconds=10)
        )
        used = [
            block["toolUse"]["name"]
            for message in agent.messages
            for block in message["content"]
            if "toolUse" in block
        ]
        statuses = [
            block["toolResult"]["status"]
            for message in agent.messages
            for block in message["content"]
            if "toolResult" in block
        ]
        return {"answer": answer, "noted": noted, "tools_used": used, "statuses": statuses}


@workflow.defn
class FailingConversation:
    """An agent whose model is not registered: the helper ends the workflow, saying why."""

    @workflow.run
    async def run(self, prompt: str) -> str:
        agent = TemporalAgent(
            model="no-such-model",
            plugins=[WorkflowPlanPlugin(registry=APP_TOOLS)],
            callback_handler=None,
            start_to_close_timeout=timedelta(seconds=10),
            retry_policy=RetryPolicy(maximum_attempts=1),
        )
        with fail_on_agent_error():
            return str(await agent.invoke_async(prompt))
