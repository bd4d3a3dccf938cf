"""An MCP tool call from workflow code: the server's ``{server}-call-tool`` activity.

``StrandsPlugin(mcp_clients={server: factory})`` registers that activity on every
worker of its client; ``TemporalAgent`` calls it for the model's direct MCP calls
and a plan step (or an agent step's tool call) calls it here, from the plan
workflow, with the step's own activity id, timeout and retry policy. A worker
lost mid-call is a failed attempt Temporal retries on another worker; a call
whose completion is in history never runs again.

The activity completes even when the call failed: it returns an error result.
So the whole retry budget is spent here, one activity attempt per call: an
``isError`` result (the tool ran and refused) fails at once with the server's
message; a failed call (connection, protocol) and an activity that failed or
timed out (nothing tells a slow server from a lost worker) are called again, as
a new activity ``<id>#<n>``, until ``retries + 1`` calls were made in all: the
owner's bound, never more.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from durable_plan.language.errors import StepError
    from durable_plan.language.options import ToolOptions
    from durable_plan.language.plan_limits import plain_json
    from durable_plan.temporal.wire.messages import failure_message
    from durable_plan.temporal.workflows.policy import retry_policy
    from durable_plan.tools.mcp import McpErrorResult, plan_tool_name, result_json


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
    """``(ok, JSON result or error text, calls made)``: at most ``retries + 1`` calls.

    ``activity_options`` are ``execute_activity``'s (``activity_id`` included; its retry
    policy is replaced: one attempt per call); the server's own task queue, when its
    handle names one, wins over the plan's.
    """
    server, tool = options.mcp_server, options.mcp_tool
    if not server or not tool:
        return False, "not an MCP tool: its tool table entry names no server", 0
    opts = dict(activity_options)
    first_id = str(opts.pop("activity_id"))
    opts["retry_policy"] = retry_policy(1)
    if options.mcp_task_queue:
        opts["task_queue"] = options.mcp_task_queue
    calls = 0
    while True:
        calls += 1
        activity_id = first_id if calls == 1 else f"{first_id}#{calls}"
        try:
            raw = await workflow.execute_activity(
                call_tool_activity(server),
                {"tool_name": tool, "arguments": args, "tool_use_id": activity_id},
                result_type=dict,
                activity_id=activity_id,
                **opts,
            )
            value = result_json(raw)
        except (McpErrorResult, ActivityError) as exc:
            retryable = isinstance(exc, ActivityError) or exc.retryable
            if retryable and calls <= retries:
                delay = min(backoff_s * 2 ** (calls - 1), MAX_BACKOFF_S)
                await workflow.sleep(timedelta(seconds=delay))
                continue
            if isinstance(exc, ActivityError):
                return False, _activity_failure(exc, opts), calls
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


def _activity_failure(exc: ActivityError, opts: dict[str, Any]) -> str:
    """A call whose activity failed: a timeout names the bound, as a plan step's does."""
    cause = exc.cause
    timeout = opts.get("start_to_close_timeout")
    if type(cause).__name__ == "TimeoutError" and timeout is not None:
        return f"timed out after {timeout.total_seconds():g} s (start_to_close)"
    return failure_message(exc)
