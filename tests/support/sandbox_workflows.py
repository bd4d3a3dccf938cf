"""The sandbox tests' conversation: a ``TemporalAgent`` with ``TemporalSandbox("work")`` and the
plan tool, in its own module so Temporal's sandbox can re-import it."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from temporalio.contrib.workflow_streams import WorkflowStream
    from temporalio.strands_agents import TemporalAgent, TemporalSandbox

    from durable_plan.strands.plugin import WorkflowPlanPlugin
    from durable_plan.temporal.workflows.failures import root_message
    from tests.support.sandbox_support import (
        GATED_SANDBOX_TOOLS,
        NESTED_SANDBOX_TOOLS,
        SANDBOX,
        SANDBOX_TOOLS,
        SLOW_SANDBOX_TOOLS,
    )

SANDBOX_TOPIC = "sandbox"
REGISTRIES = {
    "plain": SANDBOX_TOOLS,
    "gated": GATED_SANDBOX_TOOLS,
    "slow": SLOW_SANDBOX_TOOLS,
    "nested": NESTED_SANDBOX_TOOLS,
}


@dataclass
class SandboxChatInput:
    prompts: list[str]
    tools: str = "plain"
    plannable: list[str] = field(default_factory=lambda: ["*"])
    continue_as_new: bool = False
    """Continue as new after each turn, carrying the conversation (the seed's chat pattern)."""
    messages: list[dict[str, Any]] = field(default_factory=list)
    answers: list[str] = field(default_factory=list)


@workflow.defn
class SandboxChatWorkflow:
    """One conversation in its own sandbox: each prompt is a turn; returns every tool result."""

    def __init__(self) -> None:
        self.stream = WorkflowStream()  # the sandbox's output is published on SANDBOX_TOPIC

    @workflow.run
    async def run(self, request: SandboxChatInput) -> dict[str, Any]:
        plugin = WorkflowPlanPlugin(request.plannable, registry=REGISTRIES[request.tools])
        agent = TemporalAgent(
            model="scripted",
            sandbox=TemporalSandbox(
                SANDBOX,
                start_to_close_timeout=timedelta(seconds=30),
                retry_policy=RetryPolicy(maximum_attempts=3),
                streaming_topic=SANDBOX_TOPIC,
            ),
            plugins=[plugin],
            messages=list(request.messages),  # type: ignore[arg-type]
            callback_handler=None,
            start_to_close_timeout=timedelta(seconds=30),
            retry_policy=RetryPolicy(maximum_attempts=2),
        )
        answers = list(request.answers)
        try:
            for n, prompt in enumerate(request.prompts):
                answers.append(str(await agent.invoke_async(prompt)).strip())
                rest = request.prompts[n + 1 :]
                if request.continue_as_new and rest:
                    workflow.continue_as_new(
                        replace(request, prompts=rest, messages=agent.messages, answers=answers)
                    )
        except Exception as exc:  # never leave the workflow task retrying
            if isinstance(exc, workflow.ContinueAsNewError):
                raise
            raise ApplicationError(root_message(exc), non_retryable=True) from exc
        results = [
            block["toolResult"]
            for message in agent.messages
            for block in message["content"]
            if "toolResult" in block
        ]
        return {"answers": answers, "results": results}
