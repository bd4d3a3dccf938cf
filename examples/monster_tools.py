"""The tools the examples plan with, registered once in TOOLS, and a plan a model would write."""

from typing import Any

from strands import tool

from durable_plan import ToolRegistry

MONSTERS = {"goblin": {"name": "goblin", "hp": 7, "armour": 15}}


@tool
async def look_up_monster(name: str) -> dict[str, Any]:
    """Look up a monster's stat block.

    Args:
        name: Monster name, e.g. "goblin".

    Returns:
        An object shaped {"name": str, "hp": int, "armour": int}.
    """
    return dict(MONSTERS[name])


@tool
async def roll_attack(armour: int) -> dict[str, Any]:
    """Roll an attack against an armour value.

    Args:
        armour: The target's armour, from look_up_monster's "armour" field.

    Returns:
        An object shaped {"roll": int, "hits": bool, "damage": int}.
    """
    return {"roll": 18, "hits": armour <= 18, "damage": 6 if armour <= 18 else 0}


@tool
async def apply_damage(monster: str, damage: int) -> dict[str, Any]:
    """Apply damage to a monster.

    Args:
        monster: Monster name, from look_up_monster's "name" field.
        damage: Damage dealt, from roll_attack's "damage" field.

    Returns:
        An object shaped {"hp_after": int, "defeated": bool}.
    """
    hp_after = max(MONSTERS[monster]["hp"] - damage, 0)
    return {"hp_after": hp_after, "defeated": hp_after == 0}


@tool
async def delete_files(pattern: str) -> dict[str, Any]:
    """Delete the files matching a pattern (pretend: nothing is deleted).

    Args:
        pattern: A glob, e.g. "logs/*.txt".
    """
    return {"deleted": pattern}


TOOLS = ToolRegistry()  # one registry: plan steps and direct calls, in-process and durable
TOOLS.add(look_up_monster, timeout_s=30, retries=2, heartbeat_timeout_s=5)
TOOLS.add(roll_attack, timeout_s=10, retries=0)
TOOLS.add(apply_damage, timeout_s=10)
TOOLS.add(delete_files, requires_approval=True)  # durably, its step waits for a person

ATTACK_PLAN = {
    "steps": [
        {"id": "lookup", "tool": "look_up_monster", "args": {"name": "goblin"}},
        {"id": "attack", "tool": "roll_attack", "bind": {"armour": "steps.lookup.armour"}},
        {
            "id": "damage",
            "tool": "apply_damage",
            "bind": {"monster": "steps.lookup.name", "damage": "steps.attack.damage"},
        },
    ],
    "final": True,
}
