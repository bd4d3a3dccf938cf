"""A real MCP server for the tests: FastMCP over stdio, a small issue tracker.

    python tests/support/mcp_server.py            # speaks MCP on stdin/stdout

Every call appends ``{"tool", "event": "start"|"done", "args", "pid"}`` to the file
named by ``MCP_TEST_LOG`` (when set), so a test can count how often each call's
side effect happened, even across a killed worker and its server process.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from mcp.server.fastmcp import FastMCP
from mcp.server.fastmcp.exceptions import ToolError
from pydantic import BaseModel, ConfigDict

LOG_ENV = "MCP_TEST_LOG"

ISSUES: dict[int, dict[str, Any]] = {
    7: {"number": 7, "title": "Goblins steal the map", "labels": ["bug"], "assignee": "mira"},
    9: {"number": 9, "title": "Ogre blocks the bridge", "labels": [], "assignee": "tomas"},
}

server = FastMCP("tracker", log_level="WARNING")


def _log(tool: str, event: str, args: dict[str, Any]) -> None:
    path = os.environ.get(LOG_ENV)
    if not path:
        return
    line = {"tool": tool, "event": event, "args": args, "pid": os.getpid(), "t": time.time()}
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(line) + "\n").encode())
    finally:
        os.close(fd)


@server.tool()
def get_issue(number: int) -> dict[str, Any]:
    """Read one issue: {"number", "title", "labels", "assignee"}."""
    _log("get_issue", "start", {"number": number})
    if number not in ISSUES:
        raise ToolError(f"no issue #{number} in this tracker")
    _log("get_issue", "done", {"number": number})
    return dict(ISSUES[number])


@server.tool()
def add_label(number: int, label: str) -> dict[str, Any]:
    """Add a label to an issue; returns {"number", "labels"}."""
    _log("add_label", "start", {"number": number, "label": label})
    labels = [*ISSUES[number]["labels"], label]
    _log("add_label", "done", {"number": number, "label": label})
    return {"number": number, "labels": labels}


@server.tool()
async def slow_count(number: int, seconds: float = 0.5) -> dict[str, Any]:
    """Count the comments of an issue, slowly (takes ``seconds``): {"number", "comments"}."""
    import asyncio

    _log("slow_count", "start", {"number": number, "seconds": seconds})
    await asyncio.sleep(seconds)
    _log("slow_count", "done", {"number": number, "seconds": seconds})
    return {"number": number, "comments": number * 3}


@server.tool(structured_output=False)
def motd() -> str:
    """The tracker's message of the day, as plain text."""
    _log("motd", "start", {})
    _log("motd", "done", {})
    return "Mind the ogre."


@server.tool()
def close_issue(number: int, reason: str) -> dict[str, Any]:
    """Close an issue. Always refused by this tracker (an MCP error result)."""
    _log("close_issue", "start", {"number": number, "reason": reason})
    raise ToolError(f"issue #{number} is locked: only maintainers may close it")


@server.tool()
def delete_issue(number: int) -> dict[str, Any]:
    """Delete an issue for good."""
    _log("delete_issue", "start", {"number": number})
    ISSUES.pop(number, None)
    _log("delete_issue", "done", {"number": number})
    return {"deleted": number}


@server.tool()
def flaky_count(number: int, marker: str) -> dict[str, Any]:
    """Count an issue's comments; the first call (no file at ``marker`` yet) kills this
    server mid-call, so the client sees a failed call (not an error result)."""
    _log("flaky_count", "start", {"number": number})
    if not os.path.exists(marker):
        with open(marker, "w") as fh:
            fh.write("crashed once")
        os._exit(3)
    _log("flaky_count", "done", {"number": number})
    return {"number": number, "comments": number * 3}


@server.tool(structured_output=False)
def deep_text(levels: int) -> str:
    """Text that is JSON nested ``levels`` deep (a page a hostile site could serve)."""
    return "[" * levels + "]" * levels


@server.tool()
def deep_record(levels: int) -> dict[str, Any]:
    """Structured content nested ``levels`` deep."""
    value: dict[str, Any] = {"leaf": True}
    for _ in range(levels):
        value = {"inner": value}
    return value


class Assignee(BaseModel):
    """Its outputSchema is closed (``additionalProperties: false``): a plan reading another
    field is refused before it runs (tests/durable/plans/test_mcp.py)."""

    model_config = ConfigDict(extra="forbid")
    login: str
    open_issues: int


@server.tool()
def get_assignee(number: int) -> Assignee:
    """Who an issue is assigned to, and how many open issues they have."""
    login = str(ISSUES[number]["assignee"])
    return Assignee(login=login, open_issues=sum(i["assignee"] == login for i in ISSUES.values()))


if __name__ == "__main__":
    server.run("stdio")
