"""MCP tools as plan tools: names, schemas, rules, and results as JSON.

An agent gets MCP tools from ``strands.tools.mcp.MCPClient`` (a plain agent) or
from ``temporalio.strands_agents.TemporalMCPClient`` (a ``TemporalAgent``). This
module turns either listing into ordinary registry ``Tool``s of kind ``"mcp"``,
so the checker, patterns (``"github__*"``, ``"!github__delete_*"``), approval
gates, agent steps and map bodies treat them exactly like local tools.

Names: a plan calls an MCP tool ``<server>__<tool>``, always with its server, so
two servers that both expose ``search`` give ``github__search`` and
``jira__search``, and a pattern can select a whole server. Characters outside
``[A-Za-z0-9_-]`` become ``_`` (model providers refuse them in tool names).
The server's name is ``TemporalMCPClient.server``; for an ``MCPClient`` it is its
``prefix``, else its ``application_name`` (``MCPClient.load_servers`` sets that to
the config key); an unnamed ``MCPClient`` is refused when the plugin attaches.

Results: the server's ``structuredContent`` when it gives one, else its text
blocks (each parsed as JSON when it is JSON; one block is the value, several a
list). An error result fails the step with the server's own message: an
``isError`` result (the tool ran and said no) at once, a failed call (connection,
protocol) within the step's retries when durable.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from strands.tools.mcp import MCPAgentTool, MCPClient
from temporalio.strands_agents import TemporalMCPClient

from durable_plan.check.shapes.declared import declared_shape
from durable_plan.language.options import DEFAULT_RETRIES, DEFAULT_TIMEOUT_S, ToolOptions
from durable_plan.tools.registered_tool import Tool, ToolFailed
from durable_plan.tools.registry import ToolRegistry

SEPARATOR = "__"
"""Between the server's name and the tool's: ``github__create_issue``."""

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")

McpCall = Callable[[dict[str, Any]], Awaitable[Any]]


class McpErrorResult(ToolFailed):
    """The MCP call ended in an error result; ``retryable`` for a failed call, not for
    an ``isError`` answer (the tool ran and refused: the same call gets the same answer)."""

    def __init__(self, message: str, *, retryable: bool) -> None:
        super().__init__(message)
        self.retryable = retryable


def plan_tool_name(server: str, tool: str) -> str:
    """The name a plan uses for ``tool`` of ``server``."""
    return f"{_UNSAFE.sub('_', server)}{SEPARATOR}{_UNSAFE.sub('_', tool)}"


def _no_constant(name: str) -> Any:
    """``NaN`` / ``Infinity`` are not JSON a plan can hold: such a text stays text."""
    raise ValueError(name)


def result_json(result: Any) -> Any:
    """An MCP tool result (``MCPToolResult``, as a dict) as the JSON a plan binds to.

    Raises ``McpErrorResult`` for an error result, with the server's text.
    """
    if not isinstance(result, Mapping):
        raise McpErrorResult(f"not an MCP tool result: {str(result)[:200]}", retryable=False)
    blocks = [b for b in result.get("content") or [] if isinstance(b, Mapping)]
    if result.get("status") == "error":
        text = "; ".join(str(b["text"]) for b in blocks if "text" in b) or "no message"
        if result.get("isError"):
            raise McpErrorResult(text, retryable=False)
        raise McpErrorResult(f"the MCP call failed: {text}", retryable=True)
    structured = result.get("structuredContent")
    if structured is not None:
        return structured
    values = []
    for block in blocks:
        if "json" in block:
            values.append(block["json"])
        elif "text" in block:
            try:
                values.append(json.loads(block["text"], parse_constant=_no_constant))
            except (TypeError, ValueError, RecursionError):  # text, or JSON too deep to read
                values.append(block["text"])
    if not values:
        return None
    return values[0] if len(values) == 1 else values


def mcp_tool(
    server: str,
    name: str,
    description: str,
    input_schema: Mapping[str, Any] | None,
    *,
    call: McpCall | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    retries: int = DEFAULT_RETRIES,
    heartbeat_timeout_s: float | None = None,
    task_queue: str | None = None,
    output_schema: Any = None,
) -> Tool:
    """One MCP tool as a registry ``Tool`` (``kind="mcp"``).

    ``call`` runs it in-process (through an ``MCPClient``); without one the tool
    runs only durably, as its server's ``{server}-call-tool`` activity.
    ``output_schema``: the server's ``outputSchema`` (untrusted: compacted and bounded,
    its regexes dropped, ``durable_plan.check.shapes``): the shape of the tool's
    ``structuredContent``, which is what a plan binds to.
    """
    schema = dict(input_schema or {"type": "object", "properties": {}})
    text = description or f"{name} (MCP server {server})"
    options = ToolOptions(
        timeout_s=timeout_s,
        retries=retries,
        heartbeat_timeout_s=heartbeat_timeout_s,
        input_schema=schema,
        description=text,
        kind="mcp",
        mcp_server=server,
        mcp_tool=name,
        mcp_task_queue=task_queue,
        output_schema=declared_shape(output_schema),
    )
    plan_name = plan_tool_name(server, name)
    return Tool(plan_name, text, schema, "mcp", call or _durable_only(plan_name), options)


def mcp_tool_table(
    server: str,
    tools: Iterable[Any],
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    retries: int = DEFAULT_RETRIES,
    task_queue: str | None = None,
) -> dict[str, ToolOptions]:
    """Tool-table entries for ``start_plan``: plans started outside an agent can call
    ``server``'s tools too (the worker needs ``StrandsPlugin(mcp_clients={server: ...})``
    on its client). ``tools``: ``MCPClient.list_tools_sync()`` or ``mcp.types.Tool``s."""
    table = {}
    for item in tools:
        spec = item.mcp_tool if isinstance(item, MCPAgentTool) else item
        tool = mcp_tool(
            server,
            spec.name,
            spec.description or "",
            spec.inputSchema,
            timeout_s=timeout_s,
            retries=retries,
            task_queue=task_queue,
            output_schema=_output_schema(spec),
        )
        if tool.name in table:  # two names that clean up alike: never a silent overwrite
            raise ValueError(
                f"server {server!r} lists two tools that are both named {tool.name!r} in plans"
            )
        table[tool.name] = tool.options
    return table


# -- the agent's MCP servers ---------------------------------------------------


def mcp_servers(agent: Any) -> dict[str, Any]:
    """The agent's MCP tool providers by server name (``TemporalMCPClient`` or ``MCPClient``).

    Raises ``ValueError`` (when the plugin attaches) for an unnamed ``MCPClient`` or two
    providers with one name: plan tool names would be ambiguous.
    """
    registry = getattr(agent, "tool_registry", None)
    servers: dict[str, Any] = {}
    for provider in getattr(registry, "_tool_providers", None) or []:
        if isinstance(provider, TemporalMCPClient):
            name = provider.server
        elif isinstance(provider, MCPClient):
            name = provider._prefix or provider.client_name or ""
            if not name:
                raise ValueError(
                    "an MCPClient of this agent has no name, so its tools cannot be named in "
                    "plans (<server>__<tool>): create it with prefix='github' (or "
                    "application_name='github'), or with MCPClient.load_servers"
                )
        else:
            continue
        key = _UNSAFE.sub("_", name)
        if key in servers and servers[key] is not provider:
            raise ValueError(
                f"two MCP tool providers of this agent are named {key!r}: plan tool names "
                f"({key}{SEPARATOR}<tool>) would be ambiguous; give each server its own name "
                "and the agent one handle per server"
            )
        servers[key] = provider
    return servers


def is_mcp_agent_tool(tool: Any) -> bool:
    """An ``MCPClient``'s tool in an agent's registry: plans name it ``<server>__<tool>``."""
    return isinstance(tool, MCPAgentTool)


async def listed_tools(servers: Mapping[str, Any], *, durable: bool) -> list[Tool]:
    """The servers' tools for this plan, listing any server not listed yet.

    Durably only ``TemporalMCPClient`` servers count (listed by their
    ``{server}-list-tools`` activity, already run by ``TemporalAgent`` before each
    model call); in-process only ``MCPClient`` servers (their tools run through
    the client, in this process).
    """
    for provider in servers.values():
        if durable and isinstance(provider, TemporalMCPClient) and not provider._fetched:
            await provider._refresh()
        elif not durable and isinstance(provider, MCPClient) and provider._loaded_tools is None:
            await provider.load_tools()
    return known_tools(servers, durable=durable)


def known_tools(servers: Mapping[str, Any], *, durable: bool) -> list[Tool]:
    """The servers' tools as last listed, without listing (for the plan tool's description)."""
    tools: list[Tool] = []
    for server, provider in servers.items():
        if durable and isinstance(provider, TemporalMCPClient):
            rules = _temporal_rules(provider)
            for listed in provider._tools:
                info = getattr(listed, "_info", None)
                if info is None:
                    continue
                tools.append(
                    mcp_tool(
                        server,
                        info.name,
                        info.description,
                        info.input_schema,
                        output_schema=getattr(info, "output_schema", None),
                        **rules,
                    )
                )
        elif not durable and isinstance(provider, MCPClient):
            for agent_tool in provider._loaded_tools or []:
                spec = agent_tool.mcp_tool
                call = _client_call(provider, spec.name)
                tools.append(
                    mcp_tool(
                        server,
                        spec.name,
                        spec.description or "",
                        spec.inputSchema,
                        call=call,
                        output_schema=_output_schema(spec),
                    )
                )
    return sorted(tools, key=lambda t: t.name)


def _output_schema(spec: Any) -> Any:
    """An ``mcp.types.Tool``'s output schema (``outputSchema``; ``output_schema`` in MCP 2)."""
    schema = getattr(spec, "outputSchema", None)
    return schema if schema is not None else getattr(spec, "output_schema", None)


def with_mcp_tools(registry: ToolRegistry, tools: Iterable[Tool]) -> ToolRegistry:
    """``registry`` plus the MCP tools (a copy; the plugin's own registry stays as given)."""
    tools = list(tools)
    return registry.with_tools(tools) if tools else registry


def _temporal_rules(provider: TemporalMCPClient) -> dict[str, Any]:
    """The owner's rules for plan steps, from the handle's activity options."""
    options: dict[str, Any] = provider._options
    timeout = options.get("start_to_close_timeout") or options.get("schedule_to_close_timeout")
    policy = options.get("retry_policy")
    heartbeat = options.get("heartbeat_timeout")
    attempts = getattr(policy, "maximum_attempts", 0) or 0
    return {
        "timeout_s": timeout.total_seconds() if timeout else DEFAULT_TIMEOUT_S,
        "retries": attempts - 1 if attempts > 0 else DEFAULT_RETRIES,
        "heartbeat_timeout_s": heartbeat.total_seconds() if heartbeat else None,
        "task_queue": options.get("task_queue"),
    }


def _client_call(client: MCPClient, tool: str) -> McpCall:
    async def call(args: dict[str, Any]) -> Any:
        result = await client.call_tool_async(f"plan-{tool}", tool, args)
        return result_json(result)

    return call


def _durable_only(name: str) -> McpCall:
    async def call(args: dict[str, Any]) -> Any:
        raise McpErrorResult(
            f"MCP tool '{name}' runs only in a durable plan (its server's call-tool "
            "activity); in-process, give the agent an MCPClient for its server",
            retryable=False,
        )

    return call
