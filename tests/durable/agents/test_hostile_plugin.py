"""The plugin always answers the model: hostile results and internal errors become messages."""

from __future__ import annotations

from typing import Any

from strands import Agent, tool

from durable_plan.check import ToolCatalog
from durable_plan.strands.plugin import WorkflowPlanPlugin
from durable_plan.testing import ScriptedModel, TurnLike, call, say
from durable_plan.tools.registry import ToolRegistry


@tool
def huge_number() -> dict[str, Any]:
    """Return a number of 5,001 digits."""
    return {"n": 10**5000}


@tool
def echo(value: Any) -> Any:
    """Return the value.

    Args:
        value: anything
    """
    return value


def agent(script: list[TurnLike], plugin: WorkflowPlanPlugin | None = None) -> Agent:
    return Agent(
        model=ScriptedModel(script),
        tools=[huge_number, echo],
        plugins=[plugin or WorkflowPlanPlugin()],
        callback_handler=None,
    )


def tool_texts(a: Agent) -> list[str]:
    return [
        str(block["toolResult"])
        for message in a.messages
        for block in message["content"]
        if "toolResult" in block
    ]


def test_a_huge_integer_result_reaches_the_model_as_a_failed_step() -> None:
    plan = {"steps": [{"id": "n", "tool": "huge_number"}], "final": True}
    a = agent([call("submit_workflow_plan", **plan), say("The number was too large.")])
    result = a("How big?")
    assert str(result).strip() == "The number was too large."
    [text] = tool_texts(a)
    assert "step 'n' (huge_number) failed" in text
    assert "64 bits" in text


class BrokenPlugin(WorkflowPlanPlugin):
    def catalog(self, registry: ToolRegistry, *, durable: bool) -> ToolCatalog:
        raise RuntimeError("catalog exploded")


def test_an_unexpected_error_in_the_plugin_is_a_message_not_a_crash() -> None:
    plan = {"steps": [{"id": "a", "tool": "echo", "args": {"value": 1}}]}
    a = agent(
        [call("submit_workflow_plan", **plan), say("I will call echo directly.")],
        BrokenPlugin(),
    )
    result = a("Echo 1")
    assert str(result).strip() == "I will call echo directly."
    [text] = tool_texts(a)
    assert "The plan failed as a whole: RuntimeError: catalog exploded" in text
