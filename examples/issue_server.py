"""An MCP server for the examples: a tiny issue tracker, FastMCP over stdio.

python examples/issue_server.py   # speaks MCP on stdin/stdout (an MCPClient starts it)
"""

from typing import Any

from mcp.server.fastmcp import FastMCP
from mcp.server.fastmcp.exceptions import ToolError

ISSUES: dict[int, dict[str, Any]] = {
    7: {"number": 7, "title": "Goblins steal the map", "labels": ["bug"]},
}
server = FastMCP("issues", log_level="WARNING")


@server.tool()
def get_issue(number: int) -> dict[str, Any]:
    """Read an issue: {"number", "title", "labels"}."""
    if number not in ISSUES:
        raise ToolError(f"no issue #{number}")  # an error result: the step fails with it
    return ISSUES[number]


@server.tool()
def add_label(number: int, label: str) -> dict[str, Any]:
    """Add a label to an issue; returns {"number", "labels"}."""
    ISSUES[number]["labels"].append(label)
    return {"number": number, "labels": ISSUES[number]["labels"]}


@server.tool()
def delete_issue(number: int) -> dict[str, Any]:
    """Delete an issue for good."""
    ISSUES.pop(number, None)
    return {"deleted": number}


if __name__ == "__main__":
    server.run("stdio")
