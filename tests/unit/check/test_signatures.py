"""A plan-only agent: the plan tool's description states each plannable tool the model is not
sent a spec of as a typed signature, so an agent whose only tool is the plan tool can plan.

``WorkflowPlanPlugin(signatures=None)`` (the default) signs exactly the tools the agent does
not carry itself; ``True`` signs every one, ``False`` none. The sizes are pinned in
``test_spec_size.py``.
"""

from __future__ import annotations

import json
from typing import Any, TypedDict

from strands import Agent, tool

from durable_plan.check.shapes.text import describe_signature
from durable_plan.language.schema import plan_tool_description
from durable_plan.strands.plugin import WorkflowPlanPlugin
from durable_plan.strands.tool_description import needs_signature
from durable_plan.testing import ScriptedModel, call
from durable_plan.tools.registry import ToolRegistry
from tests.support.helpers import tool_results


class Order(TypedDict):
    """An order."""

    order_id: str
    total: float


def fetch_order(order_id: str, full: bool = False) -> Order:
    """Fetch an order by its id.

    More lines the signature leaves to the tool's own spec.

    Args:
        order_id: the order's id
        full: with every line item
    """
    return Order(order_id=order_id, total=12.5)


def refund(order_id: str, amount: float) -> dict[str, Any]:
    """Refund part of an order.

    Returns:
        An object shaped {"refund_id": str, "amount": float}

    Args:
        order_id: the order's id
        amount: how much
    """
    return {"refund_id": f"r-{order_id}", "amount": amount}


def _plan_tool_description(agent: Agent) -> str:
    [spec] = [
        s for s in agent.tool_registry.get_all_tool_specs() if s["name"] == "submit_workflow_plan"
    ]
    return str(spec["description"])


def _agent(plugin: WorkflowPlanPlugin, tools: list[Any], script: list[Any] | None = None) -> Agent:
    return Agent(
        model=ScriptedModel(script or []), tools=tools, plugins=[plugin], callback_handler=None
    )


def test_a_signature_has_typed_arguments_the_return_shape_and_the_first_line() -> None:
    [spec] = [tool(fetch_order).tool_spec]
    line = describe_signature(
        "fetch_order",
        spec["inputSchema"]["json"],
        spec["description"],
        {
            "type": "object",
            "properties": {"order_id": {"type": "string"}},
            "required": ["order_id"],
        },
    )
    assert (
        line == "fetch_order(order_id: str, full?: bool) -> {order_id: str, ...}: "
        "Fetch an order by its id."
    )
    nested = {
        "type": "object",
        "properties": {
            "tags": {"type": "array", "items": {"type": "string"}},
            "mode": {"enum": ["a", "b"]},
        },
        "required": ["mode"],
    }
    assert describe_signature("t", nested) == 't(tags?: [str], mode: "a"|"b")'


def test_a_plan_only_agent_is_described_every_tool_it_can_plan() -> None:
    registry = ToolRegistry([fetch_order, refund])
    text = _plan_tool_description(
        _agent(WorkflowPlanPlugin(registry=registry, direct_tools=False), [])
    )
    assert "Tools you can plan (arg?: optional):\n" in text
    assert (
        "\nfetch_order(order_id: str, full?: bool) -> {order_id: str, total: float}: "
        "Fetch an order by its id." in text
    )
    # The docstring's Returns: shape, which only the tool's own description had, comes along.
    assert (
        "\nrefund(order_id: str, amount: float) -> {refund_id: str, amount: float}: "
        "Refund part of an order." in text
    )
    assert "More lines" not in text and "with every line item" not in text
    # It cannot call them directly: a single call is a plan too.
    assert "a single call is a plan of one step" in text and "call the tool directly" not in text


def test_an_agent_that_carries_the_tools_gets_names_only() -> None:
    registry = ToolRegistry([fetch_order, refund])
    agent = _agent(WorkflowPlanPlugin(registry=registry), [tool(fetch_order), tool(refund)])
    text = _plan_tool_description(agent)
    assert "(arg?: optional)" not in text and "fetch_order(" not in text
    assert "Tools you can plan: fetch_order {order_id: str, total: float}; refund." in text
    assert "for a single call, call the tool directly" in text


def test_only_the_tools_the_agent_does_not_carry_are_signed() -> None:
    registry = ToolRegistry([fetch_order, refund])
    text = _plan_tool_description(
        _agent(WorkflowPlanPlugin(registry=registry, direct_tools=False), [tool(fetch_order)])
    )
    assert "Tools you can plan: fetch_order {order_id: str, total: float}." in text
    assert "\nAlso plannable (arg?: optional):\nrefund(order_id: str, amount: float)" in text
    assert "for a single call, call the tool directly" in text  # fetch_order can be


def test_the_flag_overrides_what_the_agent_carries() -> None:
    registry = ToolRegistry([fetch_order, refund])
    carried = [tool(fetch_order), tool(refund)]
    signed = _plan_tool_description(
        _agent(WorkflowPlanPlugin(registry=registry, signatures=True), carried)
    )
    assert "\nfetch_order(order_id: str, full?: bool)" in signed
    bare = _plan_tool_description(
        _agent(WorkflowPlanPlugin(registry=registry, signatures=False), [])
    )
    assert "fetch_order(" not in bare and "Tools you can plan: fetch_order {" in bare


def test_a_plain_agent_without_a_registry_is_unchanged() -> None:
    text = _plan_tool_description(_agent(WorkflowPlanPlugin(), [tool(fetch_order)]))
    assert "fetch_order(" not in text and "Tools you can plan" not in text
    # signatures=True there: its own tools, signed although it carries them.
    signed = _plan_tool_description(
        _agent(WorkflowPlanPlugin(signatures=True), [tool(fetch_order)])
    )
    assert "\nAlso plannable (arg?: optional):\nfetch_order(order_id: str, full?: bool)" in signed


def test_an_mcp_tool_counts_as_carried() -> None:
    plugin = WorkflowPlanPlugin(registry=ToolRegistry([fetch_order]), direct_tools=False)
    _agent(plugin, [])
    plugin._mcp_servers = {"github": object()}
    assert not needs_signature(plugin, "github__get_issue")  # its server's client sends it
    assert needs_signature(plugin, "fetch_order") and needs_signature(plugin, "gitlab__x")


def test_plannable_patterns_and_an_empty_list_hold() -> None:
    registry = ToolRegistry([fetch_order, refund])
    text = _plan_tool_description(
        _agent(WorkflowPlanPlugin(["fetch_order"], registry=registry, direct_tools=False), [])
    )
    assert "fetch_order(" in text and "refund(" not in text
    none = _plan_tool_description(
        _agent(WorkflowPlanPlugin([], registry=registry, direct_tools=False), [])
    )
    assert "No tool can be planned now" in none and "fetch_order(" not in none


def test_a_plan_only_agent_runs_its_plan() -> None:
    plan = {
        "steps": [
            {"id": "order", "tool": "fetch_order", "args": {"order_id": "A-1"}},
            {
                "id": "back",
                "tool": "refund",
                "args": {"order_id": "A-1"},
                "bind": {"amount": "steps.order.total"},
            },
        ],
        "returns": ["back"],
        "final": True,
    }
    plugin = WorkflowPlanPlugin(registry=ToolRegistry([fetch_order, refund]), direct_tools=False)
    agent = _agent(plugin, [], [call("submit_workflow_plan", **plan)])
    result = agent("refund A-1")
    assert json.loads(str(result)) == {"back": {"refund_id": "r-A-1", "amount": 12.5}}
    assert [r["status"] for r in tool_results(agent)] == ["success"]


def test_the_description_keeps_its_default_without_signatures() -> None:
    assert plan_tool_description(["a", "b"]).endswith("Tools you can plan: a, b.")
    signed = plan_tool_description(["a", "b"], signatures={"b": "b(x: int)"})
    assert signed.endswith("Tools you can plan: a.\nAlso plannable (arg?: optional):\nb(x: int)")


def test_a_temporal_agents_direct_tools_count_as_carried() -> None:
    from durable_plan.temporal.workflows.agent_tools import durable_tools

    registry = ToolRegistry([fetch_order, refund])
    agent = _agent(WorkflowPlanPlugin(registry=registry), durable_tools(registry))
    text = _plan_tool_description(agent)  # the README's TemporalAgent setup: names, no signatures
    assert "Tools you can plan: fetch_order {order_id: str, total: float}; refund." in text


def test_an_argument_defined_by_a_ref_keeps_its_type() -> None:
    """Strands and MCP keep ``$defs`` at the top of the input schema: a pydantic-model
    argument read as ``any``, the argument a plan-only model most needs typed."""
    schema = {
        "type": "object",
        "properties": {"line": {"$ref": "#/$defs/Line"}},
        "required": ["line"],
        "$defs": {
            "Line": {
                "type": "object",
                "properties": {"sku": {"type": "string"}, "qty": {"type": "integer"}},
                "required": ["sku", "qty"],
            }
        },
    }
    line = describe_signature("order", schema, "Order one line.")
    assert line == "order(line: {sku: str, qty: int, ...}): Order one line.", line  # open


def test_a_signature_is_bounded_whatever_its_arguments() -> None:
    """300 arguments made a 4,377-character line sent on every model call; a malformed
    ``required`` (not names) dropped every tool's signature."""
    props = {f"argument_number_{i}": {"type": "string"} for i in range(300)}
    line = describe_signature("wide", {"type": "object", "properties": props}, "Wide.")
    assert len(line) < 800, len(line)
    assert "more)" in line and line.endswith(": Wide.")
    odd = {"type": "object", "properties": {"a": {"type": "string"}}, "required": [{"x": 1}]}
    assert describe_signature("odd", odd) == "odd(a?: str)"
