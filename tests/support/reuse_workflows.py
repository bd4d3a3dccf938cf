"""Tools, scripted conversations and an agent workflow for the reuse tests.

Its own module so the workflow sandbox can re-import it and a worker subprocess
(``tests/support/reuse_worker.py``) can load it. Every tool appends one JSON line to the
file named by ``REUSE_CALL_LOG`` (when set), so tests count real calls across
processes: a reused step must add no line.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from temporalio.strands_agents import TemporalAgent

    from durable_plan.strands.plugin import WorkflowPlanPlugin
    from durable_plan.temporal.workflows.agent_tools import durable_tools
    from durable_plan.testing import TurnLike, call, say
    from durable_plan.tools.registry import ToolRegistry

CALL_LOG_ENV = "REUSE_CALL_LOG"


def _log(tool: str, **args: Any) -> int:
    """Record one real call; returns how many calls of ``tool`` the log holds now."""
    path = os.environ.get(CALL_LOG_ENV)
    if not path:
        return 0
    with open(path, "a", encoding="utf-8") as log:
        log.write(json.dumps({"tool": tool, "args": args}) + "\n")
    with open(path, encoding="utf-8") as log:
        return sum(1 for line in log if json.loads(line)["tool"] == tool)


def calls(path: str | os.PathLike[str]) -> dict[str, int]:
    """Tool -> how many times it really ran, from a call log."""
    counts: dict[str, int] = {}
    try:
        with open(path, encoding="utf-8") as log:
            for line in log:
                tool = json.loads(line)["tool"]
                counts[tool] = counts.get(tool, 0) + 1
    except FileNotFoundError:
        pass
    return counts


async def fetch_order(order_id: str) -> dict[str, Any]:
    """Fetch an order.

    Args:
        order_id: The order, e.g. "A1".

    Returns:
        An object shaped {"order_id": str, "customer": str, "items": [{"sku": str, "qty": int}]}.
    """
    _log("fetch_order", order_id=order_id)
    return {"order_id": order_id, "customer": "c7", "items": [{"sku": "tea", "qty": 3}]}


async def get_customer(customer_id: str) -> dict[str, Any]:
    """Look up a customer.

    Args:
        customer_id: From fetch_order's "customer".

    Returns:
        An object shaped {"id": str, "name": str, "card": str}.
    """
    _log("get_customer", customer_id=customer_id)
    return {"id": customer_id, "name": "Ada", "card": "card-7"}


async def price_order(items: list[dict[str, Any]], currency: str) -> dict[str, Any]:
    """Price an order's items.

    Args:
        items: From fetch_order's "items".
        currency: "EUR" or "USD".

    Returns:
        An object shaped {"total": int, "currency": str}.
    """
    _log("price_order", currency=currency)
    total = sum(4 * item["qty"] for item in items)
    return {"total": total if currency == "EUR" else total + 1, "currency": currency}


async def charge(card: str, amount: int) -> dict[str, Any]:
    """Charge a card (a side effect: it must not happen twice).

    Args:
        card: From get_customer's "card".
        amount: From price_order's "total".

    Returns:
        An object shaped {"receipt": str, "amount": int}.
    """
    _log("charge", card=card, amount=amount)
    return {"receipt": f"r-{card}-{amount}", "amount": amount}


async def read_clock() -> dict[str, Any]:
    """Read the shop's clock (an answer that changes over time: never reused).

    Returns:
        An object shaped {"tick": int}.
    """
    return {"tick": _log("read_clock")}


async def refund(card: str, amount: int) -> dict[str, Any]:
    """Refund a card (needs a person's approval).

    Args:
        card: The card.
        amount: The amount.

    Returns:
        An object shaped {"refunded": int}.
    """
    _log("refund", card=card, amount=amount)
    return {"refunded": amount}


def reuse_registry() -> ToolRegistry:
    registry = ToolRegistry()
    for tool in (fetch_order, get_customer, price_order, charge, refund):
        registry.add(tool, timeout_s=20, retries=1, heartbeat_timeout_s=5)
    registry.add(read_clock, timeout_s=20, retries=1, reuse=False)
    return registry


REUSE_TOOLS = reuse_registry()

# -- plans -----------------------------------------------------------------------------------

ORDER = {"id": "order", "tool": "fetch_order", "args": {"order_id": "A1"}}
CUSTOMER = {
    "id": "customer",
    "tool": "get_customer",
    "bind": {"customer_id": "steps.order.customer"},
}
PRICE_EUR = {
    "id": "price",
    "tool": "price_order",
    "args": {"currency": "EUR"},
    "bind": {"items": "steps.order.items"},
}
PRICE_USD = {**PRICE_EUR, "args": {"currency": "USD"}}
CHARGE_TYPO = {
    "id": "pay",
    "tool": "charge",
    "bind": {"card": "steps.customer.card", "amount": "$lookup(steps.price, 'totl')"},
}
CHARGE = {**CHARGE_TYPO, "bind": {"card": "steps.customer.card", "amount": "steps.price.total"}}

FAILING_PLAN: dict[str, Any] = {"steps": [ORDER, CUSTOMER, PRICE_EUR, CHARGE_TYPO]}
"""The last step's binding misspells a field: it fails, the first three ran ok. The typo is
inside ``$lookup``, which the return-shape check does not follow (``steps.price.totl``
would be rejected before anything ran: price_order's docstring lists its fields)."""
REPAIR_PLAN: dict[str, Any] = {"steps": [ORDER, CUSTOMER, PRICE_USD, CHARGE], "final": True}
"""Keeps order and customer exactly (reused), changes price's currency (runs again)."""
PRIOR_PLAN: dict[str, Any] = {
    "steps": [
        {
            "id": "pay",
            "tool": "charge",
            "bind": {"card": "prior.customer.card", "amount": "prior.price.total"},
        }
    ],
    "final": True,
}
"""Continues from the failed plan's results without a step for them."""
CLOCK_PLAN: dict[str, Any] = {
    "steps": [
        {"id": "clock", "tool": "read_clock"},
        {"id": "order", "tool": "fetch_order", "args": {"order_id": "A1"}},
        {
            "id": "boom",
            "tool": "charge",
            "bind": {"card": "$lookup(steps.order, 'nope')", "amount": "1"},
        },
    ]
}
CLOCK_AGAIN: dict[str, Any] = {"steps": CLOCK_PLAN["steps"][:2], "final": True}
REFUND = {"id": "give_back", "tool": "refund", "args": {"card": "card-7", "amount": 5}}
REFUND_PLAN: dict[str, Any] = {
    "steps": [
        REFUND,
        {
            "id": "boom",
            "tool": "charge",
            "bind": {"card": "$lookup(steps.give_back, 'nope')", "amount": "1"},
        },
    ]
}
REFUND_AGAIN: dict[str, Any] = {"steps": [REFUND], "final": True}

# -- conversations: keyed by their first prompt ----------------------------------------------

REPAIR_PROMPT = "Charge order A1 in USD."
PRIOR_PROMPT = "Charge order A1, continuing from what ran."
CLOCK_PROMPT = "What time is it, and order A1?"
REFUND_PROMPT = "Refund 5 to card-7."
TWO_TURNS_PROMPT = "Charge order A1 in USD, over two turns."
TRY_AGAIN = "Try again."

SCRIPTS: dict[str, list[TurnLike]] = {
    REPAIR_PROMPT: [
        call("submit_workflow_plan", **FAILING_PLAN),
        call("submit_workflow_plan", **REPAIR_PLAN),
    ],
    PRIOR_PROMPT: [
        call("submit_workflow_plan", **FAILING_PLAN),
        call("submit_workflow_plan", **PRIOR_PLAN),
    ],
    CLOCK_PROMPT: [
        call("submit_workflow_plan", **CLOCK_PLAN),
        call("submit_workflow_plan", **CLOCK_AGAIN),
    ],
    REFUND_PROMPT: [
        call("submit_workflow_plan", **REFUND_PLAN),
        call("submit_workflow_plan", **REFUND_AGAIN),
    ],
    # A user turn between the plans: a worker can die while the conversation waits.
    TWO_TURNS_PROMPT: [
        call("submit_workflow_plan", **FAILING_PLAN),
        say("The charge failed: price.totl is not a field. Say the word and I fix it."),
        call("submit_workflow_plan", **REPAIR_PLAN),
    ],
}


# -- the agent workflow ----------------------------------------------------------------------


@dataclass
class ConversationInput:
    prompts: list[str]
    approval_required: list[str] = field(default_factory=list)
    wait_between: bool = False
    """Before each prompt after the first, wait for the ``proceed`` signal."""
    plan_options: dict[str, Any] = field(default_factory=dict)
    """``WorkflowPlanPlugin(plan_options=...)``: extra fields of each child plan's input."""
    remember_across_turns: bool = False
    """``WorkflowPlanPlugin(remember_across_turns=...)``: a later prompt may reuse steps."""


@dataclass
class ConversationOutput:
    answers: list[str]
    plans: int
    ledgers: list[list[dict[str, Any]]]
    """Per plan that ran: each step's id, status and reused_from."""
    remembered: list[str]


@workflow.defn
class ReuseConversationWorkflow:
    """A ``TemporalAgent`` conversation over several user turns, with the plan plugin."""

    def __init__(self) -> None:
        self._released = 0
        self._turns = 0

    @workflow.signal
    def proceed(self) -> None:
        self._released += 1

    @workflow.query
    def turns_done(self) -> int:
        return self._turns

    @workflow.run
    async def run(self, request: ConversationInput) -> ConversationOutput:
        plugin = WorkflowPlanPlugin(
            registry=REUSE_TOOLS,
            approval_required=request.approval_required,
            plan_options=request.plan_options,
            remember_across_turns=request.remember_across_turns,
        )
        agent = TemporalAgent(
            model="scripted",
            tools=durable_tools(REUSE_TOOLS),
            plugins=[plugin],
            callback_handler=None,
            start_to_close_timeout=timedelta(seconds=30),
            retry_policy=RetryPolicy(maximum_attempts=2),
        )
        answers: list[str] = []
        for number, prompt in enumerate(request.prompts):
            if number and request.wait_between:
                await workflow.wait_condition(lambda: self._released >= len(answers))
            try:
                result = await agent.invoke_async(prompt)
            except Exception as exc:
                raise ApplicationError(f"{type(exc).__name__}: {exc}", non_retryable=True) from exc
            answers.append(str(result).strip())
            self._turns = number + 1
        return ConversationOutput(
            answers=answers,
            plans=plugin.plans_run,
            ledgers=[
                [{"id": o.id, "status": o.status, "reused_from": o.reused_from} for o in r.ledger]
                for r in plugin.results
            ],
            remembered=plugin.memory.ids,
        )
