"""Tools and their owners' rules: the registry, the approval policy, MCP tools as plan tools,
and the exactly-once helper for effects that are database writes."""

from durable_plan.tools.registered_tool import (
    Tool,
    ToolArgumentError,
    ToolFailed,
    unwrap_tool_result,
)
from durable_plan.tools.registry import (
    APPROVAL_REFUSAL,
    DEFAULT_RETRIES,
    DEFAULT_TIMEOUT_S,
    ToolKind,
    ToolOptions,
    ToolRegistry,
    matches_patterns,
)

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
