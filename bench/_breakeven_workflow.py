"""``BreakEvenWorkflow``: one conversation of the break-even benchmark, as a TemporalAgent.

Both arms are the same ``TemporalAgent`` with the same chain tools (each direct call
is the tool's activity); the plan arm adds ``WorkflowPlanPlugin`` and one paragraph
telling the model when to plan, as a real deployment would. It lives in its own
module because the workflow sandbox re-imports a workflow's module, which it cannot
do for ``python -m bench.breakeven`` (``__main__``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from strands.plugins import Plugin
    from temporalio.strands_agents import TemporalAgent

    from bench._breakeven_chain import CHAIN_TOOLS
    from durable_plan.strands.plugin import WorkflowPlanPlugin
    from durable_plan.temporal.workflows.agent_tools import durable_tools

SYSTEM_PROMPT = (
    "You are a Game Master's assistant running an investigation in a tabletop role-playing "
    "game. Use the tools to find facts; never guess a tool's argument. Answer in one short "
    "sentence."
)
PLAN_PARAGRAPH = (
    "You have a submit_workflow_plan tool. When you already know which tools to call and each "
    "call's arguments come from an earlier call's result, submit one plan instead of calling "
    "the tools one at a time. Each step's `bind` maps an argument to a JSONata expression over "
    '{"steps": {<id>: <result>}}, for example {"person": "steps.notice.missing"}. Read each '
    "tool's documented return shape."
)


@dataclass
class BreakEvenInput:
    prompt: str
    model: str
    plan: bool
    """The plan arm: the plugin and :data:`PLAN_PARAGRAPH`; else a plain tool-calling loop."""
    honor_final: bool = True


@dataclass
class BreakEvenOutput:
    answer: str
    cycle_count: int
    plans: int
    reported_input_tokens: int
    """The model's own ``inputTokens``, summed over calls (a provider's count when live)."""


@workflow.defn
class BreakEvenWorkflow:
    @workflow.run
    async def run(self, request: BreakEvenInput) -> BreakEvenOutput:
        plugin = (
            WorkflowPlanPlugin(registry=CHAIN_TOOLS, honor_final=request.honor_final)
            if request.plan
            else None
        )
        plugins: list[Plugin] = [plugin] if plugin is not None else []
        system = f"{SYSTEM_PROMPT}\n\n{PLAN_PARAGRAPH}" if request.plan else SYSTEM_PROMPT
        agent = TemporalAgent(
            model=request.model,
            system_prompt=system,
            tools=durable_tools(CHAIN_TOOLS),
            plugins=plugins,
            callback_handler=None,
            start_to_close_timeout=timedelta(seconds=120),
            retry_policy=RetryPolicy(maximum_attempts=3),
        )
        try:
            result = await agent.invoke_async(request.prompt)
        except ApplicationError:
            raise
        except Exception as exc:  # Strands wraps failures; never leave the task retrying
            raise ApplicationError(
                f"the agent failed: {type(exc).__name__}: {exc}", non_retryable=True
            ) from exc
        usage = result.metrics.accumulated_usage
        return BreakEvenOutput(
            answer=str(result).strip(),
            cycle_count=result.metrics.cycle_count,
            plans=plugin.plans_run if plugin is not None else 0,
            reported_input_tokens=int(usage.get("inputTokens", 0)),
        )
