"""The corpus's tools, scripts and conversation workflow: frozen.

A corpus (``tests/corpus/recorded.py``; a published release's under
``tests/histories/<version>/``) is recorded with this code as the user's side (the tools a
plan calls, the conversation workflow that hosts the agent) and the library of that
version as durable-plan's side. Replaying it on a later version tests durable-plan's
workflow code alone, so once a release's corpus depends on this module it must keep doing
exactly what it did: add new names, never change old ones.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from temporalio import activity, workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from strands import tool
    from strands.hooks import AfterToolCallEvent, BeforeToolCallEvent
    from temporalio.strands_agents import TemporalAgent

    from durable_plan.strands.plugin import WorkflowPlanPlugin
    from durable_plan.temporal.workflows.agent_tools import durable_tools
    from durable_plan.tools.registry import ToolRegistry

MONSTERS = {"goblin": {"name": "goblin", "hp": 7, "armour": 15}}


@tool
async def look_up_monster(name: str) -> dict[str, Any]:
    """Look up a monster; returns {"name", "hp", "armour"}.

    Args:
        name: The monster.
    """
    return dict(MONSTERS.get(name, {"name": name, "hp": 10, "armour": 10}))


@tool
async def roll_attack(armour: int) -> dict[str, Any]:
    """Roll an attack; returns {"roll", "hits", "damage"}.

    Args:
        armour: The target's armour.
    """
    return {"roll": 18, "hits": armour <= 18, "damage": 6 if armour <= 18 else 0}


@tool
async def apply_damage(monster: str, damage: int) -> dict[str, Any]:
    """Apply damage; returns {"hp_after", "defeated"}.

    Args:
        monster: The monster.
        damage: The damage.
    """
    hp = MONSTERS.get(monster, {"hp": 10})["hp"]
    return {"hp_after": max(hp - damage, 0), "defeated": hp <= damage}


@tool
async def fail(message: str) -> dict[str, Any]:
    """Always fails.

    Args:
        message: Why.
    """
    raise RuntimeError(message)


@tool
async def hold(seconds: float) -> dict[str, Any]:
    """Wait, heartbeating; returns {"held": seconds}.

    Args:
        seconds: How long.
    """
    waited = 0.0
    while waited < seconds:
        await asyncio.sleep(0.1)
        waited += 0.1
        if activity.in_activity():
            activity.heartbeat()
    return {"held": seconds}


@tool
async def report(kib: int) -> str:
    """A report of ``kib`` KiB.

    Args:
        kib: Its size.
    """
    return "r" * (kib * 1024)


@tool
async def measure(text: str) -> dict[str, Any]:
    """Measure a text; returns {"chars"}.

    Args:
        text: The text.
    """
    return {"chars": len(text)}


@tool
async def refund(order: str) -> dict[str, Any]:
    """Refund an order (needs a person); returns {"refunded"}.

    Args:
        order: The order.
    """
    return {"refunded": order}


def corpus_tools() -> ToolRegistry:
    registry = ToolRegistry()
    registry.add(look_up_monster, timeout_s=10, retries=1)
    registry.add(roll_attack, timeout_s=10, allow_local=True)
    registry.add(apply_damage, timeout_s=10, local=True)
    registry.add(fail, timeout_s=10, retries=0)
    registry.add(hold, timeout_s=60, retries=1, heartbeat_timeout_s=2)
    registry.add(report, timeout_s=10)
    registry.add(measure, timeout_s=10)
    registry.add(refund, timeout_s=10, requires_approval=True)
    return registry


CORPUS_TOOLS = corpus_tools()

ATTACK = {
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
BROKEN_ATTACK = {
    "steps": [
        {"id": "lookup", "tool": "look_up_monster", "args": {"name": "goblin"}},
        {"id": "attack", "tool": "roll_attack", "bind": {"armour": "steps.lookup.armour"}},
        {
            "id": "damage",
            "tool": "apply_damage",
            "bind": {"monster": "steps.lookup.name", "damage": "steps.attack.dmg"},
        },
    ],
    "final": True,
}
AGENT_PLAN = {
    "steps": [
        {"id": "lookup", "tool": "look_up_monster", "args": {"name": "goblin"}},
        {
            "id": "morale",
            "tool": "agent",
            "args": {
                "prompt": "Does the {{ steps.lookup.name }} flee?",
                "output_schema": {
                    "type": "object",
                    "properties": {"flees": {"type": "boolean"}},
                    "required": ["flees"],
                },
                "tools": ["look_up_monster"],
                "max_iterations": 3,
            },
        },
    ],
    "final": True,
}


def scripts() -> dict[str, list[Any]]:
    """The scripted model's answers, by first prompt."""
    from durable_plan.testing import call, output

    return {
        "attack": [call("submit_workflow_plan", **ATTACK)],
        "morale": [call("submit_workflow_plan", **AGENT_PLAN)],
        "repair": [
            call("submit_workflow_plan", **BROKEN_ATTACK),
            call("submit_workflow_plan", **ATTACK),
        ],
        "Does the goblin flee?": [
            call("look_up_monster", name="goblin"),
            output({"flees": True}),
        ],
    }


@dataclass
class ConversationInput:
    prompt: str
    hooks: bool = False


@workflow.defn(name="CorpusConversation")
class CorpusConversation:
    """A TemporalAgent with the plan tool; with ``hooks``, its owner rewrites tool calls."""

    @workflow.run
    async def run(self, request: ConversationInput) -> dict[str, Any]:
        plugin = WorkflowPlanPlugin(registry=CORPUS_TOOLS)
        agent = TemporalAgent(
            model="scripted",
            tools=durable_tools(CORPUS_TOOLS),
            plugins=[plugin],
            callback_handler=None,
            start_to_close_timeout=timedelta(seconds=60),
            retry_policy=RetryPolicy(maximum_attempts=2),
        )
        if request.hooks:
            agent.hooks.add_callback(BeforeToolCallEvent, _halve_damage)
            agent.hooks.add_callback(AfterToolCallEvent, _mark_lookups)
        try:
            result = await agent.invoke_async(request.prompt)
        except Exception as exc:
            raise ApplicationError(f"{type(exc).__name__}: {exc}", non_retryable=True) from exc
        return {"answer": str(result).strip(), "plans": plugin.plans_run}


def _halve_damage(event: BeforeToolCallEvent) -> None:
    if event.tool_use["name"] == "apply_damage":
        event.tool_use["input"]["damage"] = event.tool_use["input"]["damage"] // 2  # type: ignore[index]


def _mark_lookups(event: AfterToolCallEvent) -> None:
    if event.tool_use["name"] != "look_up_monster" or event.result["status"] != "success":
        return
    [block] = event.result["content"]
    value = dict(block["json"])  # type: ignore[typeddict-item]
    value["checked"] = True
    event.result = {**event.result, "content": [{"json": value}]}
