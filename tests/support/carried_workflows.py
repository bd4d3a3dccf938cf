"""A conversation that continues as new after every turn, with a person's gate on a tool
(issue 45: what ``carry_over`` / ``resume`` must carry).

Its own module so the workflow sandbox can re-import it. ``CarriedConversation`` takes one
``ask`` update per turn: a prompt, or the answers to the interrupts the last turn ended with
(Strands' ``HumanInTheLoop``: ``confirm`` needs a person's yes; the other tools do not). After
every turn it continues as new, carrying the agent's messages and ``plugin.carry_over()``.
Its stream is made the way conversations were written before the stream's state was carried
(``WorkflowStream()`` in ``__init__``, without ``prior_state``): ``resume`` moves it on.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from strands import tool
    from strands.vended_interventions.hitl import HumanInTheLoop
    from temporalio.contrib.workflow_streams import WorkflowStream
    from temporalio.strands_agents import TemporalAgent

    from durable_plan.strands.carried import PlanToolState, recent_turns
    from durable_plan.strands.plugin import WorkflowPlanPlugin
    from durable_plan.temporal.workflows.agent_tools import durable_tools
    from durable_plan.temporal.workflows.failures import root_message
    from durable_plan.tools.registry import ToolRegistry

CALLS: collections.Counter[str] = collections.Counter()
"""Calls of each tool (the tests' workers run in the test process)."""


@tool
async def charge(order: str, amount: int) -> dict[str, Any]:
    """Charge an order; returns {"receipt": str}.

    Args:
        order: The order id.
        amount: The amount.
    """
    CALLS["charge"] += 1
    return {"receipt": f"r-{order}-{amount}"}


@tool
async def print_label(receipt: str) -> dict[str, Any]:
    """Print a shipping label; fails while the printer is out of paper.

    Args:
        receipt: The receipt to print it for.
    """
    CALLS["print_label"] += 1
    raise RuntimeError("the printer is out of paper")


@tool
async def ship(receipt: str) -> dict[str, Any]:
    """Ship an order; returns {"shipped": str}.

    Args:
        receipt: The order's receipt.
    """
    CALLS["ship"] += 1
    return {"shipped": receipt}


@tool
async def confirm(question: str) -> dict[str, Any]:
    """Tell the customer something (a person approves each message); returns {"sent": str}.

    Args:
        question: What to send.
    """
    CALLS["confirm"] += 1
    return {"sent": question}


CARRIED_TOOLS = ToolRegistry()
CARRIED_TOOLS.add(charge, timeout_s=10, retries=0)
CARRIED_TOOLS.add(print_label, timeout_s=10, retries=0)
CARRIED_TOOLS.add(ship, timeout_s=10, retries=0)
CARRIED_TOOLS.add(confirm, timeout_s=10, retries=0)
UNGATED = ["submit_workflow_plan", "charge", "print_label", "ship"]


@dataclass
class CarriedInput:
    messages: list[dict[str, Any]] = field(default_factory=list)
    plan_tool: PlanToolState | None = None
    run: int = 1


@dataclass
class Turn:
    prompt: str = ""
    approve: list[str] = field(default_factory=list)
    """Interrupt ids this turn answers "y" (instead of a prompt)."""


@dataclass
class TurnAnswer:
    text: str
    stop_reason: str
    interrupts: list[str]
    run: int
    remembered: list[str]
    ledgers: list[list[dict[str, Any]]]


@workflow.defn
class CarriedConversation:
    def __init__(self) -> None:
        self.stream = WorkflowStream()  # as written before the stream's state was carried
        self._turns: list[Turn] = []
        self._answers: list[TurnAnswer | ApplicationError] = []
        self._ending = False

    @workflow.update
    async def ask(self, turn: Turn) -> TurnAnswer:
        self._turns.append(turn)
        await workflow.wait_condition(lambda: bool(self._answers))
        answer = self._answers.pop(0)
        if isinstance(answer, ApplicationError):
            raise answer
        return answer

    @workflow.signal
    def end(self) -> None:
        self._ending = True

    @workflow.run
    async def run(self, request: CarriedInput) -> int:
        plugin = WorkflowPlanPlugin(
            plannable=["*"], registry=CARRIED_TOOLS, plan_stream=self.stream
        )
        plugin.resume(request.plan_tool)
        agent = TemporalAgent(
            model="scripted",
            tools=durable_tools(CARRIED_TOOLS),
            plugins=[plugin],
            interventions=[HumanInTheLoop(allowed_tools=UNGATED)],
            messages=list(request.messages),
            callback_handler=None,
            start_to_close_timeout=timedelta(seconds=60),
            retry_policy=RetryPolicy(maximum_attempts=2),
        )
        while True:
            await workflow.wait_condition(lambda: bool(self._turns) or self._ending)
            if not self._turns:
                self.stream.detach_pollers()
                await workflow.wait_condition(workflow.all_handlers_finished)
                return request.run
            self._answers.append(await self._turn(agent, plugin, self._turns.pop(0), request))
            self.stream.detach_pollers()
            await workflow.wait_condition(
                lambda: workflow.all_handlers_finished() or bool(self._turns)
            )
            if not self._turns:
                break
        workflow.continue_as_new(
            CarriedInput(
                messages=recent_turns(agent.messages),
                plan_tool=plugin.carry_over(),
                run=request.run + 1,
            )
        )

    async def _turn(
        self, agent: TemporalAgent, plugin: WorkflowPlanPlugin, turn: Turn, request: CarriedInput
    ) -> TurnAnswer | ApplicationError:
        prompt: Any = turn.prompt or [
            {"interruptResponse": {"interruptId": i, "response": "y"}} for i in turn.approve
        ]
        try:
            result = await agent.invoke_async(prompt)
        except Exception as exc:
            return ApplicationError(root_message(exc), non_retryable=True)
        return TurnAnswer(
            text=str(result).strip(),
            stop_reason=str(result.stop_reason),
            interrupts=[i.id for i in result.interrupts or []],
            run=request.run,
            remembered=plugin.memory.ids,
            ledgers=[
                [{"id": o.id, "status": o.status, "reused_from": o.reused_from} for o in r.ledger]
                for r in plugin.results
            ],
        )
