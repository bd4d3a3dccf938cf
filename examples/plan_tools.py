"""The tools the plans in ``examples/plans/`` run against: a tools module for the command line.

A tools module is any importable module (or ``.py`` file) with a module-level
``registry``, a ``durable_plan.ToolRegistry``; ``durable-plan run --tools
examples.plan_tools`` and ``durable-plan worker --tools examples.plan_tools`` load
it (``MODULE:NAME`` picks another attribute, a registry or a list of tools).

The game master's tools come from ``activities/game_master.py``; the ticket desk
and the party's strikes are defined here. ``refund_payment`` needs a person's
approval: durably its step waits for ``durable-plan approve``; in-process the plan
is refused at check time. ``GAME_MASTER_TOOL_DELAY`` (seconds) makes every tool
sleep first, so a run lasts long enough to watch.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from activities.game_master import (
    CHARACTERS,
    FIXED_ROLLS,
    apply_damage,
    look_up_monster,
    narrate_round,
    roll_attack,
    tally_round,
)
from durable_plan import ToolRegistry

TICKETS: dict[int, dict[str, Any]] = {
    7: {"id": 7, "customer": "ada", "text": "I was charged twice for order 1182, please refund."},
    8: {"id": 8, "customer": "bo", "text": "The app crashes when I open settings."},
}


async def _pause() -> None:
    delay = float(os.environ.get("GAME_MASTER_TOOL_DELAY", "0") or 0)
    if delay > 0:
        await asyncio.sleep(delay)


async def strike(character: str, armour: int) -> dict[str, Any]:
    """One character's attack against a monster's armour.

    Args:
        character: Character name: aria, brom or cyra.
        armour: The target's armour, from look_up_monster's "armour" field.

    Returns:
        An object shaped {"character": str, "hit": bool, "damage": int}.
    """
    await _pause()
    sheet = CHARACTERS[character.lower()]
    total = FIXED_ROLLS.get(character.lower(), 10) + sheet["attack_bonus"]
    hit = total >= armour
    return {"character": character, "hit": hit, "damage": sheet["damage"] if hit else 0}


async def read_ticket(ticket_id: int) -> dict[str, Any]:
    """Read a support ticket.

    Args:
        ticket_id: The ticket's number.

    Returns:
        An object shaped {"id": int, "customer": str, "text": str}.
    """
    await _pause()
    if ticket_id not in TICKETS:
        raise KeyError(f"no ticket {ticket_id}; known: {', '.join(map(str, TICKETS))}")
    return dict(TICKETS[ticket_id])


async def triage_ticket(text: str) -> dict[str, Any]:
    """Route a ticket's text to a desk.

    Args:
        text: The ticket's text.

    Returns:
        An object shaped {"desk": "treasury" | "engineering", "confidence": float}.
    """
    await _pause()
    money = any(word in text.lower() for word in ("refund", "charged", "payment"))
    return {"desk": "treasury" if money else "engineering", "confidence": 0.92 if money else 0.7}


async def refund_payment(ticket_id: int) -> dict[str, Any]:
    """Refund the payment a ticket is about (needs a person's approval).

    Args:
        ticket_id: The ticket's number.

    Returns:
        An object shaped {"ticket_id": int, "refunded": bool}.
    """
    await _pause()
    return {"ticket_id": ticket_id, "refunded": True}


async def escalate_to_human(ticket_id: int) -> dict[str, Any]:
    """Hand a ticket to a person.

    Args:
        ticket_id: The ticket's number.

    Returns:
        An object shaped {"ticket_id": int, "queue": str}.
    """
    await _pause()
    return {"ticket_id": ticket_id, "queue": "tier-2"}


async def notify(ticket_id: int, outcomes: list[Any]) -> dict[str, Any]:
    """Tell the customer what happened.

    Args:
        ticket_id: The ticket's number.
        outcomes: The results of the steps that ran (refund or escalation).

    Returns:
        An object shaped {"ticket_id": int, "message": str}.
    """
    await _pause()
    done = [o for o in outcomes if isinstance(o, dict)]
    if any(o.get("refunded") for o in done):
        message = "Your payment was refunded."
    else:
        message = "A person on our team will get back to you."
    return {"ticket_id": ticket_id, "message": message}


registry = ToolRegistry()
for _tool in (look_up_monster, roll_attack, apply_damage, tally_round, narrate_round, strike):
    registry.add(_tool, timeout_s=30, retries=2)
for _tool in (read_ticket, triage_ticket, escalate_to_human, notify):
    registry.add(_tool, timeout_s=30, retries=2)
registry.add(refund_payment, timeout_s=30, retries=0, requires_approval=True)

__all__ = ["registry"]
