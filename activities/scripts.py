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
REPAIR_PROMPT = "The fighter attacks the skeleton. Resolve the attack."

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


# One map per stage of a player's turn: the plan does not need to know how many
# players act (the model writes it without reading the action log first).
ROUND_PLAN: dict[str, Any] = {
    "steps": [
        {"id": "log", "tool": "read_action_log", "args": {"round_number": 1}},
        {
            "id": "chars",
            "tool": "map",
            "bind": {"over": "steps.log.actions"},
            "args": {"do": {"tool": "get_character", "bind": {"name": "item.player"}}},
        },
        {
            "id": "rolls",
            "tool": "map",
            "bind": {"over": "steps.chars.results"},
            "args": {
                "do": {
                    "tool": "roll_check",
                    "bind": {"character": "item.name", "attack_bonus": "item.attack_bonus"},
                }
            },
        },
        {
            "id": "hits",
            "tool": "map",
            "bind": {"over": "steps.rolls.results"},
            "args": {
                "do": {
                    "tool": "resolve_action",
                    "bind": {
                        "character": "item.character",
                        "total": "item.total",
                        "damage": "steps.chars.results[$index].damage",
                        "target": "steps.log.target",
                    },
                }
            },
        },
        {
            "id": "tally",
            "tool": "tally_round",
            "bind": {"damages": "[steps.hits.results.damage]", "target": "steps.log.target"},
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

# A repair: the first plan misspells the attack's field in its last step. roll_attack's
# docstring lists what it returns, so the check rejects the plan before anything runs (no
# dice are rolled for nothing), and the corrected plan is the only one that runs.
SKELETON_STEPS: list[dict[str, Any]] = [
    {"id": "lookup", "tool": "look_up_monster", "args": {"name": "skeleton"}},
    {"id": "attack", "tool": "roll_attack", "bind": {"armour": "steps.lookup.armour"}},
    {
        "id": "damage",
        "tool": "apply_damage",
        "bind": {"monster": "steps.lookup.name", "damage": "steps.attack.dmg"},
    },
]
MISSPELLED_PLAN: dict[str, Any] = {"steps": SKELETON_STEPS}
REPAIRED_PLAN: dict[str, Any] = {
    "steps": [
        *SKELETON_STEPS[:2],
        {
            **SKELETON_STEPS[2],
            "bind": {"monster": "steps.lookup.name", "damage": "steps.attack.damage"},
        },
    ],
    "final": True,
}

DEMO_SCRIPTS: dict[str, list[TurnLike]] = {
    ATTACK_PROMPT: [call("submit_workflow_plan", **ATTACK_PLAN)],
    ROUND_PROMPT: [call("submit_workflow_plan", **ROUND_PLAN)],
    MORALE_PROMPT: [call("submit_workflow_plan", **MORALE_PLAN)],
    REPAIR_PROMPT: [
        call("submit_workflow_plan", **MISSPELLED_PLAN),
        call("submit_workflow_plan", **REPAIRED_PLAN),
    ],
    # The agent step's own conversation starts with its rendered prompt.
    "Morale check for the goblin": MORALE_LOOP,
}
