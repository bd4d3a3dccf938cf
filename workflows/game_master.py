"""``GameMasterWorkflow``: a ``TemporalAgent`` that can hand over whole plans.

Each model call is an activity (temporalio-strands-agents); each submitted plan
is a ``PlanWorkflow`` child; each plan step is one of the game tools' activities.
A crash anywhere resumes from history: completed model rounds are not asked
again, completed steps do not run again.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from strands.vended_interventions.hitl import HumanInTheLoop
    from temporalio.contrib.workflow_streams import WorkflowStream
    from temporalio.strands_agents import TemporalAgent

    from activities.game_master import GAME_TOOLS
    from durable_plan.language.errors import REJECTION_HEADER
    from durable_plan.run.events import add_usage, usage_of
    from durable_plan.strands.plugin import WorkflowPlanPlugin
    from durable_plan.temporal.workflows.agent_tools import durable_tools
    from durable_plan.temporal.workflows.failures import root_message

SYSTEM_PROMPT = (
    "You are a Game Master for a tabletop role-playing game.\n\n"
    "You have a submit_workflow_plan tool. When you already know which tools to call and each "
    "call's arguments come from an earlier call's result, submit one plan instead of calling "
    "the tools one at a time. Each step's `bind` maps an argument to a JSONata expression over "
    '{"steps": {<id>: <result>}}, for example {"armour": "steps.monster.armour"}. Read each '
    "tool's documented return shape."
)


@dataclass
class GameMasterInput:
    prompt: str
    model: str = "scripted"
    honor_final: bool = True
    plannable: list[str] | None = None
    approval_required: list[str] = field(default_factory=list)
    # Tools that run without a person's approval; every other tool is gated by Strands'
    # HumanInTheLoop intervention (None: no intervention).
    hitl_allowed_tools: list[str] | None = None


@dataclass
class GameMasterOutput:
    answer: str | dict[str, Any]
    """The agent's words, or, when a final plan ended the turn, its returned results as the
    object they are (the web UI shows it as an object, not JSON inside a string)."""
    model_round_trips: int
    plain_loop_round_trips: int
    stop_reason: str
    plans: int
    agent_step_rounds: int = 0
    """Model calls made inside agent steps (each is a round of its own loop)."""
    steps_run: int = 0
    """Plan steps whose tool ran, over every plan of the conversation."""
    steps_reused: int = 0
    """Plan steps that kept an earlier plan's result instead of running (a repair)."""
    conversation_tokens: dict[str, int] | None = None
    """The conversation's own model calls: input, output and total tokens."""
    agent_step_tokens: dict[str, int] | None = None
    """The model calls inside its plans' agent steps."""
    plans_rejected: int = 0
    """Plans the check refused before anything ran (the model corrected them)."""


@workflow.defn
class GameMasterWorkflow:
    def __init__(self) -> None:
        # Announces each plan it starts; the caller follows their steps (client.py).
        self.stream = WorkflowStream()

    @workflow.run
    async def run(self, request: GameMasterInput) -> GameMasterOutput:
        try:
            return await self._converse(request)
        finally:
            self.stream.detach_pollers()
            # The stream's subscribers are answered before the conversation completes.
            await workflow.wait_condition(workflow.all_handlers_finished)

    async def _converse(self, request: GameMasterInput) -> GameMasterOutput:
        plugin = WorkflowPlanPlugin(
            request.plannable,
            registry=GAME_TOOLS,
            honor_final=request.honor_final,
            approval_required=request.approval_required,
            plan_stream=self.stream,
            # The demo shows all the web UI can: each plan's table of steps and each step's
            # summary (the default is the plan's one-line summary: every byte is history).
            plan_options={"ui_metadata": "full"},
        )
        interventions = []
        if request.hitl_allowed_tools is not None:
            interventions.append(HumanInTheLoop(allowed_tools=request.hitl_allowed_tools))
        agent = TemporalAgent(
            model=request.model,
            system_prompt=SYSTEM_PROMPT,
            tools=durable_tools(GAME_TOOLS),
            plugins=[plugin],
            interventions=interventions,
            callback_handler=None,
            summary="game master: model call",  # what each invoke_model row of the web UI is
            start_to_close_timeout=timedelta(seconds=120),
            retry_policy=RetryPolicy(maximum_attempts=3),
        )
        try:
            result = await agent.invoke_async(request.prompt)
        except ApplicationError:
            raise
        except Exception as exc:  # Strands wraps failures; never leave the task retrying
            # The root cause, not "ActivityError: Activity task failed": the web UI and the
            # client show only this message.
            raise ApplicationError(
                f"the agent failed: {root_message(exc)}", type="AgentFailed", non_retryable=True
            ) from exc
        # One model round trip per level a plain loop would call tools at; a level whose
        # steps all kept an earlier plan's result (a repair) calls nothing.
        depth = sum(
            sum(any(r.outcome(sid).reused_from is None for sid in level) for level in r.levels)
            for r in plugin.results
        )
        return GameMasterOutput(
            answer=_answer(str(result).strip()),
            model_round_trips=result.metrics.cycle_count,
            plain_loop_round_trips=depth + 1 if plugin.results else result.metrics.cycle_count,
            stop_reason=str(result.stop_reason),
            plans=plugin.plans_run,
            agent_step_rounds=sum(
                value.get("iterations", 0)
                for r in plugin.results
                for o in r.ledger
                if o.tool == "agent" and isinstance(value := r.returned.get(o.id), dict)
            ),
            steps_run=sum(o.attempts > 0 for r in plugin.results for o in r.ledger),
            steps_reused=sum(o.reused_from is not None for r in plugin.results for o in r.ledger),
            conversation_tokens=usage_of(dict(result.metrics.accumulated_usage)),
            agent_step_tokens=_plans_usage(plugin.results),
            plans_rejected=_rejections(agent.messages),
        )


def _rejections(messages: Any) -> int:
    """The plan tool's results that refused a plan before anything ran."""
    return sum(
        1
        for message in messages
        for block in message["content"]
        if "toolResult" in block
        and block["toolResult"]["status"] == "error"
        and any(
            str(part.get("text", "")).startswith(REJECTION_HEADER)
            for part in block["toolResult"]["content"]
        )
    )


def _plans_usage(results: Any) -> dict[str, int] | None:
    total: dict[str, int] | None = None
    for plan in results:
        total = add_usage(total, plan.usage)
    return total


def _answer(text: str) -> str | dict[str, Any]:
    """A final plan's answer is its returned results as JSON text: kept as the object."""
    if text.startswith("{"):
        try:
            value = json.loads(text)
        except ValueError:
            return text
        if isinstance(value, dict):
            return value
    return text
