"""What a person can do from the page: decide an approval, cancel a plan, answer a breakpoint.

Each is the call the command line makes: a decision goes through
``cli.commands.ledger.take_decision`` (what `durable-plan approve` runs: a running
workflow, a worker that answers, then the ``decide_step`` update bound to the arguments'
digest the person saw); a cancellation is the request Temporal's own
`temporal workflow cancel` sends, so the plan ends ``cancelled`` with its ledger.

An answer at a breakpoint (continue, skip, abort) goes through
``cli.commands.breakpoints.answer_breakpoint``, what `durable-plan continue` runs.
"""

from __future__ import annotations

from typing import Any

from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError

from durable_plan.cli.commands import CommandError
from durable_plan.cli.commands.breakpoints import BreakpointRefused, answer_breakpoint
from durable_plan.cli.commands.ledger import DecisionRefused, take_decision
from durable_plan.console.bounds import cut_text

BREAKPOINT_ACTIONS = ("continue", "skip", "abort")
MAX_REASON_CHARS = 1_000


class ActionRefused(Exception):
    """An action not taken: ``status`` is the HTTP status, the message says why and what to do."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _text(body: dict[str, Any], key: str, limit: int) -> str:
    value = body.get(key, "")
    if not isinstance(value, str):
        raise ActionRefused(400, f"{key}: a string, not {type(value).__name__}")
    if len(value) > limit:
        raise ActionRefused(400, f"{key}: at most {limit} characters (got {len(value)})")
    return value


async def decide(
    client: Client, address: str, workflow_id: str, step_id: str, body: dict[str, Any]
) -> str:
    """``body``: ``approved`` (bool), ``reason``, ``digest`` (the one the page showed)."""
    approved = body.get("approved")
    if not isinstance(approved, bool):
        raise ActionRefused(400, "approved: true to approve, false to reject")
    digest = _text(body, "digest", 200) or None
    if digest is None:
        raise ActionRefused(400, "digest: the arguments' digest the page showed is required")
    try:
        return await take_decision(
            client,
            workflow_id,
            step_id,
            approved=approved,
            reason=_text(body, "reason", MAX_REASON_CHARS),
            digest=digest,
            address=address,
        )
    except DecisionRefused as exc:
        raise ActionRefused(409, cut_text(str(exc), 1_000) or "refused") from None
    except CommandError as exc:
        raise ActionRefused(404, str(exc)) from None


async def cancel(client: Client, workflow_id: str) -> str:
    """Ask the server to cancel the workflow: the plan cancels its running steps and ends
    ``cancelled`` (a conversation, likewise). Refused for one that is not running."""
    handle = client.get_workflow_handle(workflow_id)
    try:
        description = await handle.describe()
        if description.status != WorkflowExecutionStatus.RUNNING:
            status = description.status.name.lower() if description.status else "ended"
            raise ActionRefused(409, f"{workflow_id} is {status}; only a running one cancels")
        await handle.cancel()
    except RPCError as exc:
        raise ActionRefused(404, cut_text(f"{workflow_id}: {exc.message}", 500) or "") from None
    return "cancel requested"


async def breakpoint_action(
    client: Client, address: str, workflow_id: str, step_id: str, body: dict[str, Any]
) -> str:
    """Continue, skip or abort the call paused at a breakpoint: ``body["action"]``, and
    ``body["path"]`` (the paused call's step path, ``e1/do.3``, ``e1/agent.2/charge``;
    default: ``step_id`` itself). What `durable-plan continue|skip|abort` runs
    (``cli.commands.breakpoints.answer_breakpoint``)."""
    action = body.get("action")
    if action not in BREAKPOINT_ACTIONS:
        raise ActionRefused(400, f"action {action!r}: one of {', '.join(BREAKPOINT_ACTIONS)}")
    path = _text(body, "path", 1_000) or step_id
    try:
        answered, said = await answer_breakpoint(
            client, workflow_id, path, str(action), address=address
        )
    except BreakpointRefused as exc:
        raise ActionRefused(409, cut_text(str(exc), 1_000) or "refused") from None
    except CommandError as exc:
        raise ActionRefused(404, str(exc)) from None
    return f"{answered}: {said}"
