"""Parity with strands-plan-tool: its defects here are fixed, its differences are pinned.

The first part reproduces the defects of issue 10 (one plugin on two agents,
unbounded state, interrupts, plans during an interrupt). The second pins each
deliberate difference that README's "Coming from strands-plan-tool" documents,
one test per row, so a change to any of them is a visible decision.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from strands import Agent, tool
from strands.types.tools import ToolContext
from strands.vended_interventions.hitl import HumanInTheLoop
from temporalio.client import Client

from durable_plan import plan_worker, run_plan
from durable_plan.check import check_plan
from durable_plan.language.errors import REJECTION_HEADER, PlanRejected
from durable_plan.local.runner import execute_plan
from durable_plan.strands.plugin import MAX_RESULTS_KEPT, WorkflowPlanPlugin
from durable_plan.testing import ScriptedModel, TurnLike, call, say
from durable_plan.tools.registry import ToolRegistry

RUNS: list[str] = []


@tool
def read_file(path: str) -> dict[str, Any]:
    """Read a file.

    Args:
        path: the file
    """
    RUNS.append(f"read {path}")
    return {"path": path}


@tool
def delete_files(path: str) -> dict[str, Any]:
    """Delete files.

    Args:
        path: what to delete
    """
    RUNS.append(f"delete {path}")
    return {"deleted": path}


@tool(context=True)
def confirm(question: str, tool_context: ToolContext) -> dict[str, Any]:
    """Ask a person to confirm.

    Args:
        question: what to confirm
    """
    RUNS.append("confirm")
    return {"answer": tool_context.interrupt("confirm", reason=question)}


DELETE = {
    "steps": [
        {"id": "read", "tool": "read_file", "args": {"path": "a"}},
        {"id": "rm", "tool": "delete_files", "bind": {"path": "steps.read.path"}},
    ]
}


def agent_with(plugin: WorkflowPlanPlugin, script: list[TurnLike], **kwargs: Any) -> Agent:
    return Agent(
        model=ScriptedModel(script),
        tools=[read_file, delete_files, confirm],
        plugins=[plugin],
        callback_handler=None,
        **kwargs,
    )


def texts(agent: Agent) -> list[str]:
    return [
        json.dumps(block["toolResult"])
        for message in agent.messages
        for block in message["content"]
        if "toolResult" in block
    ]


@pytest.fixture(autouse=True)
def _clear() -> None:
    RUNS.clear()


# -- defect 1: one plugin instance, two agents --------------------------------------------


def test_one_plugin_on_two_agents_is_refused_and_the_first_agent_stays_gated() -> None:
    plugin = WorkflowPlanPlugin(plannable=["*"])
    gate = HumanInTheLoop(allowed_tools=["submit_workflow_plan", "read_file"])
    gated = agent_with(
        plugin,
        [call("submit_workflow_plan", **DELETE), say("needs approval")] * 2,
        interventions=[gate],
    )
    with pytest.raises(ValueError, match="one plugin per agent"):
        agent_with(plugin, [call("submit_workflow_plan", **DELETE), say("x")])
    gated("delete a")
    assert RUNS == [], "the gated agent still refuses delete_files in a plan"
    assert "requires human approval" in texts(gated)[0]


def test_a_fresh_plugin_per_agent_keeps_state_apart() -> None:
    gate = HumanInTheLoop(allowed_tools=["submit_workflow_plan", "read_file"])
    gated = agent_with(
        WorkflowPlanPlugin(plannable=["*"]),
        [call("submit_workflow_plan", **DELETE), say("needs approval")],
        interventions=[gate],
    )
    plain = agent_with(WorkflowPlanPlugin(), [call("submit_workflow_plan", **DELETE), say("ok")])
    plain("delete a")
    assert RUNS == ["read a", "delete a"]
    RUNS.clear()
    gated("delete a")
    assert RUNS == []


async def test_the_plugin_keeps_a_bounded_history_of_results() -> None:
    plugin = WorkflowPlanPlugin()
    agent = agent_with(plugin, [])
    plan = {"steps": [{"id": "read", "tool": "read_file", "args": {"path": "p"}}]}
    for n in range(MAX_RESULTS_KEPT + 6):
        await plugin.submit(
            {"toolUseId": f"t{n}", "name": "submit_workflow_plan", "input": plan}, agent
        )
    assert len(plugin.results) == MAX_RESULTS_KEPT
    assert plugin.plans_run == MAX_RESULTS_KEPT + 6
    assert plugin._final_answers == {}


# -- defects 2 and 3: interrupts --------------------------------------------------------------


def test_an_interrupting_tool_in_a_plan_tells_the_model_to_call_it_directly() -> None:
    plan = {"steps": [{"id": "ok", "tool": "confirm", "args": {"question": "sure?"}}]}
    agent = agent_with(
        WorkflowPlanPlugin(), [call("submit_workflow_plan", **plan), say("I'll ask directly.")]
    )
    agent("confirm")
    [text] = texts(agent)
    assert "call it directly, outside the plan" in text
    assert "Interrupt(" not in text and "InterruptException" not in text


async def test_a_plan_is_refused_while_the_agent_is_interrupted() -> None:
    plugin = WorkflowPlanPlugin()
    agent = agent_with(plugin, [])
    agent._interrupt_state.activate()
    use = {"toolUseId": "t", "name": "submit_workflow_plan", "input": DELETE}
    result = await plugin.submit(use, agent)  # type: ignore[arg-type]
    assert result["status"] == "error"
    assert "waiting for a person's answer" in json.dumps(result)
    assert RUNS == []


async def test_an_interrupting_tool_in_a_durable_plan_fails_once_with_the_same_message(
    client: Client, task_queue: str
) -> None:
    registry = ToolRegistry([confirm])
    plan = {"steps": [{"id": "ok", "tool": "confirm", "args": {"question": "sure?"}}]}
    async with plan_worker(client, task_queue=task_queue, registry=registry):
        result = await asyncio.wait_for(
            run_plan(client, plan, task_queue=task_queue, registry=registry), 60
        )
    outcome = result.outcome("ok")
    assert outcome.status == "failed"
    assert outcome.error is not None and "call it directly, outside the plan" in outcome.error
    assert outcome.attempts == 1 and RUNS == ["confirm"], "never a retry loop"


# -- documented differences -----------------------------------------------------------------


def test_difference_the_peers_wrapped_input_is_accepted() -> None:
    plugin = WorkflowPlanPlugin()
    agent = agent_with(plugin, [call("submit_workflow_plan", plan=DELETE), say("done")])
    agent("delete")
    assert RUNS == ["read a", "delete a"]


def test_difference_returns_is_optional_and_defaults_to_every_ok_step() -> None:
    result = asyncio.run(execute_plan(DELETE, ToolRegistry([read_file, delete_files])))
    assert list(result.returned) == ["read", "rm"]


def test_difference_a_clean_final_plan_counts_the_model_call_it_saves() -> None:
    plan = {**DELETE, "final": True}
    result = asyncio.run(execute_plan(plan, ToolRegistry([read_file, delete_files])))
    assert result.final is True
    assert result.inference_passes_saved == 2  # one level between, plus the final call


def test_difference_final_is_false_when_the_plan_did_not_end_clean() -> None:
    plan = {**DELETE, "final": True, "steps": [*DELETE["steps"][:1], {"id": "x", "tool": "nope"}]}

    async def invoker(name: str, args: dict[str, Any]) -> Any:
        if name == "nope":
            raise RuntimeError("no")
        return {"path": "a"}

    result = asyncio.run(execute_plan(plan, invoker))
    assert result.final is False


@pytest.mark.parametrize("bad", [{"final": "yes"}, {"max_parallel": 2.0}])
def test_difference_input_is_strict_json(bad: dict[str, Any]) -> None:
    with pytest.raises(PlanRejected):
        check_plan({**DELETE, **bad})


def test_difference_eval_is_refused_at_check_time() -> None:
    plan = {"steps": [{"id": "a", "tool": "t", "bind": {"x": "$eval('1+1')"}}]}
    with pytest.raises(PlanRejected) as info:
        check_plan(plan)
    assert info.value.codes == ["forbidden_function"]


def test_difference_a_step_reading_itself_is_an_error() -> None:
    plan = {"steps": [{"id": "a", "tool": "t", "bind": {"x": "steps.a.y"}}]}
    with pytest.raises(PlanRejected) as info:
        check_plan(plan)
    assert info.value.codes == ["self_reference"]


def test_difference_later_plannable_patterns_win() -> None:
    catalog = ToolRegistry([read_file, delete_files]).catalog(["!delete_*", "*"])
    assert catalog.plannable == ["delete_files", "read_file"]
    catalog = ToolRegistry([read_file, delete_files]).catalog(["*", "!delete_*"])
    assert catalog.plannable == ["read_file"]


def test_difference_refusal_wording() -> None:
    with pytest.raises(PlanRejected) as info:
        check_plan({"steps": [{"id": "a", "tool": "t", "bind": {"x": "steps.zz"}}]})
    text = str(info.value)
    assert text.startswith(REJECTION_HEADER + "\n- step 'a', field 'bind.x': ")
    assert ". Fix: " in text
