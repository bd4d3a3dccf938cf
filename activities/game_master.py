"""The game master's tools: plain functions with documented return shapes.

Every tool ends its docstring with the exact shape it returns, because a model
writing a plan binds to those field names (``steps.lookup.armour``) before it
has seen a single result. ``GAME_TOOLS`` registers them once; the worker turns
each into an activity and the agent gets them as tools for direct calls.

``GAME_MASTER_TOOL_DELAY`` (seconds, default 0) makes every tool sleep first,
as a stand-in for real I/O in demos, benchmarks and crash tests.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from durable_plan.tools.registry import ToolRegistry

BESTIARY: dict[str, dict[str, Any]] = {
    "goblin": {"name": "goblin", "hp": 7, "armour": 15},
    "ogre": {"name": "ogre", "hp": 59, "armour": 11},
    "skeleton": {"name": "skeleton", "hp": 13, "armour": 13},
}

CHARACTERS: dict[str, dict[str, Any]] = {
    "aria": {"name": "aria", "class": "fighter", "attack_bonus": 5, "damage": 8},
    "brom": {"name": "brom", "class": "cleric", "attack_bonus": 3, "damage": 5},
    "cyra": {"name": "cyra", "class": "mage", "attack_bonus": 4, "damage": 10},
}

# Deterministic dice: a demo that prints the same story every run.
FIXED_ROLLS: dict[str, int] = {"aria": 14, "brom": 9, "cyra": 12}


async def _pause() -> None:
    delay = float(os.environ.get("GAME_MASTER_TOOL_DELAY", "0") or 0)
    if delay > 0:
        await asyncio.sleep(delay)


async def look_up_monster(name: str) -> dict[str, Any]:
    """Look up a monster's stat block.

    Args:
        name: Monster name, e.g. "goblin".

    Returns:
        An object shaped {"name": str, "hp": int, "armour": int}.
    """
    await _pause()
    key = name.lower()
    if key not in BESTIARY:
        raise KeyError(f"no monster named {name!r}; known: {', '.join(BESTIARY)}")
    return dict(BESTIARY[key])


async def roll_attack(armour: int) -> dict[str, Any]:
    """Roll an attack against an armour value.

    Args:
        armour: The target's armour, from look_up_monster's "armour" field.

    Returns:
        An object shaped {"roll": int, "hits": bool, "damage": int}.
    """
    await _pause()
    roll = 18
    hits = roll >= armour
    return {"roll": roll, "hits": hits, "damage": 6 if hits else 0}


async def apply_damage(monster: str, damage: int) -> dict[str, Any]:
    """Apply damage to a monster.

    Args:
        monster: Monster name, from look_up_monster's "name" field.
        damage: Damage dealt, from roll_attack's "damage" field.

    Returns:
        An object shaped {"hp_after": int, "defeated": bool}.
    """
    await _pause()
    hp_after = max(BESTIARY[monster.lower()]["hp"] - damage, 0)
    return {"hp_after": hp_after, "defeated": hp_after == 0}


async def read_action_log(round_number: int) -> dict[str, Any]:
    """Read what each player declared for a combat round.

    Args:
        round_number: The round, starting at 1.

    Returns:
        An object shaped {"round": int, "target": str, "actions": [{"player": str,
        "action": str}]}, one action per player, always in the order aria, brom, cyra.
    """
    await _pause()
    actions = [
        {"player": "aria", "action": "swing her longsword"},
        {"player": "brom", "action": "bring down his mace"},
        {"player": "cyra", "action": "cast fire bolt"},
    ]
    return {"round": round_number, "target": "ogre", "actions": actions}


async def get_character(name: str) -> dict[str, Any]:
    """Get a player character's sheet.

    Args:
        name: The player's character name, from read_action_log's actions[].player.

    Returns:
        An object shaped {"name": str, "class": str, "attack_bonus": int, "damage": int}.
    """
    await _pause()
    return dict(CHARACTERS[name.lower()])


async def roll_check(character: str, attack_bonus: int) -> dict[str, Any]:
    """Roll a d20 attack check for a character.

    Args:
        character: Character name.
        attack_bonus: From get_character's "attack_bonus".

    Returns:
        An object shaped {"character": str, "roll": int, "total": int}.
    """
    await _pause()
    roll = FIXED_ROLLS.get(character.lower(), 10)
    return {"character": character, "roll": roll, "total": roll + attack_bonus}


async def resolve_action(character: str, total: int, damage: int, target: str) -> dict[str, Any]:
    """Resolve one character's attack against the target's armour.

    Args:
        character: Character name.
        total: The check total, from roll_check's "total".
        damage: The character's damage, from get_character's "damage".
        target: Monster name, from read_action_log's "target".

    Returns:
        An object shaped {"character": str, "hit": bool, "damage": int}.
    """
    await _pause()
    hit = total >= BESTIARY[target.lower()]["armour"]
    return {"character": character, "hit": hit, "damage": damage if hit else 0}


async def tally_round(damages: list[int], target: str) -> dict[str, Any]:
    """Add up the round's damage against the target.

    Args:
        damages: Damage of each action, e.g. [steps.a.damage, steps.b.damage].
        target: Monster name.

    Returns:
        An object shaped {"target": str, "total_damage": int, "hp_after": int,
        "defeated": bool}.
    """
    await _pause()
    total = sum(damages)
    hp_after = max(BESTIARY[target.lower()]["hp"] - total, 0)
    return {
        "target": target,
        "total_damage": total,
        "hp_after": hp_after,
        "defeated": hp_after == 0,
    }


async def narrate_round(target: str, total_damage: int, hp_after: int) -> dict[str, Any]:
    """Narrate the round's outcome in one sentence.

    Args:
        target: Monster name.
        total_damage: From tally_round's "total_damage".
        hp_after: From tally_round's "hp_after".

    Returns:
        An object shaped {"text": str}.
    """
    await _pause()
    if hp_after == 0:
        text = f"The {target} falls after taking {total_damage} damage."
    else:
        text = f"The {target} staggers, {total_damage} damage dealt, {hp_after} hp left."
    return {"text": text}


GAME_TOOLS = ToolRegistry()
for _tool in (
    look_up_monster,
    roll_attack,
    apply_damage,
    read_action_log,
    get_character,
    roll_check,
    resolve_action,
    tally_round,
    narrate_round,
):
    # Heartbeats let Temporal notice a crashed worker within seconds, not at the timeout.
    GAME_TOOLS.add(_tool, timeout_s=30, retries=2, heartbeat_timeout_s=5)
