"""WorkflowPlanPlugin on a plain Strands Agent: plans run in-process, with the scripted model."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
from strands import Agent, tool
from strands.vended_interventions.hitl import HumanInTheLoop

from durable_plan.strands.plugin import WorkflowPlanPlugin
from durable_plan.testing import ScriptedModel, TurnLike, call, say
from tests.support.helpers import tool_results
from tests.support.plan_cases import DRAGON_PLAN, GAME_MASTER_STEPS

CALLS: list[str] = []
BESTIARY = {"goblin": {"name": "goblin", "hp": 7, "armour": 15}}


@tool
def look_up_monster(name: str) -> dict[str, Any]:
    """Look up a monster's stat block.

    Args:
        name: Monster name, e.g. "goblin".

    Returns:
        An object shaped {"name": str, "hp": int, "armour": int}.
    """
    CALLS.append("look_up_monster")
    return dict(BESTIARY[name])


@tool
def roll_attack(armour: int) -> dict[str, Any]:
    """Roll an attack against an armour value.

    Args:
        armour: The target's armour.
    """
    CALLS.append("roll_attack")
    return {"roll": 18, "hits": armour <= 18, "damage": 6}


@tool
def apply_damage(monster: str, damage: int) -> dict[str, Any]:
    """Apply damage to a monster.

    Args:
        monster: Monster name.
        damage: Damage dealt.
    """
    CALLS.append("apply_damage")
    return {"hp_after": max(BESTIARY[monster]["hp"] - damage, 0), "defeated": False}


@tool
async def nap(seconds: float, label: str) -> dict[str, Any]:
    """Sleep, then echo the label.

    Args:
        seconds: How long.
        label: What to return.
    """
    await asyncio.sleep(seconds)
    return {"label": label}


TOOLS = [look_up_monster, roll_attack, apply_damage, nap]
PLAN = {"steps": GAME_MASTER_STEPS, "final": True}


def make_agent(script: list[TurnLike], **plugin_kwargs: Any) -> Agent:
    interventions = plugin_kwargs.pop("interventions", None)
    kwargs: dict[str, Any] = {"interventions": interventions} if interventions else {}
    return Agent(
        model=ScriptedModel(script),
        tools=TOOLS,
        plugins=[WorkflowPlanPlugin(**plugin_kwargs)],
        callback_handler=None,
        **kwargs,
    )


@pytest.fixture(autouse=True)
def _reset_calls() -> None:
    CALLS.clear()


def test_final_plan_ends_the_turn_after_one_model_call() -> None:
    agent = make_agent([call("submit_workflow_plan", **PLAN)])
    result = agent("The mage attacks the goblin.")
    assert result.metrics.cycle_count == 1
    answer = json.loads(str(result))
    assert answer == {
        "lookup": {"name": "goblin", "hp": 7, "armour": 15},
        "attack": {"roll": 18, "hits": True, "damage": 6},
        "damage": {"hp_after": 1, "defeated": False},
    }
    assert list(answer["lookup"]) == ["name", "hp", "armour"]
    assert CALLS == ["look_up_monster", "roll_attack", "apply_damage"]


def test_honor_final_false_asks_the_model_once_more() -> None:
    agent = make_agent(
        [call("submit_workflow_plan", **PLAN), say("The goblin has 1 hp left.")],
        honor_final=False,
    )
    result = agent("attack")
    assert result.metrics.cycle_count == 2
    assert str(result).strip() == "The goblin has 1 hp left."


def test_non_final_plan_returns_results_to_the_model() -> None:
    plan = {**PLAN, "final": False, "returns": ["damage"]}
    agent = make_agent([call("submit_workflow_plan", **plan), say("done")])
    result = agent("attack")
    assert result.metrics.cycle_count == 2
    [report] = tool_results(agent)
    assert report["status"] == "success"
    body = report["content"][0]["json"]
    assert body["returned"] == {"damage": {"hp_after": 1, "defeated": False}}
    assert body["status"] == "ok"


def test_failed_step_does_not_end_the_turn() -> None:
    agent = make_agent([call("submit_workflow_plan", **DRAGON_PLAN), say("No dragon here.")])
    result = agent("attack the dragon")
    assert result.metrics.cycle_count == 2
    [report] = tool_results(agent)
    assert report["status"] == "error"
    text = report["content"][0]["text"]
    assert "step 'lookup' (look_up_monster) failed: KeyError" in text


def test_bad_plan_reports_every_problem_and_runs_nothing() -> None:
    plan = {
        "steps": [
            {"id": "lookup", "tool": "look_up_monster", "args": {"name": "goblin"}},
            {"id": "attack", "tool": "roll_atack", "bind": {"armour": "steps.lookup.armour"}},
            {
                "id": "damage",
                "tool": "apply_damage",
                "bind": {"monster": "steps.lokup.name"},
                "args": {"damage": 1},
            },
            {"id": "again", "tool": "apply_damage", "bnid": {}},
        ]
    }
    agent = make_agent([call("submit_workflow_plan", **plan), say("I will fix it.")])
    agent("attack")
    [report] = tool_results(agent)
    text = report["content"][0]["text"]
    assert text.startswith("Plan rejected, nothing was executed:")
    assert "unknown tool 'roll_atack'" in text and "did you mean 'roll_attack'" in text
    assert "no step has id 'lokup'" in text and "did you mean 'lookup'" in text
    assert "unknown field 'bnid'" in text
    assert CALLS == []


def test_plannable_patterns_exclude_tools() -> None:
    agent = make_agent(
        [call("submit_workflow_plan", **PLAN), say("ok")], plannable=["*", "!apply_*"]
    )
    agent("attack")
    [report] = tool_results(agent)
    text = report["content"][0]["text"]
    assert "tool 'apply_damage' cannot be planned" in text
    assert "call 'apply_damage' directly" in text
    assert CALLS == []


def test_plannable_wildcards_inside_names() -> None:
    agent = make_agent(
        [call("submit_workflow_plan", **PLAN), say("ok")], plannable=["look_*", "*_attack"]
    )
    agent("attack")
    [report] = tool_results(agent)
    assert "tool 'apply_damage' cannot be planned" in report["content"][0]["text"]


def test_interventions_require_an_explicit_plannable_list() -> None:
    with pytest.raises(ValueError, match="plannable"):
        make_agent([], interventions=[HumanInTheLoop(allowed_tools=["look_up_monster"])])


def test_approval_gated_tool_is_refused_in_process() -> None:
    # The plan tool is a tool like any other: the gate must let it through.
    allowed = ["submit_workflow_plan", "look_up_monster", "roll_attack", "nap"]
    gate = HumanInTheLoop(allowed_tools=allowed)
    agent = make_agent(
        [call("submit_workflow_plan", **PLAN), say("ok")], plannable=["*"], interventions=[gate]
    )
    agent("attack")
    [report] = tool_results(agent)
    text = report["content"][0]["text"]
    assert "tool 'apply_damage' cannot be planned: it requires human approval" in text
    assert "call 'apply_damage' directly" in text
    assert CALLS == []


def test_independent_steps_run_concurrently_in_process() -> None:
    plan = {
        "steps": [
            {"id": "a", "tool": "nap", "args": {"seconds": 0.4, "label": "a"}},
            {"id": "b", "tool": "nap", "args": {"seconds": 0.4, "label": "b"}},
            {"id": "c", "tool": "nap", "args": {"seconds": 0.4, "label": "c"}},
        ],
        "final": True,
    }
    agent = make_agent([call("submit_workflow_plan", **plan)])
    started = time.monotonic()
    result = agent("nap")
    elapsed = time.monotonic() - started
    assert json.loads(str(result)) == {
        "a": {"label": "a"},
        "b": {"label": "b"},
        "c": {"label": "c"},
    }
    assert elapsed < 1.0, f"three 0.4 s steps took {elapsed:.2f} s"


def test_tool_schema_teaches_the_language() -> None:
    agent = make_agent([])
    spec = agent.tool_registry.registry["submit_workflow_plan"].tool_spec
    description = spec["description"]
    assert "$not(" in description and "= not ==" in description
    schema = spec["inputSchema"]["json"]
    assert "$ref" not in json.dumps(schema)
    assert schema["properties"]["steps"]["type"] == "array"
