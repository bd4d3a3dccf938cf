"""An MCP tool call from workflow code: the server's ``{server}-call-tool`` activity.

``StrandsPlugin(mcp_clients={server: factory})`` registers that activity on every
worker of its client; ``TemporalAgent`` calls it for the model's direct MCP calls
and a plan step (or an agent step's tool call) calls it here, from the plan
workflow, with the step's own activity id, timeout and retry policy. A worker
lost mid-call is a failed attempt Temporal retries on another worker; a call
whose completion is in history never runs again.

The activity completes even when the call failed: it returns an error result.
So the retry budget for those is spent here: an ``isError`` result (the tool ran
and refused) fails at once with the server's message, a failed call (connection,
protocol) is called again, up to the step's ``retries``, as a new activity
``<id>#<n>``.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from durable_plan.errors import StepError
    from durable_plan.limits import plain_json
    from durable_plan.mcp_tools import McpErrorResult, plan_tool_name, result_json
    from durable_plan.options import ToolOptions


MAX_BACKOFF_S = 30.0
"""The longest wait before calling a server again (as ``RetryPolicy.maximum_interval``)."""


def call_tool_activity(server: str) -> str:
    """The activity type ``StrandsPlugin(mcp_clients=...)`` registers for ``server``."""
    return f"{server}-call-tool"


async def call_mcp_tool(
    options: ToolOptions,
    args: dict[str, Any],
    activity_options: dict[str, Any],
    *,
    retries: int,
    backoff_s: float,
    max_result_bytes: int | None = None,
) -> tuple[bool, Any, int]:
    """``(ok, JSON result or error text, calls made)``; a Temporal failure (a timeout, the
    attempts spent) raises ``ActivityError`` as for any activity.

    ``activity_options`` are ``execute_activity``'s (``activity_id`` included); the
    server's own task queue, when its handle names one, wins over the plan's.
    """
    server, tool = options.mcp_server, options.mcp_tool
    if not server or not tool:
        return False, "not an MCP tool: its tool table entry names no server", 0
    opts = dict(activity_options)
    first_id = str(opts.pop("activity_id"))
    if options.mcp_task_queue:
        opts["task_queue"] = options.mcp_task_queue
    calls = 0
    while True:
        calls += 1
        activity_id = first_id if calls == 1 else f"{first_id}#{calls}"
        raw = await workflow.execute_activity(
            call_tool_activity(server),
            {"tool_name": tool, "arguments": args, "tool_use_id": activity_id},
            result_type=dict,
            activity_id=activity_id,
            **opts,
        )
        try:
            value = result_json(raw)
        except McpErrorResult as exc:
            if exc.retryable and calls <= retries:
                delay = min(backoff_s * 2 ** (calls - 1), MAX_BACKOFF_S)
                await workflow.sleep(timedelta(seconds=delay))
                continue
            return False, str(exc), calls
        except (TypeError, KeyError, AttributeError, ValueError) as exc:
            # Not the shape of an MCP tool result: this step fails, not the whole plan.
            return False, f"malformed MCP result: {exc}", calls
        # The same bounded walk a tool's result gets in its wrapper activity: the server's
        # JSON may be deeper, wider or larger than a plan may hold.
        try:
            value = plain_json(value, max_bytes=max_result_bytes)
        except StepError as exc:
            name = plan_tool_name(server, tool)
            return False, f"the result of MCP tool '{name}' cannot be kept: {exc}", calls
        return True, value, calls
