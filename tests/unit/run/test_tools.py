"""The tool registry: every shape of tool gets one face (schema, options, raw JSON results)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from strands import tool
from strands.types.tools import AgentTool, ToolGenerator, ToolSpec, ToolUse
from temporalio import activity

from durable_plan import execute_plan
from durable_plan.language.errors import PlanRejected
from durable_plan.tools.registered_tool import ToolArgumentError, ToolFailed, unwrap_tool_result
from durable_plan.tools.registry import APPROVAL_REFUSAL, ToolRegistry, matches_patterns


@tool
def strands_add(a: int, b: int) -> dict[str, int]:
    """Add two numbers.

    Args:
        a: first
        b: second
    """
    return {"sum": a + b}


def plain_mul(a: int, b: int = 2) -> int:
    """Multiply."""
    return a * b


async def async_greet(name: str) -> dict[str, str]:
    """Greet someone."""
    await asyncio.sleep(0)
    return {"greeting": f"hello {name}"}


@activity.defn(name="legacy_lookup")
async def legacy_lookup(key: str, default: str = "none") -> dict[str, str]:
    """An activity that already exists in someone's worker."""
    return {"key": key, "value": default}


class Weather(AgentTool):
    """A hand-written Strands tool that answers with a text block of JSON."""

    @property
    def tool_name(self) -> str:
        return "weather"

    @property
    def tool_type(self) -> str:
        return "python"

    @property
    def tool_spec(self) -> ToolSpec:
        schema = {"type": "object", "properties": {"city": {"type": "string"}}}
        return {"name": "weather", "description": "Weather.", "inputSchema": {"json": schema}}

    async def stream(
        self, tool_use: ToolUse, invocation_state: dict[str, Any], **kwargs: Any
    ) -> ToolGenerator:
        city = tool_use["input"]["city"]
        if city == "atlantis":
            yield {"toolUseId": "x", "status": "error", "content": [{"text": "no such city"}]}
            return
        yield {"toolUseId": "x", "status": "success", "content": [{"text": '{"temp_c": 21}'}]}


async def sleepy(seconds: float) -> None:
    await asyncio.sleep(seconds)


def registry() -> ToolRegistry:
    tools = ToolRegistry([strands_add, plain_mul, async_greet, legacy_lookup, Weather()])
    tools.add(sleepy, timeout_s=0.2)
    return tools


async def test_every_shape_returns_raw_json() -> None:
    tools = registry()
    assert await tools.invoke("strands_add", {"a": 1, "b": 2}) == {"sum": 3}
    assert await tools.invoke("plain_mul", {"a": 4}) == 8
    assert await tools.invoke("async_greet", {"name": "ada"}) == {"greeting": "hello ada"}
    assert await tools.invoke("legacy_lookup", {"key": "k"}) == {"key": "k", "value": "none"}
    assert await tools.invoke("weather", {"city": "paris"}) == {"temp_c": 21}
    assert [t.kind for t in tools] == [
        "function",
        "function",
        "function",
        "activity",
        "agent_tool",
        "function",
    ]


async def test_bad_arguments_name_the_parameter() -> None:
    tools = registry()
    with pytest.raises(ToolArgumentError, match="argument 'b'"):
        await tools.invoke("strands_add", {"a": 1, "b": "two"})
    with pytest.raises(ToolArgumentError, match="has no argument 'c'; its arguments are: a, b"):
        await tools.invoke("strands_add", {"a": 1, "b": 2, "c": 3})
    with pytest.raises(ToolArgumentError, match="has no argument 'nope'"):
        await tools.invoke("legacy_lookup", {"key": "k", "nope": 1})


async def test_strands_error_results_raise() -> None:
    with pytest.raises(ToolFailed, match="no such city"):
        await registry().invoke("weather", {"city": "atlantis"})


def test_schemas_and_options() -> None:
    tools = registry()
    schema = tools.get("plain_mul").input_schema
    assert schema["required"] == ["a"] and set(schema["properties"]) == {"a", "b"}
    assert tools.get("legacy_lookup").options.params == ["key", "default"]
    assert tools.timeouts()["sleepy"] == 0.2
    with pytest.raises(ValueError, match="already registered"):
        tools.add(plain_mul)
    with pytest.raises(KeyError, match="registered"):
        tools.get("nothing")


def test_catalog_applies_patterns_and_approval() -> None:
    tools = ToolRegistry()
    tools.add(plain_mul)
    tools.add(async_greet, requires_approval=True)
    tools.add(strands_add)
    catalog = tools.catalog(["*", "!strands_*"])
    assert catalog.plannable == ["plain_mul"]
    assert catalog.tools["async_greet"].refused == APPROVAL_REFUSAL
    assert "plannable" in (catalog.tools["strands_add"].refused or "")


@pytest.mark.parametrize(
    ("name", "patterns", "allowed"),
    [
        ("delete_files", ["*", "!delete_files"], False),
        ("read_files", ["*", "!delete_files"], True),
        ("linear__list", ["linear__*"], True),
        ("github__search", ["*__search"], True),
        ("github__list", ["*__search"], False),
        ("x", [], False),
        ("x", ["!x", "*"], True),
    ],
)
def test_pattern_matching(name: str, patterns: list[str], allowed: bool) -> None:
    assert matches_patterns(name, patterns) is allowed


def test_unwrap_tool_result() -> None:
    assert unwrap_tool_result({"content": [{"json": {"a": 1}}]}) == {"a": 1}
    assert unwrap_tool_result({"content": [{"text": "plain words"}]}) == "plain words"
    assert unwrap_tool_result({"content": [{"text": "[1, 2]"}, {"json": 3}]}) == [[1, 2], 3]
    assert unwrap_tool_result({"content": []}) is None
    assert unwrap_tool_result(5) == 5


async def test_execute_plan_with_a_registry_uses_its_schemas_and_timeouts() -> None:
    tools = registry()
    with pytest.raises(PlanRejected, match="tool 'strands_add' has no argument 'c'"):
        await execute_plan({"steps": [{"id": "s", "tool": "strands_add", "args": {"c": 1}}]}, tools)
    plan = {
        "steps": [
            {"id": "s", "tool": "sleepy", "args": {"seconds": 5}},
            {"id": "m", "tool": "plain_mul", "args": {"a": 3}},
        ],
        "on_error": "continue",
    }
    result = await execute_plan(plan, tools)
    assert result.outcome("s").status == "failed"
    assert "timed out after 0.2 s" in (result.outcome("s").error or "")
    assert result.returned == {"m": 6}
