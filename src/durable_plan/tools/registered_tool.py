"""A registered tool: what it is made from, and how it is called.

Apart from the registry (``registry.py``, which holds the tools, their routes and their
owners' rules) because this is one tool on its own: a Strands ``@tool``, another Strands
``AgentTool``, a plain function or a Temporal activity turned into one face (a name, an
input schema, options), and ``invoke`` validating the arguments, calling it and returning
its raw JSON result.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel
from pydantic_core import to_jsonable_python
from strands import tool as strands_tool
from strands.interrupt import InterruptException
from strands.tools.decorator import DecoratedFunctionTool
from strands.types._events import ToolInterruptEvent
from strands.types.tools import AgentTool

from durable_plan.check.shapes.declared import declared_shape, result_projection, return_shape
from durable_plan.language.errors import StepFailure
from durable_plan.language.options import ToolKind, ToolOptions
from durable_plan.tools.sandbox_tools import OnSandbox, invoke_sandbox_tool


class ToolArgumentError(ValueError):
    """The arguments do not fit the tool's signature; retrying cannot help."""


class ToolFailed(RuntimeError):
    """A Strands tool reported status "error"; the message is the tool's own text."""


@dataclass(frozen=True)
class Tool:
    """A registered tool: how to call it and how to run it durably."""

    name: str
    description: str
    input_schema: dict[str, Any]
    kind: ToolKind
    target: Any
    options: ToolOptions

    @property
    def tool_spec_json(self) -> Any:
        """The Strands tool spec (name, description, input schema) the model sees."""
        return {
            "name": self.name,
            "description": self.description or self.name,
            "inputSchema": {"json": self.input_schema},
        }

    async def invoke(
        self, args: Mapping[str, Any], invocation_state: Mapping[str, Any] | None = None
    ) -> Any:
        """Validate ``args``, call the tool, and return its raw (JSON) result.

        ``invocation_state`` reaches Strands tools that take a ``ToolContext`` (which
        needs the ``agent``), as when the agent calls them directly.
        """
        if self.kind == "plan":  # a nested plan, run by the plan runners
            raise StepFailure(
                f"'{self.name}' is a saved plan: a plan step (or an agent step inside a plan) "
                "calls it, not a direct call"
            )
        if self.target is None:  # declared: its code is on its queue's workers
            raise StepFailure(
                f"tool '{self.name}' runs only on the workers of task queue "
                f"{self.options.task_queue!r}; this process has no code for it"
            )
        if self.kind == "mcp":  # the server checks its own schema (durable_plan.tools.mcp)
            return await self.target(dict(args))
        if self.kind == "agent_tool":
            state = dict(invocation_state or {})
            return await _stream_agent_tool(self.target, self.name, dict(args), state)
        if self.kind == "sandbox":  # its agent's sandbox: the conversation's (sandbox_tools)
            state = dict(invocation_state or {})
            return await invoke_sandbox_tool(self.target, self.name, dict(args), state)
        func, validated = self._prepare(args)
        if inspect.iscoroutinefunction(func):
            result = await func(**validated)
        else:
            result = await asyncio.to_thread(func, **validated)
            if inspect.isawaitable(result):
                result = await result
        if self.kind == "function":  # what its annotation declares (the shape's contract)
            project = result_projection(func)
            if project is not None:
                return project(result)
        return _as_json_value(result)

    def _prepare(self, args: Mapping[str, Any]) -> tuple[Callable[..., Any], dict[str, Any]]:
        if self.kind == "activity":
            _check_names(self.name, args, self.options.params)
            return self.target, dict(args)
        decorated: DecoratedFunctionTool[Any, Any] = self.target
        _check_names(self.name, args, list(self.input_schema.get("properties", {})))
        try:
            validated = decorated._metadata.validate_input(dict(args))
        except ValueError as exc:
            raise ToolArgumentError(_argument_message(self.name, exc)) from None
        return decorated._tool_func, validated


def _to_tool(obj: Any, name: str | None) -> Tool:
    if isinstance(obj, OnSandbox):
        return _sandbox_tool(obj, name)
    defn = getattr(obj, "__temporal_activity_definition", None)
    if defn is not None:
        func = obj
        decorated = strands_tool(func)
        schema = decorated.tool_spec["inputSchema"]["json"]
        signature = inspect.signature(func)
        params = list(signature.parameters)
        defaults = {
            n: p.default
            for n, p in signature.parameters.items()
            if p.default is not inspect.Parameter.empty and _is_json(p.default)
        }
        return Tool(
            name=name or defn.name,
            description=decorated.tool_spec.get("description", ""),
            input_schema=schema,
            kind="activity",
            target=func,
            options=ToolOptions(
                kind="activity",
                params=params,
                defaults=defaults,
                output_schema=return_shape(func, annotation="open"),
            ),
        )
    if isinstance(obj, DecoratedFunctionTool) and obj._metadata._context_param is None:
        decorated = obj
    elif isinstance(obj, AgentTool):
        spec = obj.tool_spec
        description = spec.get("description", "")
        output = spec.get("outputSchema")
        func = getattr(obj, "_tool_func", None)  # a @tool that takes a ToolContext
        shape = (
            declared_shape(output.get("json"))
            if isinstance(output, Mapping)
            else return_shape(func if callable(func) else None, description, annotation="text")
        )
        return Tool(
            name=name or obj.tool_name,
            description=description,
            input_schema=dict(spec["inputSchema"].get("json", {})),
            kind="agent_tool",
            target=obj,
            options=ToolOptions(kind="agent_tool", output_schema=shape),
        )
    elif callable(obj):
        decorated = strands_tool(obj)
    else:
        raise TypeError(f"cannot register {obj!r} as a tool: pass a function or a Strands tool")
    spec = decorated.tool_spec
    return Tool(
        name=name or decorated.tool_name,
        description=spec.get("description", ""),
        input_schema=dict(spec["inputSchema"]["json"]),
        kind="function",
        target=decorated,
        options=ToolOptions(kind="function", output_schema=return_shape(decorated._tool_func)),
    )


def _sandbox_tool(bound: OnSandbox, name: str | None) -> Tool:
    """A tool on a sandbox's API (``sandbox_tools.on_sandbox``): kind ``sandbox``, its factory's
    name among the owner's options."""
    spec = bound.tool.tool_spec
    description = spec.get("description", "")
    func = getattr(bound.tool, "_tool_func", None)
    return Tool(
        name=name or bound.tool.tool_name,
        description=description,
        input_schema=dict(spec["inputSchema"].get("json", {})),
        kind="sandbox",
        target=bound.tool,
        options=ToolOptions(
            kind="sandbox",
            sandbox=bound.sandbox,
            output_schema=return_shape(
                func if callable(func) else None, description, annotation="text"
            ),
        ),
    )


def _as_json_value(value: Any) -> Any:
    """A pydantic model or a dataclass instance as the JSON it serializes to (the shape its
    annotation declares, ``check.shapes.declared``); any other value as it is."""
    if isinstance(value, BaseModel) or (
        dataclasses.is_dataclass(value) and not isinstance(value, type)
    ):
        return to_jsonable_python(value)
    return value


def _is_json(value: Any) -> bool:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return False
    return True


def _check_names(tool: str, args: Mapping[str, Any], params: list[str]) -> None:
    unknown = sorted(set(args) - set(params))
    if unknown:
        raise ToolArgumentError(
            f"tool '{tool}' has no argument '{unknown[0]}'; its arguments are: "
            f"{', '.join(params) or 'none'}"
        )


def _argument_message(tool: str, exc: ValueError) -> str:
    cause = exc.__cause__
    errors = getattr(cause, "errors", None)
    if callable(errors):
        parts = []
        for err in errors():
            loc = ".".join(str(p) for p in err.get("loc", ())) or "?"
            parts.append(f"argument '{loc}': {err.get('msg')}")
        if parts:
            return f"tool '{tool}' got bad arguments: " + "; ".join(parts)
    return f"tool '{tool}' got bad arguments: {exc}"


async def _stream_agent_tool(
    agent_tool: AgentTool, name: str, args: dict[str, Any], invocation_state: dict[str, Any]
) -> Any:
    tool_use = {"toolUseId": f"plan-{name}", "name": name, "input": args}
    last: Any = None
    async for event in agent_tool.stream(tool_use, invocation_state):  # type: ignore[arg-type]
        if isinstance(event, ToolInterruptEvent):
            raise InterruptException(event.interrupts[0])
        last = event
    result = getattr(last, "tool_result", last)
    return unwrap_tool_result(result)


def unwrap_tool_result(result: Any) -> Any:
    """Strands ToolResult -> raw JSON: a json block as is, text parsed as JSON when it is."""
    if not (isinstance(result, Mapping) and "content" in result):
        return result
    values = []
    for block in result.get("content") or []:
        if "json" in block:
            values.append(block["json"])
        elif "text" in block:
            text = block["text"]
            try:
                values.append(json.loads(text))
            except (TypeError, ValueError):
                values.append(text)
    if result.get("status") == "error":
        raise ToolFailed("; ".join(str(v) for v in values) or "tool reported an error")
    if not values:
        return None
    return values[0] if len(values) == 1 else values
