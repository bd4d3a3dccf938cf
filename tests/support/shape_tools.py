"""Tools for the durable return-shape tests, and a switch for their shapes.

Imported through the workflow sandbox (``imports_passed_through``), so ``SHAPES`` is one
object for the test and for the workflow code it replays: a conversation recorded while
the tools declared no shape can be replayed after they do, as a conversation recorded
before return shapes existed is replayed by a worker that has them.
"""

from __future__ import annotations

import json
import os
from typing import Any

from durable_plan.tools.registry import ToolRegistry

CALL_LOG_ENV = "SHAPE_CALL_LOG"
SHAPES = {"declared": True}
"""False: the registry's tools declare no shape (as before return shapes existed)."""


def _log(tool: str) -> None:
    path = os.environ.get(CALL_LOG_ENV)
    if path:
        with open(path, "a") as fh:
            fh.write(json.dumps({"tool": tool}) + "\n")


def calls(path: str | os.PathLike[str]) -> list[str]:
    """The tools that really ran, in order, from a call log."""
    try:
        with open(path) as fh:
            return [json.loads(line)["tool"] for line in fh if line.strip()]
    except FileNotFoundError:
        return []


async def look_up_monster(name: str) -> dict[str, Any]:
    """Look up a monster's stat block.

    Args:
        name: Monster name, e.g. "goblin".

    Returns:
        An object shaped {"name": str, "hp": int, "armour": int}.
    """
    _log("look_up_monster")
    return {"name": name, "hp": 7, "armour": 15}


async def roll_attack(armour: int) -> dict[str, Any]:
    """Roll an attack against an armour value.

    Args:
        armour: The target's armour, from look_up_monster's "armour" field.

    Returns:
        An object shaped {"roll": int, "hits": bool, "damage": int}.
    """
    _log("roll_attack")
    return {"roll": 18, "hits": armour <= 18, "damage": 6}


def _registry(declared: bool) -> ToolRegistry:
    registry = ToolRegistry()
    for fn in (look_up_monster, roll_attack):
        # {} declares no shape: the docstring is not read.
        registry.add(fn, timeout_s=10, retries=0, output_schema=None if declared else {})
    return registry


WITH_SHAPES = _registry(True)
WITHOUT_SHAPES = _registry(False)


def shape_tools() -> ToolRegistry:
    """The registry as ``SHAPES`` says (read in workflow code at each plan)."""
    return WITH_SHAPES if SHAPES["declared"] else WITHOUT_SHAPES


MISSPELLED_PLAN: dict[str, Any] = {
    "steps": [
        {"id": "lookup", "tool": "look_up_monster", "args": {"name": "goblin"}},
        {"id": "attack", "tool": "roll_attack", "bind": {"armour": "steps.lookup.ac"}},
    ]
}
"""The issue's plan: ``ac`` is not a field of look_up_monster's result."""
