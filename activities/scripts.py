"""What the offline scripted model says: the plans a real model writes for the demo.

The scripted model replays these (keyed by the conversation's first prompt), so
the demo and the tests run the real Strands loop and the real model activities
with no network. With ``--live`` a real model writes its own plans instead.
"""

from __future__ import annotations

from typing import Any

from durable_plan.testing import TurnLike, call
from durable_plan.testing.scripted_model import output

ATTACK_PROMPT = "The mage attacks the goblin. Resolve the attack and tell me the outcome."
ROUND_PROMPT = "Run combat round 1 against the ogre and narrate it."
MORALE_PROMPT = "The mage hits the goblin again. Does the wounded goblin flee?"

ATTACK_PLAN: dict[str, Any] = {
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


def _player_steps(index: int, letter: str) -> list[dict[str, Any]]:
    player = f"steps.log.actions[{index}].player"
    return [
        {"id": f"char_{letter}", "tool": "get_character", "bind": {"name": player}},
        {
            "id": f"roll_{letter}",
            "tool": "roll_check",
            "bind": {
                "character": f"steps.char_{letter}.name",
                "attack_bonus": f"steps.char_{letter}.attack_bonus",
            },
        },
        {
            "id": f"hit_{letter}",
            "tool": "resolve_action",
            "bind": {
                "character": f"steps.char_{letter}.name",
                "total": f"steps.roll_{letter}.total",
                "damage": f"steps.char_{letter}.damage",
                "target": "steps.log.target",
            },
        },
    ]


ROUND_PLAN: dict[str, Any] = {
    "steps": [
        {"id": "log", "tool": "read_action_log", "args": {"round_number": 1}},
        *_player_steps(0, "a"),
        *_player_steps(1, "b"),
        *_player_steps(2, "c"),
        {
            "id": "tally",
            "tool": "tally_round",
            "bind": {
                "damages": "[steps.hit_a.damage, steps.hit_b.damage, steps.hit_c.damage]",
                "target": "steps.log.target",
            },
        },
        {
            "id": "narrate",
            "tool": "narrate_round",
            "bind": {
                "target": "steps.tally.target",
                "total_damage": "steps.tally.total_damage",
                "hp_after": "steps.tally.hp_after",
            },
        },
    ],
    "returns": ["tally", "narrate"],
    "final": True,
}

# An agent step decides what a plan cannot know in advance: whether the monster flees
# depends on what it finds when it looks around (the action log, the other monsters).
MORALE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["flees", "reason"],
    "properties": {"flees": {"type": "boolean"}, "reason": {"type": "string"}},
}
MORALE_PLAN: dict[str, Any] = {
    "steps": [
        *ATTACK_PLAN["steps"],
        {
            "id": "morale",
            "tool": "agent",
            "args": {
                "prompt": "Morale check for the {{ steps.lookup.name }}, now at "
                "{{ steps.damage.hp_after }} of {{ steps.lookup.hp }} hp. Look around (round 1's "
                "action log, the monsters fighting beside it) and decide whether it flees.",
                "output_schema": MORALE_SCHEMA,
                "tools": ["read_action_log", "look_up_monster"],
                "max_iterations": 4,
            },
        },
    ],
    "returns": ["damage", "morale"],
    "final": True,
}
MORALE_LOOP: list[TurnLike] = [
    call("read_action_log", round_number=1),
    call("look_up_monster", name="ogre"),
    output(
        {
            "flees": True,
            "reason": "At 1 of 7 hp, with the party fighting the ogre beside it, the goblin runs.",
        }
    ),
]

DEMO_SCRIPTS: dict[str, list[TurnLike]] = {
    ATTACK_PROMPT: [call("submit_workflow_plan", **ATTACK_PLAN)],
    ROUND_PROMPT: [call("submit_workflow_plan", **ROUND_PLAN)],
    MORALE_PROMPT: [call("submit_workflow_plan", **MORALE_PLAN)],
    # The agent step's own conversation starts with its rendered prompt.
    "Morale check for the goblin": MORALE_LOOP,
}
