"""The plans list: running and recent plans and conversations, from the server's visibility.

One visibility page per request (``MAX_LIST_ROWS`` rows, a page token for the next), filtered
by status and searched by id on the server. Each plan row then gets its steps done/total and
tokens: a closed plan from its result (the close event, no worker needed), a running one
from its ``progress`` query (a worker answers at once, bounded by ``ROW_TIMEOUT``), a few at
a time. Agent steps' child workflows are not rows (their plan shows them).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import time
from datetime import timedelta
from typing import Any

from temporalio.client import Client, WorkflowExecution, WorkflowExecutionStatus

from durable_plan.console.bounds import cut_text
from durable_plan.console.settings import MAX_LIST_ROWS
from durable_plan.temporal.wire.messages import PLAN_WORKFLOW_NAME
from durable_plan.temporal.workflows.agent_workflow import AGENT_STEP_WORKFLOW_NAME
from durable_plan.temporal.workflows.plan_status import PLAN_STATUS

STATUSES = {
    "running": "Running",
    "completed": "Completed",
    "failed": "Failed",
    "cancelled": "Canceled",
    "terminated": "Terminated",
    "timed_out": "TimedOut",
}
ROW_TIMEOUT = timedelta(seconds=2)
ROW_CONCURRENCY = 8
MAX_SEARCH_CHARS = 200


def quoted(text: str) -> str:
    """A string literal of Temporal's list filter."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def list_query(status: str | None, search: str | None, parent: str | None = None) -> str:
    """The visibility filter: never agent steps' children; a status; ids starting with
    ``search``; the children of ``parent`` (a conversation's plans). ValueError names a
    status it does not know."""
    parts = [f"WorkflowType != {quoted(AGENT_STEP_WORKFLOW_NAME)}"]
    if status:
        if status not in STATUSES:
            raise ValueError(f"status {status!r}: one of {', '.join(STATUSES)}")
        parts.append(f"ExecutionStatus = {quoted(STATUSES[status])}")
    if search:
        parts.append(f"WorkflowId STARTS_WITH {quoted(search[:MAX_SEARCH_CHARS])}")
    if parent:
        parts.append(f"ParentWorkflowId = {quoted(parent)}")
    return " AND ".join(parts)


def kind_of(workflow_type: str) -> str:
    if workflow_type == PLAN_WORKFLOW_NAME:
        return "plan"
    if workflow_type == AGENT_STEP_WORKFLOW_NAME:
        return "agent step"
    return "conversation"


def status_name(status: WorkflowExecutionStatus | None) -> str:
    return status.name.lower() if status is not None else "unknown"


def row(execution: WorkflowExecution) -> dict[str, Any]:
    started = execution.start_time.timestamp()
    closed = execution.close_time.timestamp() if execution.close_time else None
    return {
        "id": execution.id,
        "run_id": execution.run_id,
        "kind": kind_of(execution.workflow_type),
        "type": execution.workflow_type,
        "status": status_name(execution.status),
        "plan_status": execution.typed_search_attributes.get(PLAN_STATUS),
        "started": started,
        "closed": closed,
        "age_s": round(time.time() - started, 1),
        "parent": execution.parent_id,
        "steps_done": None,
        "steps_total": None,
        "tokens": None,
    }


async def list_plans(
    client: Client,
    *,
    status: str | None = None,
    search: str | None = None,
    parent: str | None = None,
    page_token: str | None = None,
    rows: int = MAX_LIST_ROWS,
) -> dict[str, Any]:
    """One page of rows, newest first, and the token of the next page (None: the last)."""
    token = None
    if page_token:
        try:
            token = base64.urlsafe_b64decode(page_token.encode())
        except (binascii.Error, ValueError):
            raise ValueError("page: not a page token this console gave") from None
    listing = client.list_workflows(
        list_query(status, search, parent),
        page_size=min(rows, MAX_LIST_ROWS),
        next_page_token=token,
    )
    await listing.fetch_next_page(page_size=min(rows, MAX_LIST_ROWS))
    found = [row(e) for e in listing.current_page or ()]
    if parent:
        found.reverse()  # a conversation's plans in the order it started them
    gate = asyncio.Semaphore(ROW_CONCURRENCY)
    await asyncio.gather(*(_fill(client, r, gate) for r in found if r["kind"] == "plan"))
    following = listing.next_page_token
    return {
        "rows": found,
        "next_page": base64.urlsafe_b64encode(following).decode() if following else None,
    }


async def _fill(client: Client, found: dict[str, Any], gate: asyncio.Semaphore) -> None:
    """Steps done/total and tokens of one plan row; left empty when nobody can say."""
    from durable_plan.temporal.client.start import PlanHandle

    handle = PlanHandle(client.get_workflow_handle(found["id"], run_id=found["run_id"]))
    async with gate:
        try:
            if found["status"] == "running":
                lines = await handle.progress(rpc_timeout=ROW_TIMEOUT)
                waiting = ("pending", "running", "awaiting_approval", "paused")
                ended = [ln for ln in lines if ln["phase"] not in waiting]
                found["steps_done"], found["steps_total"] = len(ended), len(lines)
            elif found["status"] == "completed":
                result = await asyncio.wait_for(handle.result(), ROW_TIMEOUT.total_seconds())
                found["steps_done"] = len(result.ledger)
                found["steps_total"] = len(result.ledger)
                found["tokens"] = (result.usage or {}).get("total")
        except Exception as exc:  # sealed, no worker, a failed plan: the row says less
            found["note"] = cut_text(f"{type(exc).__name__}", 80)
