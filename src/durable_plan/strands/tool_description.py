"""What the plan tool's description states of the tools: which may be planned, each one's
return shape, and (for a tool the model is not sent a spec of) its typed signature.

Apart from the plugin because it is read on every model call (Strands asks for the tool's
spec each time) and must never raise there: a spec without the list is still a spec, and a
submitted plan meets the same error as a message."""

from __future__ import annotations

import contextlib
from typing import Any, Protocol

from temporalio import workflow

from durable_plan.check import ToolCatalog
from durable_plan.check.shapes.docstrings import docstring_shape
from durable_plan.check.shapes.text import describe_shape, describe_signature
from durable_plan.tools.mcp import known_tools, with_mcp_tools
from durable_plan.tools.registry import ToolRegistry


class Describing(Protocol):
    """What the description reads of the plan tool (``WorkflowPlanPlugin`` has it): named
    here, not imported, so this module does not import the plugin that imports it."""

    _agent: Any
    _mcp_servers: dict[str, Any]
    plannable: list[str] | None
    registry: ToolRegistry | None
    signatures: bool | None

    def _registry_for(self, agent: Any, durable: bool) -> ToolRegistry: ...

    def catalog(self, registry: ToolRegistry, *, durable: bool) -> ToolCatalog: ...


WORKFLOW_INTERNALS: tuple[type[BaseException], ...] = (
    workflow.NondeterminismError,
    workflow.ReadOnlyContextError,
)
"""Temporal's own control flow (nondeterminism, eviction): never caught as a tool's error."""


def described_plannable(plugin: Describing) -> list[str] | None:
    """The plannable names the plan tool's description lists (None: not listed)."""
    if plugin.plannable == []:
        return []
    durable = workflow.in_workflow()
    registry = plugin.registry
    if registry is None and plugin._mcp_servers and not durable and plugin._agent is not None:
        registry = plugin._registry_for(plugin._agent, durable)
    if registry is None:
        return None
    if plugin._mcp_servers:
        try:
            registry = with_mcp_tools(registry, known_tools(plugin._mcp_servers, durable=durable))
        except ValueError:
            # Two tools share a name: Strands reads the tool spec on every model call,
            # so the spec goes without the list; a submitted plan gets the error.
            return None
    return plugin.catalog(registry, durable=durable).plannable


def described_tools(plugin: Describing) -> tuple[dict[str, str], dict[str, str]]:
    """What the plan tool's description states of each plannable tool: its return shape
    (tool name -> shape) and, for a tool the model is not sent a spec of, its signature
    (tool name -> one line; ``signatures``). A shape stated is one the model reads
    nowhere else (from an annotation, an ``output_schema=`` option or an MCP server's
    ``outputSchema``): a docstring's ``Returns:`` line is in the tool's own description
    already, and the spec's size is paid on every model call. A signature carries its
    tool's shape, whatever declared it.

    Never raises: Strands reads the spec before every model call, and a spec without
    them is still a spec (a submitted plan meets the same error, as a message)."""
    try:
        return _described_tools(plugin)
    except Exception as exc:
        if isinstance(exc, WORKFLOW_INTERNALS):
            raise
        return {}, {}


def _described_tools(plugin: Describing) -> tuple[dict[str, str], dict[str, str]]:
    if plugin.plannable == []:
        return {}, {}
    durable = workflow.in_workflow()
    registry = plugin.registry
    if registry is None and plugin._agent is not None and not durable:
        registry = plugin._registry_for(plugin._agent, durable)
    if registry is None:
        return {}, {}
    if plugin._mcp_servers:
        # Two tools sharing a name: the registry's own tools are still described.
        with contextlib.suppress(ValueError):
            registry = with_mcp_tools(registry, known_tools(plugin._mcp_servers, durable=durable))
    plannable = set(plugin.catalog(registry, durable=durable).plannable)
    shapes: dict[str, str] = {}
    signatures: dict[str, str] = {}
    for tool in registry:
        if tool.name not in plannable:
            continue
        shape = tool.options.output_schema
        try:  # one tool's odd schema costs its own line, not every tool's
            if needs_signature(plugin, tool.name):
                signatures[tool.name] = describe_signature(
                    tool.name, tool.input_schema, tool.description, shape
                )
            elif shape is not None and docstring_shape(tool.description) != shape:
                shapes[tool.name] = describe_shape(shape)
        except Exception as exc:
            if isinstance(exc, WORKFLOW_INTERNALS):
                raise
            if needs_signature(plugin, tool.name):
                signatures[tool.name] = f"{tool.name}(...)"
    return shapes, signatures


def needs_signature(plugin: Describing, name: str) -> bool:
    """Whether the model needs ``name``'s signature in the plan tool's description: with
    ``signatures=None``, when the agent does not send the tool's own spec (an MCP tool,
    ``<server>__<tool>``, is sent by its server's client)."""
    if plugin.signatures is not None:
        return plugin.signatures
    if plugin._agent is None:
        return True
    carried = getattr(getattr(plugin._agent, "tool_registry", None), "registry", {})
    server, sep, _ = name.partition("__")
    return name not in carried and not (sep and server in plugin._mcp_servers)
