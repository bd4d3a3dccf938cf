"""The tool registry: one place that knows every tool a plan may call.

Tools arrive in several shapes: Strands ``@tool`` functions, other Strands
``AgentTool``s, plain Python functions, and existing Temporal activities. The
registry gives them one face: a name, an input schema (which the checker uses
to reject bad arguments before anything runs), per-tool defaults for durable
runs (timeout, retries, heartbeat, approval), and ``invoke(args)`` returning the
raw JSON result so later bindings can address its fields.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import inspect
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from pydantic import BaseModel
from pydantic_core import to_jsonable_python
from strands import tool as strands_tool
from strands.interrupt import InterruptException
from strands.tools.decorator import DecoratedFunctionTool
from strands.types._events import ToolInterruptEvent
from strands.types.tools import AgentTool

from durable_plan.check import ToolCatalog, ToolSpec
from durable_plan.language import routing
from durable_plan.language.agent_step import RESERVED_TOOL_NAMES
from durable_plan.language.errors import APPROVAL_REFUSAL, StepFailure, interrupt_message
from durable_plan.language.options import DEFAULT_RETRIES, DEFAULT_TIMEOUT_S, ToolKind, ToolOptions
from durable_plan.language.patterns import matches_patterns
from durable_plan.language.routing import check_routing
from durable_plan.tools import limits
from durable_plan.tools.approval import ApprovalPolicy
from durable_plan.tools.return_shapes import declared_shape, result_projection, return_shape

__all__ = [
    "APPROVAL_REFUSAL",
    "DEFAULT_RETRIES",
    "DEFAULT_TIMEOUT_S",
    "Tool",
    "ToolArgumentError",
    "ToolFailed",
    "ToolKind",
    "ToolOptions",
    "ToolRegistry",
    "matches_patterns",
    "unwrap_tool_result",
]


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


class ToolRegistry:
    """Name -> Tool, plus the views the checker, runners and Strands need."""

    def __init__(self, tools: Iterable[Any] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        self._routes: list[tuple[tuple[str, ...], str]] = []
        for item in tools:
            self.add(item)

    def route(self, patterns: str | Sequence[str], task_queue: str) -> None:
        """Tools whose names match ``patterns`` (``"gpu_*"``; later patterns win, as in
        ``plannable``) run on ``task_queue``: the ones registered already and the ones
        registered after. A tool's own ``task_queue=`` wins over any route; MCP tools run
        where their server's activities do and are left alone. All or nothing: a tool the
        route cannot take (one that runs local) is an error and nothing is routed."""
        listed = (patterns,) if isinstance(patterns, str) else tuple(patterns)
        routed = {
            name: replace(tool, options=replace(tool.options, task_queue=task_queue))
            for name, tool in self._tools.items()
            if tool.options.task_queue is None
            and tool.kind != "mcp"
            and matches_patterns(name, listed)
        }
        check_routing(f"route({listed!r})", replace(ToolOptions(), task_queue=task_queue))
        for name, tool in routed.items():
            check_routing(name, tool.options)
        self._routes.append((listed, task_queue))
        self._tools.update(routed)

    def declare(
        self,
        name: str,
        *,
        task_queue: str,
        description: str = "",
        input_schema: Mapping[str, Any] | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        retries: int = DEFAULT_RETRIES,
        heartbeat_timeout_s: float | None = None,
        requires_approval: bool = False,
        reuse: bool = True,
        max_concurrent: int | None = None,
        max_per_second: float | None = None,
        output_schema: Mapping[str, Any] | None = None,
    ) -> Tool:
        """A tool whose code is elsewhere: the workers of ``task_queue`` register it
        (``tool_worker``); this process plans it and schedules its steps there, without
        importing it. The rules must match the registration over there (the plan's tool
        table carries these). In-process such a tool cannot run: the check refuses it.
        ``output_schema``: its return shape, as for ``add``."""
        schema = dict(input_schema or {"type": "object", "properties": {}})
        options = ToolOptions(
            timeout_s=timeout_s,
            retries=retries,
            heartbeat_timeout_s=heartbeat_timeout_s,
            requires_approval=requires_approval,
            reuse=reuse,
            input_schema=schema,
            description=description,
            task_queue=task_queue,
            max_concurrent=max_concurrent,
            max_per_second=max_per_second,
            output_schema=declared_shape(output_schema),
        )
        check_routing(name, options)
        tool = Tool(name, description, schema, "function", None, options)
        if name in self._tools or name in RESERVED_TOOL_NAMES:
            raise ValueError(f"a tool named {name!r} is already registered or reserved")
        self._tools[name] = tool
        return tool

    def _routed(self, name: str) -> str | None:
        """The queue of the latest route whose patterns match ``name``, if any."""
        for patterns, queue in reversed(self._routes):
            if matches_patterns(name, patterns):
                return queue
        return None

    def task_queues(self) -> dict[str, list[str]]:
        """Each task queue tools are routed to, with their names (declared tools included),
        in name order: the workers a deployment of this registry runs besides the plans'."""
        queues: dict[str, list[str]] = {}
        for name in sorted(self._tools):
            queue = self._tools[name].options.task_queue
            if queue is not None:
                queues.setdefault(queue, []).append(name)
        return dict(sorted(queues.items()))

    def routed_to(self, task_queue: str) -> list[Tool]:
        """The tools whose steps run on ``task_queue``, a queue of their own, with code in
        this process (a ``tool_worker`` serves them; declared tools have their code there)."""
        return [
            t
            for t in self._tools.values()
            if t.target is not None and t.kind != "mcp" and t.options.task_queue == task_queue
        ]

    def queue_limits(self, task_queue: str) -> dict[str, Any]:
        """The limits of ``task_queue`` as worker options, merged over every tool of it
        (``routing.queue_limits``; raises when two state different ones): ``tool_worker``
        gives them to the queue's worker and ``call_slot`` holds in-process calls to them,
        one merge for both, so a tool that states none is held by its queue-mates' limits."""
        return routing.queue_limits(self.routed_to(task_queue), task_queue)

    def call_slot(self, name: str) -> contextlib.AbstractAsyncContextManager[None]:
        """Where an in-process call of ``name`` waits for its queue's limits (the same
        limiter for every tool of the queue, whichever is called first)."""
        queue = self.get(name).options.task_queue
        if queue is None:
            return contextlib.nullcontext()
        return limits.call_slot(queue, self.queue_limits(queue))

    def add(
        self,
        obj: Any,
        *,
        name: str | None = None,
        timeout_s: float | None = None,
        retries: int | None = None,
        heartbeat_timeout_s: float | None = None,
        requires_approval: bool = False,
        local: bool = False,
        allow_local: bool = False,
        reuse: bool = True,
        task_queue: str | None = None,
        max_concurrent: int | None = None,
        max_per_second: float | None = None,
        output_schema: Mapping[str, Any] | None = None,
    ) -> Tool:
        """Register a Strands tool, a plain function, or a Temporal activity.

        ``local=True`` runs the tool's plan steps as local activities by default:
        for short, pure tools it saves a server round trip per step.
        ``allow_local=True`` lets a plan step ask for that (``"local": true``).
        ``timeout_s`` and ``retries`` are upper bounds: a step may ask for less.
        ``reuse=False``: a repair plan runs this tool's steps again even when an earlier
        plan of the conversation ran them ok with the same arguments (for reads whose
        answer changes over time; see ``durable_plan.run.reuse``).
        ``task_queue``: the queue this tool's steps run on, whatever the plan's (a GPU
        machine, a private network, other credentials; ``tool_worker`` serves it); default:
        the first ``route`` pattern that matches, else the plan's queue.
        ``max_concurrent`` / ``max_per_second``: the most calls at once (per worker of the
        tool's queue) and started per second (across every plan: the server enforces it);
        both need the tool's own ``task_queue`` (``durable_plan.language.routing``).
        ``output_schema``: the tool's return shape as a JSON Schema, when its return
        annotation or its docstring's ``Returns:`` line does not say it (they are read
        otherwise, ``durable_plan.tools.return_shapes``); ``{}`` declares none. A plan
        reading a field the shape rules out is rejected before anything runs.
        """
        tool = _to_tool(obj, name)
        if tool.name in RESERVED_TOOL_NAMES:
            raise ValueError(
                f"a tool cannot be named {tool.name!r}: the plan language reserves it "
                f"(reserved: {', '.join(sorted(RESERVED_TOOL_NAMES))}); register it under "
                "another name (name=...)"
            )
        options = replace(
            tool.options,
            timeout_s=timeout_s if timeout_s is not None else tool.options.timeout_s,
            retries=retries if retries is not None else tool.options.retries,
            heartbeat_timeout_s=heartbeat_timeout_s,
            requires_approval=requires_approval,
            local=local,
            allow_local=allow_local,
            reuse=reuse,
            input_schema=tool.input_schema,
            description=tool.description,
            task_queue=task_queue if task_queue is not None else self._routed(tool.name),
            max_concurrent=max_concurrent,
            max_per_second=max_per_second,
            output_schema=(
                declared_shape(output_schema)
                if output_schema is not None
                else tool.options.output_schema
            ),
        )
        check_routing(tool.name, options)
        tool = replace(tool, options=options)
        if tool.name in self._tools:
            raise ValueError(f"a tool named {tool.name!r} is already registered")
        self._tools[tool.name] = tool
        return tool

    def with_tools(self, tools: Iterable[Tool]) -> ToolRegistry:
        """A copy with ready-made ``Tool``s added as they are (MCP tools, listed per plan);
        a name already taken is an error naming both, never a silent replacement."""
        merged = ToolRegistry()
        merged._tools = dict(self._tools)
        merged._routes = list(self._routes)
        for tool in tools:
            if tool.name in merged._tools:
                raise ValueError(
                    f"two tools are named {tool.name!r} (a registered tool and an MCP tool, "
                    "or two MCP tools): rename the registered tool (ToolRegistry.add(name=...))"
                )
            merged._tools[tool.name] = tool
        return merged

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def get(self, name: str) -> Tool:
        try:
            return self._tools[name]
        except KeyError:
            raise KeyError(f"no tool named {name!r}; registered: {sorted(self._tools)}") from None

    @property
    def names(self) -> list[str]:
        return list(self._tools)

    def catalog(
        self,
        plannable: Sequence[str] = ("*",),
        *,
        approval: ApprovalPolicy | None = None,
        durable: bool = False,
    ) -> ToolCatalog:
        """What the checker may accept: ``plannable`` applied (``[]``: nothing), and
        approval-gated tools refused in-process or paused durably (``ApprovalPolicy``)."""
        specs = []
        for tool in self._tools.values():
            refused = None
            if not matches_patterns(tool.name, plannable):
                refused = "it is excluded from plans by the plannable setting"
            elif tool.target is None and not durable:
                refused = (
                    f"its code runs only on the workers of task queue "
                    f"{tool.options.task_queue!r} (declared here); run the plan durably"
                )
            specs.append(
                ToolSpec(
                    tool.name, tool.input_schema, refused, tool.options, tool.options.output_schema
                )
            )
        catalog = ToolCatalog({s.name: s for s in specs})
        return (approval or ApprovalPolicy()).apply(catalog, durable=durable)

    def options(self, approval: ApprovalPolicy | None = None) -> dict[str, ToolOptions]:
        """Per-tool durable rules, as plain data for workflow input (gates applied)."""
        options = {name: t.options for name, t in self._tools.items()}
        return (approval or ApprovalPolicy()).options(options)

    def timeouts(self) -> dict[str, float]:
        """Per-tool timeouts, so a hung tool fails its step in-process too."""
        return {name: t.options.timeout_s for name, t in self._tools.items()}

    async def invoke(
        self, name: str, args: dict[str, Any], invocation_state: Mapping[str, Any] | None = None
    ) -> Any:
        """An ``Invoker`` for the in-process runner: the tool's limits hold per process
        (``durable_plan.tools.limits``; durably its queue holds them)."""
        tool = self.get(name)
        try:
            async with self.call_slot(name):
                return await tool.invoke(args, invocation_state)
        except InterruptException:
            # Nobody can answer a person's question in the middle of a plan.
            raise StepFailure(interrupt_message(name)) from None


def _to_tool(obj: Any, name: str | None) -> Tool:
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


def _as_json_value(value: Any) -> Any:
    """A pydantic model or a dataclass instance as the JSON it serializes to (the shape its
    annotation declares, ``return_shapes``); any other value as it is."""
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
