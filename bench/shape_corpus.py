"""A corpus of plausible model mistakes in a plan's dataflow, and how many the return-shape
check catches before any side effect.

    python -m bench.shape_corpus     # a second; in-process, no server, no model

The tools are realistic ones whose owners documented their results the ways the project
reads: the seed's docstring convention (``An object shaped {...}``), a ``TypedDict``, a
pydantic model, an MCP server's ``outputSchema``, and one tool that says nothing
(``dict[str, Any]``). Every plan's first step has a side effect (each tool call is
counted). The mistakes are the kinds models make on dependency edges:

  wrong field     a typo, a synonym, the abbreviation the model expected (``ac``)
  wrong nesting   a field one object too shallow or too deep, a list read as one item
  wrong type      a string field into an integer argument, a whole result, a list, a
                  literal of the wrong type in ``bind``, strings listed into a list of
                  numbers (``[steps.a.item, ...]``)
  no shape        the same mistakes on a tool that declares no shape (not caught: honest)
  right type,     a field that exists and has the argument's type but the wrong meaning
  wrong meaning   (no shape can see it)
  correct         plans with no mistake: any rejection is a false positive

Each plan runs twice with ``execute_plan``: with the tools' shapes (today) and with the
same tools but no shapes (before this check). Counted, by code: plans refused before any
tool ran, and tool calls made before a failure (side effects a repair has behind it).
Prints only; ``tests/unit/check/test_shape_corpus.py`` holds its invariants.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypedDict

from pydantic import BaseModel

from bench._report import command_line, machine_line, markdown_table
from durable_plan.language.errors import PlanRejected
from durable_plan.local.runner import execute_plan
from durable_plan.tools.registry import ToolRegistry

# -- the tools ---------------------------------------------------------------------------------


async def look_up_monster(name: str) -> dict[str, Any]:
    """Look up a monster's stat block.

    Args:
        name: Monster name, e.g. "goblin".

    Returns:
        An object shaped {"name": str, "hp": int, "armour": int}.
    """
    return {"name": name, "hp": 7, "armour": 15}


async def roll_attack(armour: int) -> dict[str, Any]:
    """Roll an attack against an armour value.

    Args:
        armour: The target's armour.

    Returns:
        An object shaped {"roll": int, "hits": bool, "damage": int}.
    """
    return {"roll": 18, "hits": armour <= 18, "damage": 6}


async def apply_damage(monster: str, damage: int) -> dict[str, Any]:
    """Apply damage to a monster.

    Args:
        monster: The monster's name.
        damage: Damage dealt.

    Returns:
        An object shaped {"hp_after": int, "defeated": bool}.
    """
    return {"hp_after": max(7 - damage, 0), "defeated": damage >= 7}


class Customer(TypedDict):
    id: str
    name: str
    email: str


class OrderLine(TypedDict):
    sku: str
    qty: int


class Order(TypedDict):
    id: str
    customer: Customer
    lines: list[OrderLine]
    total: float


async def fetch_order(order_id: str) -> Order:
    """Fetch an order (its shape: the TypedDict).

    Args:
        order_id: The order, e.g. "A1".
    """
    return {
        "id": order_id,
        "customer": {"id": "c7", "name": "Ada", "email": "ada@example.com"},
        "lines": [{"sku": "tea", "qty": 3}],
        "total": 12.5,
    }


async def send_email(to: str, subject: str) -> dict[str, Any]:
    """Send an email.

    Args:
        to: The address.
        subject: The subject line.

    Returns:
        An object shaped {"message_id": str}.
    """
    return {"message_id": f"m-{to}"}


async def refund(order_id: str, amount: float) -> dict[str, Any]:
    """Refund an order.

    Args:
        order_id: The order.
        amount: How much.

    Returns:
        An object shaped {"refund_id": str, "amount": float}.
    """
    return {"refund_id": f"r-{order_id}", "amount": amount}


class Ticket(BaseModel):
    id: int
    subject: str
    text: str
    requester: str


async def read_ticket(ticket_id: int) -> Ticket:
    """Read a support ticket (its shape: the pydantic model, closed).

    Args:
        ticket_id: The ticket.
    """
    return Ticket(id=ticket_id, subject="Refund", text="Please refund A1", requester="ada")


async def triage_ticket(text: str) -> dict[str, Any]:
    """Pick a desk for a ticket.

    Args:
        text: The ticket's text.

    Returns:
        An object shaped {"desk": str, "confidence": float, "urgent": bool}.
    """
    return {"desk": "treasury", "confidence": 0.9, "urgent": False}


async def assign(ticket_id: int, desk: str) -> dict[str, Any]:
    """Assign a ticket to a desk.

    Args:
        ticket_id: The ticket.
        desk: The desk.

    Returns:
        An object shaped {"assigned": bool}.
    """
    return {"assigned": True}


SEARCH_SHAPE = {
    "type": "object",
    "properties": {
        "query": {"type": "string"},
        "results": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"title": {"type": "string"}, "url": {"type": "string"}},
                "required": ["title", "url"],
                "additionalProperties": False,
            },
        },
    },
    "required": ["query", "results"],
    "additionalProperties": False,
}
"""An MCP server's ``outputSchema`` (FastMCP writes this for a closed pydantic model)."""


async def web_search(query: str) -> dict[str, Any]:
    """Search the web (an MCP tool: its shape is the server's outputSchema)."""
    return {"query": query, "results": [{"title": "Tea", "url": "https://tea.example"}]}


async def summarize(text: str) -> dict[str, Any]:
    """Summarize a text.

    Args:
        text: Anything.

    Returns:
        An object shaped {"summary": str}.
    """
    return {"summary": text[:20]}


async def get_weather(city: str) -> dict[str, Any]:
    """The weather in a city (its docstring says nothing of its result).

    Args:
        city: The city.
    """
    return {"city": city, "current": {"temp_c": 11.5}}


async def set_thermostat(celsius: float) -> dict[str, Any]:
    """Set the thermostat.

    Args:
        celsius: The target temperature.

    Returns:
        An object shaped {"set_to": float}.
    """
    return {"set_to": celsius}


async def quote_price(item: str) -> dict[str, Any]:
    """Quote an item's price.

    Args:
        item: The item, e.g. "tea".

    Returns:
        An object shaped {"item": str, "price": float}.
    """
    return {"item": item, "price": {"tea": 3.5, "milk": 1.25}.get(item, 2.0)}


async def sum_prices(prices: list[float]) -> dict[str, Any]:
    """Add prices up.

    Args:
        prices: The prices.

    Returns:
        An object shaped {"total": float}.
    """
    return {"total": sum(prices)}


def tools(*, shapes: bool = True) -> ToolRegistry:
    """The corpus's tools; ``shapes=False``: the same tools, declaring none (as before)."""
    registry = ToolRegistry()
    for fn in (
        look_up_monster,
        roll_attack,
        apply_damage,
        fetch_order,
        send_email,
        refund,
        read_ticket,
        triage_ticket,
        assign,
        summarize,
        get_weather,
        set_thermostat,
        quote_price,
        sum_prices,
    ):
        registry.add(fn, output_schema=None if shapes else {})
    registry.add(web_search, output_schema=SEARCH_SHAPE if shapes else {})
    return registry


# -- the corpus --------------------------------------------------------------------------------

LOOKUP = {"id": "lookup", "tool": "look_up_monster", "args": {"name": "goblin"}}
ORDER = {"id": "order", "tool": "fetch_order", "args": {"order_id": "A1"}}
TICKET = {"id": "ticket", "tool": "read_ticket", "args": {"ticket_id": 7}}
SEARCH = {"id": "search", "tool": "web_search", "args": {"query": "tea"}}
WEATHER = {"id": "weather", "tool": "get_weather", "args": {"city": "Oslo"}}


def _two(first: dict[str, Any], tool: str, **bind: str) -> dict[str, Any]:
    return {"steps": [first, {"id": "next", "tool": tool, "bind": bind}]}


def _attack(armour: str) -> dict[str, Any]:
    return _two(LOOKUP, "roll_attack", armour=armour)


def _email(to: str, subject: str = "'Your order'") -> dict[str, Any]:
    return _two(ORDER, "send_email", to=to, subject=subject)


def _triage(text: str) -> dict[str, Any]:
    return _two(TICKET, "triage_ticket", text=text)


def _summary(text: str) -> dict[str, Any]:
    return _two(SEARCH, "summarize", text=text)


def _prices(prices: str) -> dict[str, Any]:
    """The issue's fan-out: three quotes, then their sum."""
    quotes = [{"id": i, "tool": "quote_price", "args": {"item": i}} for i in ("tea", "milk", "jam")]
    return {"steps": [*quotes, {"id": "sum", "tool": "sum_prices", "bind": {"prices": prices}}]}


def _chain(damage: str) -> dict[str, Any]:
    return {
        "steps": [
            LOOKUP,
            {"id": "attack", "tool": "roll_attack", "bind": {"armour": "steps.lookup.armour"}},
            {
                "id": "hit",
                "tool": "apply_damage",
                "bind": {"monster": "steps.lookup.name", "damage": damage},
            },
        ]
    }


@dataclass(frozen=True)
class Case:
    category: str
    name: str
    plan: dict[str, Any]


CASES: tuple[Case, ...] = (
    # wrong field
    Case("wrong field", "armour as ac", _attack("steps.lookup.ac")),
    Case("wrong field", "armour as armor", _attack("steps.lookup.armor")),
    Case("wrong field", "armour as armour_class", _attack("steps.lookup.armour_class")),
    Case("wrong field", "damage as dmg", _chain("steps.attack.dmg")),
    Case("wrong field", "email as mail", _email("steps.order.customer.mail")),
    Case("wrong field", "text as body", _triage("steps.ticket.body")),
    Case("wrong field", "text as description", _triage("steps.ticket.description")),
    Case("wrong field", "results as items", _summary("$string(steps.search.items.title)")),
    Case("wrong field", "title as name", _summary("$string(steps.search.results.name)")),
    Case(
        "wrong field",
        "in a when",
        {
            "steps": [
                TICKET,
                {"id": "triage", "tool": "triage_ticket", "bind": {"text": "steps.ticket.text"}},
                {
                    "id": "assign",
                    "tool": "assign",
                    "bind": {"ticket_id": "steps.ticket.id", "desk": "steps.triage.desk"},
                    "when": "steps.triage.dept = 'treasury'",
                },
            ]
        },
    ),
    # wrong nesting
    Case("wrong nesting", "customer's email on the order", _email("steps.order.email")),
    Case("wrong nesting", "stats that are flat", _attack("steps.lookup.stats.armour")),
    Case("wrong nesting", "name one level deep", _email("steps.order.customer.name.email")),
    Case("wrong nesting", "a line's sku on the order", _email("steps.order.sku")),
    Case("wrong nesting", "a result's title on the search", _summary("steps.search.title")),
    Case("wrong nesting", "the requester as an object", _triage("steps.ticket.requester.name")),
    # wrong type
    Case("wrong type", "the name as armour", _attack("steps.lookup.name")),
    Case("wrong type", "the whole result as armour", _attack("steps.lookup")),
    Case("wrong type", "the total as an address", _email("steps.order.total")),
    Case("wrong type", "the results list as text", _summary("steps.search.results")),
    Case("wrong type", "hits as damage", _chain("steps.attack.hits")),
    Case("wrong type", "a string literal as armour", _attack("'15'")),
    Case("wrong type", "the customer object as an address", _email("steps.order.customer")),
    Case(
        "wrong type",
        "item names listed as prices",
        _prices("[steps.tea.item, steps.milk.item, steps.jam.item]"),
    ),
    # no shape to check against
    Case(
        "no shape (not caught)",
        "temp one level too shallow",
        _two(WEATHER, "set_thermostat", celsius="steps.weather.temp_c"),
    ),
    Case(
        "no shape (not caught)",
        "temp as temperature",
        _two(WEATHER, "set_thermostat", celsius="steps.weather.current.temperature"),
    ),
    # right type, wrong meaning
    Case("right type, wrong meaning (not caught)", "roll as damage", _chain("steps.attack.roll")),
    Case("right type, wrong meaning (not caught)", "hp as armour", _attack("steps.lookup.hp")),
    # correct plans
    Case("correct", "the attack", _chain("steps.attack.damage")),
    Case("correct", "the email", _email("steps.order.customer.email", "steps.order.id")),
    Case("correct", "the triage", _triage("steps.ticket.text")),
    Case("correct", "a search's titles", _summary("$join(steps.search.results.title, ', ')")),
    Case("correct", "the first result", _summary("steps.search.results[0].title")),
    Case(
        "correct",
        "the weather",
        _two(WEATHER, "set_thermostat", celsius="steps.weather.current.temp_c"),
    ),
    Case(
        "correct",
        "the prices listed",
        _prices("[steps.tea.price, steps.milk.price, steps.jam.price]"),
    ),
    Case(
        "correct",
        "a refund of the total",
        _two(ORDER, "refund", order_id="steps.order.id", amount="steps.order.total"),
    ),
)


@dataclass(frozen=True)
class Outcome:
    """One case run one way."""

    rejected: bool
    calls: int
    """Tool calls made (each one a side effect)."""
    ok: bool


async def run_case(plan: dict[str, Any], registry: ToolRegistry) -> Outcome:
    made: list[str] = []

    async def invoke(name: str, args: dict[str, Any]) -> Any:
        made.append(name)
        return await registry.invoke(name, args)

    try:
        result = await execute_plan(plan, invoke, catalog=registry.catalog())
    except PlanRejected:
        return Outcome(True, len(made), False)
    return Outcome(False, len(made), result.ok)


@dataclass(frozen=True)
class Measured:
    case: Case
    now: Outcome
    before: Outcome


async def measure(cases: Sequence[Case] = CASES) -> list[Measured]:
    with_shapes, without = tools(), tools(shapes=False)
    return [
        Measured(case, await run_case(case.plan, with_shapes), await run_case(case.plan, without))
        for case in cases
    ]


def table(measured: Sequence[Measured]) -> list[list[object]]:
    """Per category: plans; with the tools' shapes, those refused before any tool ran and
    those that ended ok; without shapes, those refused, those that failed (and the tool calls
    they made first) and those that ran to the end, the mistake unnoticed."""
    rows: list[list[object]] = []
    for category in dict.fromkeys(m.case.category for m in measured):
        group = [m for m in measured if m.case.category == category]
        failed_before = [m for m in group if not m.before.ok and not m.before.rejected]
        rows.append(
            [
                category,
                len(group),
                sum(m.now.rejected and m.now.calls == 0 for m in group),
                sum(m.now.ok for m in group),
                sum(m.before.rejected for m in group),
                len(failed_before),
                sum(m.before.calls for m in failed_before),
                sum(m.before.ok for m in group),
            ]
        )
    return rows


HEADER = [
    "category",
    "plans",
    "refused before any tool ran",
    "ran ok",
    "without shapes: refused",
    "failed at run time",
    "tool calls before those failures",
    "ran to the end (mistake unnoticed)",
]


def report(measured: Sequence[Measured], load_start: float, elapsed_s: float) -> str:
    mistakes = [
        m for m in measured if m.case.category in ("wrong field", "wrong nesting", "wrong type")
    ]
    caught = sum(m.now.rejected and m.now.calls == 0 for m in mistakes)
    lines = [
        "## Plan mistakes caught before any side effect",
        "",
        f"`{command_line('bench.shape_corpus')}`",
        "",
        machine_line(load_start, extra=f"no server; {elapsed_s:.1f} s"),
        "",
        markdown_table(HEADER, table(measured)),
        "",
        f"wrong field, wrong nesting, wrong type: {caught} of {len(mistakes)} refused before any "
        "tool ran (with the tools' shapes)",
    ]
    for m in measured:
        if m.case.category == "correct" and not m.now.ok:
            lines.append(f"FALSE POSITIVE: {m.case.name}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.parse_args(argv)
    load_start = os.getloadavg()[0]
    started = time.perf_counter()
    measured = asyncio.run(measure())
    print(report(measured, load_start, time.perf_counter() - started))


if __name__ == "__main__":
    main()
