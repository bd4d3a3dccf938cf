"""The conversation ``tests/durable/plans/test_call_paths.py`` runs durably: a ``TemporalAgent``
with the
registry's tools for direct calls, the plan tool, and the owner's hook.

Its own module so the workflow sandbox can re-import it.
"""

from __future__ import annotations

import json
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from strands.hooks import BeforeToolCallEvent
    from temporalio.strands_agents import TemporalAgent

    from durable_plan.strands.plugin import WorkflowPlanPlugin
    from durable_plan.temporal.workflows.agent_tools import durable_tools
    from durable_plan.temporal.workflows.failures import root_message
    from tests.support.call_path_tools import TOOLS, owners_hook


@workflow.defn
class CallPathsWorkflow:
    """One request; returns what every tool call of the conversation handed back."""

    @workflow.run
    async def run(self, prompt: str) -> str:
        agent = TemporalAgent(
            model="scripted",
            tools=durable_tools(TOOLS),
            plugins=[WorkflowPlanPlugin(registry=TOOLS)],
            callback_handler=None,
            start_to_close_timeout=timedelta(seconds=60),
            retry_policy=RetryPolicy(maximum_attempts=2),
        )
        agent.hooks.add_callback(BeforeToolCallEvent, owners_hook)
        try:
            await agent.invoke_async(prompt)
        except Exception as exc:  # never leave the workflow task retrying
            raise ApplicationError(root_message(exc), non_retryable=True) from exc
        results = [
            block["toolResult"]
            for message in agent.messages
            for block in message["content"]
            if "toolResult" in block
        ]
        return json.dumps(results)
