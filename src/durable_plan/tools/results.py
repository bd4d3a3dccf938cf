"""A tool call's outcome as Strands carries it (``ToolResult``): built in one place, for every
path that hands a call's outcome back to a model (the plan tool, an agent step's tools,
direct calls) or to the agent's hooks."""

from __future__ import annotations

from typing import Any

from strands.types.tools import ToolResult


def tool_result(tool_use_id: str, ok: bool, value: Any) -> ToolResult:
    """A JSON result when ``ok``, else the error's text."""
    if ok:
        return {"toolUseId": tool_use_id, "status": "success", "content": [{"json": value}]}
    return {"toolUseId": tool_use_id, "status": "error", "content": [{"text": str(value)}]}
