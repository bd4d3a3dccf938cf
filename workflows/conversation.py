"""``GameMasterConversation``: a conversation of many turns that never outgrows its history.

Each ``ask`` update is one turn of the same agent (it sees every earlier turn). Past
``continue_after_events`` events in its history (or when Temporal suggests it), between two
turns, the workflow continues as new, carrying the agent's newest messages (whole turns within
1 MiB: ``recent_turns``) and what the plan tool needs (its memory of steps, its plan count:
``WorkflowPlanPlugin.carry_over``). Without that, a conversation that runs for weeks would hit
Temporal's 51,200-event or 50 MB limit and be terminated by the server; with it, the next run
picks up where the last left off. A turn that fails fails its ``ask`` only.

Each plan it starts is announced on its stream (``plan_stream``), which a caller follows with
``conversation_events`` across the runs: the stream's state is carried too (in the plan tool's
state), so the next run's offsets go on where the last run's ended.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from temporalio.contrib.workflow_streams import WorkflowStream
    from temporalio.strands_agents import TemporalAgent

    from activities.game_master import GAME_TOOLS
    from durable_plan.strands.carried import PlanToolState, recent_turns
    from durable_plan.strands.plugin import WorkflowPlanPlugin
    from durable_plan.temporal.workflows.agent_tools import durable_tools
    from durable_plan.temporal.workflows.failures import root_message
    from workflows.game_master import SYSTEM_PROMPT

DEFAULT_CONTINUE_AFTER_EVENTS = 10_000
"""Well below Temporal's 51,200-event limit: one turn with a large plan adds a few hundred."""
MAX_PROMPT_CHARS = 100_000
"""A turn's prompt, at most: refused by the update's validator, before it enters history."""


@dataclass
class ConversationInput:
    model: str = "scripted"
    continue_after_events: int = DEFAULT_CONTINUE_AFTER_EVENTS
    remember_across_turns: bool = True
    """A later turn's plan may reuse the steps of an earlier turn's (a conversation about one
    thing); the plugin's default forgets them at each new request."""
    # Carried from the previous run by continue-as-new (empty in the first run):
    messages: list[dict[str, Any]] = field(default_factory=list)
    plan_tool: PlanToolState | None = None
    turns: int = 0
    run: int = 1


@dataclass
class ConversationStatus:
    turns: int
    run: int
    """Which run of the conversation this is: 1, then one more per continue-as-new."""
    plans: int
    remembered_steps: list[str]


@workflow.defn
class GameMasterConversation:
    @workflow.init
    def __init__(self, request: ConversationInput) -> None:
        # Made here (the stream's handlers must exist before any query), from the state the
        # previous run carried: its offsets go on, so a follower misses nothing.
        carried = request.plan_tool.stream if request.plan_tool is not None else None
        self.stream = WorkflowStream(prior_state=carried)
        self._asked: list[tuple[int, str]] = []
        self._answers: dict[int, str | ApplicationError] = {}
        self._tickets = 0
        self._ending = False
        self._status = ConversationStatus(0, 1, 0, [])

    @workflow.update
    async def ask(self, prompt: str) -> str:
        """One turn: the agent's answer to ``prompt``, after every turn asked before it."""
        ticket = self._tickets
        self._tickets += 1
        self._asked.append((ticket, prompt))
        await workflow.wait_condition(lambda: ticket in self._answers)
        answer = self._answers.pop(ticket)
        if isinstance(answer, ApplicationError):
            raise answer  # this turn fails; the conversation goes on
        return answer

    @ask.validator
    def _check_prompt(self, prompt: str) -> None:
        if self._ending:
            raise ValueError("the conversation is ending: start a new one")
        if not prompt.strip():
            raise ValueError("ask needs a prompt")
        if len(prompt) > MAX_PROMPT_CHARS:
            raise ValueError(f"a prompt is at most {MAX_PROMPT_CHARS:,} characters")

    @workflow.signal
    def end(self) -> None:
        """Finish after the turns already asked."""
        self._ending = True

    @workflow.query
    def status(self) -> ConversationStatus:
        return self._status

    @workflow.run
    async def run(self, request: ConversationInput) -> ConversationStatus:
        plugin = WorkflowPlanPlugin(
            registry=GAME_TOOLS,
            remember_across_turns=request.remember_across_turns,
            plan_stream=self.stream,
        )
        plugin.resume(request.plan_tool)
        agent = TemporalAgent(
            model=request.model,
            system_prompt=SYSTEM_PROMPT,
            tools=durable_tools(GAME_TOOLS),
            plugins=[plugin],
            messages=list(request.messages),
            callback_handler=None,
            start_to_close_timeout=timedelta(seconds=120),
            retry_policy=RetryPolicy(maximum_attempts=3),
        )
        turns = request.turns
        self._update_status(request, turns, plugin)
        while True:
            await workflow.wait_condition(lambda: bool(self._asked) or self._ending)
            if not self._asked:
                await self._close_stream()
                return self._status
            ticket, prompt = self._asked.pop(0)
            self._answers[ticket] = await self._turn(agent, prompt)
            turns += 1
            self._update_status(request, turns, plugin)
            if self._asked or not self._history_is_long(request):
                continue
            # Let the answered update return first; a turn asked meanwhile runs here. The
            # stream's long-poll subscribers (updates) are let go first, or they would hold
            # the run open: the run's last items stay readable by query after it closed.
            self.stream.detach_pollers()
            await workflow.wait_condition(
                lambda: workflow.all_handlers_finished() or bool(self._asked)
            )
            if self._asked:
                continue
            workflow.continue_as_new(
                ConversationInput(
                    model=request.model,
                    continue_after_events=request.continue_after_events,
                    remember_across_turns=request.remember_across_turns,
                    messages=recent_turns(agent.messages),
                    plan_tool=plugin.carry_over(),
                    turns=turns,
                    run=request.run + 1,
                )
            )

    async def _close_stream(self) -> None:
        """Hand the stream's waiting subscribers what is left, then let the run complete."""
        self.stream.detach_pollers()
        await workflow.wait_condition(workflow.all_handlers_finished)

    async def _turn(self, agent: TemporalAgent, prompt: str) -> str | ApplicationError:
        """The answer, or the failure the caller of ``ask`` gets: a turn that fails (the
        model's activity out of retries, a plan tool error) must not fail the workflow task,
        which would retry forever and strand every later turn."""
        try:
            return str(await agent.invoke_async(prompt)).strip()
        except Exception as exc:
            return ApplicationError(
                f"the turn failed: {root_message(exc)}", type="TurnFailed", non_retryable=True
            )

    def _history_is_long(self, request: ConversationInput) -> bool:
        info = workflow.info()
        long = info.get_current_history_length() >= request.continue_after_events
        return long or info.is_continue_as_new_suggested()

    def _update_status(
        self, request: ConversationInput, turns: int, plugin: WorkflowPlanPlugin
    ) -> None:
        self._status = ConversationStatus(turns, request.run, plugin.plans_run, plugin.memory.ids)
