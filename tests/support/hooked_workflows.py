"""A TemporalAgent whose owner forbids and rewrites tool calls with Strands hooks.

Its own module so the workflow sandbox can re-import it. The hooks: a
``BeforeToolCallEvent`` hook cancels ``apply_damage`` against the ogre and
halves every other damage (a rewritten input), and an ``AfterToolCallEvent``
hook marks each ``look_up_monster`` result as checked (a rewritten result).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from strands.hooks import AfterToolCallEvent, BeforeToolCallEvent
    from temporalio.strands_agents import TemporalAgent

    from activities.game_master import GAME_TOOLS
    from durable_plan.strands.plugin import WorkflowPlanPlugin
    from durable_plan.temporal.workflows.agent_tools import durable_tools


def forbid_and_halve(event: BeforeToolCallEvent) -> None:
    tool_input: dict[str, Any] = event.tool_use["input"]
    if event.tool_use["name"] != "apply_damage":
        return
    if tool_input.get("monster") == "ogre":
        event.cancel_tool = "the ogre may not be harmed"
        return
    tool_input["damage"] = tool_input["damage"] // 2


def mark_checked(event: AfterToolCallEvent) -> None:
    if event.tool_use["name"] != "look_up_monster" or event.result["status"] != "success":
        return
    [block] = event.result["content"]
    value = dict(block["json"])  # type: ignore[typeddict-item]
    value["checked"] = True
    event.result = {**event.result, "content": [{"json": value}]}


@dataclass
class HookedInput:
    prompt: str


@workflow.defn
class HookedAgentWorkflow:
    @workflow.run
    async def run(self, request: HookedInput) -> str:
        agent = TemporalAgent(
            model="scripted",
            tools=durable_tools(GAME_TOOLS),
            plugins=[WorkflowPlanPlugin(registry=GAME_TOOLS)],
            callback_handler=None,
            start_to_close_timeout=timedelta(seconds=60),
            retry_policy=RetryPolicy(maximum_attempts=2),
        )
        agent.hooks.add_callback(BeforeToolCallEvent, forbid_and_halve)
        agent.hooks.add_callback(AfterToolCallEvent, mark_checked)
        try:
            result = await agent.invoke_async(request.prompt)
        except Exception as exc:
            raise ApplicationError(f"{type(exc).__name__}: {exc}", non_retryable=True) from exc
        return str(result).strip()
