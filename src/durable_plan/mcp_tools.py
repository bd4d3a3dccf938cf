"""Moved to ``durable_plan.tools.mcp``; this import path keeps working (the README and
``examples/`` use it)."""

from durable_plan.tools.mcp import (
    SEPARATOR as SEPARATOR,
)
from durable_plan.tools.mcp import (
    McpErrorResult as McpErrorResult,
)
from durable_plan.tools.mcp import (
    is_mcp_agent_tool as is_mcp_agent_tool,
)
from durable_plan.tools.mcp import (
    known_tools as known_tools,
)
from durable_plan.tools.mcp import (
    listed_tools as listed_tools,
)
from durable_plan.tools.mcp import (
    mcp_servers as mcp_servers,
)
from durable_plan.tools.mcp import (
    mcp_tool as mcp_tool,
)
from durable_plan.tools.mcp import (
    mcp_tool_table as mcp_tool_table,
)
from durable_plan.tools.mcp import (
    plan_tool_name as plan_tool_name,
)
from durable_plan.tools.mcp import (
    result_json as result_json,
)
from durable_plan.tools.mcp import (
    with_mcp_tools as with_mcp_tools,
)
