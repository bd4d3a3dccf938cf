"""A conversation that declares a ``direct_calls`` query of its own
(``tests/durable/plans/test_call_paths.py``):
the direct calls' query must not take it over, as their ``approve_step`` does not.

Its own module so the workflow sandbox can re-import it.
"""

from __future__ import annotations

import json
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from temporalio.strands_agents import TemporalAgent

    from durable_plan.temporal.workflows.agent_tools import durable_tools
    from durable_plan.temporal.workflows.failures import root_message
    from tests.support.call_path_tools import TOOLS

OWN_ANSWER = "the user's own direct_calls"


@workflow.defn
class OwnQueryWorkflow:
    """One request; returns every tool result of the conversation, as ``CallPathsWorkflow``."""

    @workflow.query
    def direct_calls(self) -> str:
        return OWN_ANSWER

    @workflow.run
    async def run(self, prompt: str) -> str:
        agent = TemporalAgent(
            model="scripted",
            tools=durable_tools(TOOLS),
            callback_handler=None,
            start_to_close_timeout=timedelta(seconds=60),
            retry_policy=RetryPolicy(maximum_attempts=2),
        )
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
