"""The MCP tests' client of the test server and their one local tool.

Separate from ``mcp_workflows`` so the workflow sandbox passes it through (it
reads the file system and the environment); the crash test's worker subprocess
builds the same client factory.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from mcp import StdioServerParameters
from mcp.client.stdio import stdio_client
from strands.tools.mcp import MCPClient

from durable_plan.tools.registry import ToolRegistry

SERVER_SCRIPT = Path(__file__).resolve().parent / "mcp_server.py"


def tracker_client(**kwargs: Any) -> MCPClient:
    """A client of the test server (a subprocess over stdio); it inherits this process's
    environment, so the server logs its calls where ``MCP_TEST_LOG`` says."""
    params = StdioServerParameters(
        command=sys.executable, args=[str(SERVER_SCRIPT)], env=dict(os.environ)
    )
    return MCPClient(lambda: stdio_client(params), **kwargs)


async def triage(title: str) -> dict[str, Any]:
    """Pick a label for an issue from its title; returns {"label": str}.

    Args:
        title: The issue's title.
    """
    return {"label": "monster" if "Goblin" in title or "Ogre" in title else "other"}


LOCAL_TOOLS = ToolRegistry([triage])
