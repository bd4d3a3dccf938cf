"""Deterministic tools for the shared plan cases.

Plain typed functions (some sync, some async) so the same tools run in-process
through ``case_invoker`` and, registered as Temporal activities, in the durable
runner. Every result is plain JSON (except ``not_json``, on purpose), nothing
reads a clock or a random source, and nothing touches global state.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Any

# -- the game master from the seed -------------------------------------------------

BESTIARY: dict[str, dict[str, Any]] = {
    "goblin": {"name": "goblin", "hp": 7, "armour": 15},
    "troll": {"name": "troll", "hp": 30, "armour": 19},
}


def look_up_monster(name: str) -> dict[str, Any]:
    """Look up a monster's stat block. Returns {"name": str, "hp": int, "armour": int}."""
    return dict(BESTIARY[name.lower()])


def roll_attack(armour: int) -> dict[str, Any]:
    """Roll an attack against an armour value. Returns {"roll", "hits", "damage"}."""
    roll = 18
    hits = roll >= armour
    return {"roll": roll, "hits": hits, "damage": 6 if hits else 0}


def apply_damage(monster: str, damage: int) -> dict[str, Any]:
    """Apply damage to a monster. Returns {"hp_after": int, "defeated": bool}."""
    hp_after = max(BESTIARY[monster.lower()]["hp"] - damage, 0)
    return {"hp_after": hp_after, "defeated": hp_after == 0}


# -- ticket triage from the seed ---------------------------------------------------

TICKETS: dict[int, str] = {
    7: "I was charged twice for my subscription this month, please refund one payment.",
    8: "The export button crashes the app on every click.",
    9: "URGENT: a card payment was taken three times, refund now.",
}


def read_ticket(ticket_id: int) -> dict[str, Any]:
    """Read a support ticket. Returns {"id": int, "text": str}."""
    return {"id": ticket_id, "text": TICKETS[ticket_id]}


def triage_ticket(text: str) -> dict[str, Any]:
    """Pick the desk that owns a ticket. Returns {"desk": str, "confidence": float, "urgent": bool}.

    Deterministic stand-in for a small decision model: ticket 7 scores 0.54 for
    treasury, so a 0.5 threshold refunds and a 0.8 threshold escalates.
    """
    lowered = text.lower()
    urgent = "urgent" in lowered
    if "charged twice" in lowered:
        return {"desk": "treasury", "confidence": 0.54, "urgent": urgent}
    if "refund" in lowered or "payment" in lowered:
        return {"desk": "treasury", "confidence": 0.93, "urgent": urgent}
    return {"desk": "engineering", "confidence": 0.88, "urgent": urgent}


def refund_payment(ticket_id: int) -> dict[str, Any]:
    """Refund the ticket's payment. Returns {"ticket_id": int, "refunded": bool}."""
    return {"ticket_id": ticket_id, "refunded": True}


def escalate_to_human(ticket_id: int) -> dict[str, Any]:
    """Hand a ticket to a person. Returns {"ticket_id": int, "queue": str}."""
    return {"ticket_id": ticket_id, "queue": "humans"}


def route_ticket(ticket_id: int, desk: str, urgent: bool) -> dict[str, Any]:
    """Route a ticket. Returns {"ticket_id": int, "desk": str, "priority": str}."""
    return {"ticket_id": ticket_id, "desk": desk, "priority": "high" if urgent else "normal"}


def notify(ticket_id: int, outcomes: list[Any]) -> dict[str, Any]:
    """Tell the customer what happened. Returns {"ticket_id": int, "message": str, "count": int}."""
    return {
        "ticket_id": ticket_id,
        "message": f"ticket {ticket_id}: {len(outcomes)} action(s) taken",
        "count": len(outcomes),
    }


# -- the three-player combat round from the seed ----------------------------------

ACTION_LOG: dict[int, list[dict[str, Any]]] = {
    1: [
        {"player": "aria", "action": "sword", "target": "troll"},
        {"player": "bram", "action": "firebolt", "target": "troll"},
        {"player": "cass", "action": "arrow", "target": "troll"},
    ]
}

CHARACTERS: dict[str, dict[str, Any]] = {
    "aria": {"name": "aria", "class": "fighter", "bonus": 5, "damage_die": 8},
    "bram": {"name": "bram", "class": "wizard", "bonus": 6, "damage_die": 10},
    "cass": {"name": "cass", "class": "ranger", "bonus": 2, "damage_die": 6},
}

# Fixed d20 rolls per player, so the round is deterministic.
ROLLS: dict[str, int] = {"aria": 14, "bram": 9, "cass": 8}


def read_action_log(round: int) -> dict[str, Any]:
    """Read a combat round's declared actions.

    Returns {"round": int, "actions": [{"player": str, "action": str, "target": str}]}.
    """
    return {"round": round, "actions": [dict(a) for a in ACTION_LOG[round]]}


def get_character(name: str) -> dict[str, Any]:
    """A character sheet. Returns {"name", "class", "bonus": int, "damage_die": int}."""
    return dict(CHARACTERS[name])


def roll_check(name: str, bonus: int) -> dict[str, Any]:
    """Roll d20 + bonus. Returns {"name": str, "roll": int, "total": int}."""
    roll = ROLLS[name]
    return {"name": name, "roll": roll, "total": roll + bonus}


def resolve_action(name: str, total: int, armour: int, damage_die: int) -> dict[str, Any]:
    """Resolve an attack. Returns {"name": str, "hit": bool, "damage": int}."""
    hit = total >= armour
    return {"name": name, "hit": hit, "damage": damage_die if hit else 0}


def tally_round(damages: list[int]) -> dict[str, Any]:
    """Add up a round. Returns {"total": int, "hits": int}."""
    return {"total": sum(damages), "hits": sum(1 for d in damages if d > 0)}


def narrate_round(round: int, total: int, hits: int) -> dict[str, Any]:
    """One line of narration. Returns {"text": str}."""
    return {"text": f"Round {round}: {hits} of 3 attacks land for {total} damage."}


# -- small utilities ---------------------------------------------------------------


def add(a: float, b: float) -> float:
    """a + b."""
    return a + b


def echo(value: Any) -> Any:
    """Return value unchanged."""
    return value


async def async_echo(value: Any) -> Any:
    """Return value unchanged, after yielding to the event loop once."""
    await asyncio.sleep(0)
    return value


def concat(items: list[Any]) -> str:
    """Join the items' string forms with '+'."""
    return "+".join(str(i) for i in items)


def total(damages: list[int]) -> dict[str, int]:
    """Returns {"total": sum of damages}."""
    return {"total": sum(damages)}


def count(items: list[Any]) -> dict[str, int]:
    """Returns {"count": len(items)}."""
    return {"count": len(items)}


def fail(message: str = "boom") -> Any:
    """Always raises RuntimeError(message)."""
    raise RuntimeError(message)


async def sleep_echo(seconds: float, value: Any = None) -> Any:
    """Sleep, then return value."""
    await asyncio.sleep(seconds)
    return value


def not_json() -> Any:
    """Returns an object that is not JSON (to test how the engine reports it)."""
    return object()


def nothing() -> None:
    """Returns null."""
    return None


CASE_TOOLS: dict[str, Callable[..., Any]] = {
    fn.__name__: fn
    for fn in (
        look_up_monster,
        roll_attack,
        apply_damage,
        read_ticket,
        triage_ticket,
        refund_payment,
        escalate_to_human,
        route_ticket,
        notify,
        read_action_log,
        get_character,
        roll_check,
        resolve_action,
        tally_round,
        narrate_round,
        add,
        echo,
        async_echo,
        concat,
        total,
        count,
        fail,
        sleep_echo,
        not_json,
        nothing,
    )
}


async def case_invoker(name: str, args: dict[str, Any]) -> Any:
    """Call ``CASE_TOOLS[name](**args)``, awaiting it if it is a coroutine."""
    result = CASE_TOOLS[name](**args)
    if inspect.isawaitable(result):
        result = await result
    return result
