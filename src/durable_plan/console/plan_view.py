"""One workflow as the page shows it: a plan's graph and ledger, an agent step's rounds, a
conversation's plans; the same answer for a running one and one that ended.

The graph is drawn from the plan's recorded input (``graph_view``). The ledger comes as
`durable-plan show` gets it (``cli.commands.ledger.ledger``): a running plan answers its
``progress`` query, an ended one gives its result's ledger (no worker needed). A plan whose
input is sealed and a console without keys shows what the history says in the clear (its
steps' ids, tools and outcomes) and says what is hidden.
"""

from __future__ import annotations

from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError

from durable_plan.cli.commands import CommandError
from durable_plan.console.bounds import cut_text, preview
from durable_plan.console.graph_view import checked_from_input, layout, layout_from_steps
from durable_plan.console.history import SEALED, plan_request
from durable_plan.console.listing import kind_of, list_plans, status_name
from durable_plan.console.settings import MAX_HISTORY_EVENTS
from durable_plan.language.errors import PlanRejected
from durable_plan.temporal.workflows.plan_status import PLAN_STATUS


class NotFound(Exception):
    pass


async def workflow_state(client: Client, workflow_id: str) -> dict[str, Any]:
    """What the page needs to draw ``workflow_id`` now."""
    handle = client.get_workflow_handle(workflow_id)
    try:
        description = await handle.describe()
    except RPCError as exc:
        raise NotFound(cut_text(f"no workflow {workflow_id!r}: {exc.message}", 500)) from None
    kind = kind_of(description.workflow_type)
    state: dict[str, Any] = {
        "id": workflow_id,
        "kind": kind,
        "type": description.workflow_type,
        "status": status_name(description.status),
        "plan_status": description.typed_search_attributes.get(PLAN_STATUS),
        "started": description.start_time.timestamp(),
        "closed": description.close_time.timestamp() if description.close_time else None,
        "task_queue": description.task_queue,
        "parent": description.parent_id,
        "running": description.status == WorkflowExecutionStatus.RUNNING,
        "hidden": [],
    }
    if kind == "plan":
        await _plan(client, workflow_id, description, state)
    elif kind == "conversation":
        state["plans"] = (await list_plans(client, parent=workflow_id))["rows"]
    else:
        await _agent_step(client, workflow_id, description, state)
    return state


async def _plan(client: Client, workflow_id: str, description: Any, state: dict[str, Any]) -> None:
    from durable_plan.cli.commands.ledger import ledger
    from durable_plan.temporal.client.start import PlanHandle

    request = await plan_request(client, workflow_id)
    state["sealed"] = not request.ok
    if request.ok:
        try:
            state["graph"] = layout(checked_from_input(request.value))
        except (PlanRejected, ValueError, TypeError) as exc:  # the workflow refused it too
            state["hidden"].append(cut_text(f"the plan does not check: {exc}", 1_000))
    else:
        state["hidden"].append(f"the plan and every value: {request.hidden}")
    handle = PlanHandle(client.get_workflow_handle(workflow_id))
    lines: list[dict[str, Any]] | None = None
    failure: str | None = None
    if description.status == WorkflowExecutionStatus.COMPLETED and request.ok:
        try:
            result = await handle.result()
            lines = [o.model_dump(exclude_none=True) for o in result.ledger]
            for line in lines:
                line["phase"] = line.pop("status")
            state["tokens"] = result.usage
            state["returned"] = {k: preview(v, 500) for k, v in list(result.returned.items())[:20]}
            state["exited"] = result.exited
        except Exception as exc:
            failure = f"{type(exc).__name__}: {exc}"
    elif request.ok:
        try:
            _status, lines, failure = await ledger(handle, description)
        except CommandError as exc:
            failure = str(exc)
    if lines is None and not request.ok:
        lines = await _clear_steps(client, workflow_id)
    state["ledger"] = lines
    state["failure"] = cut_text(failure, 2_000)
    if "graph" not in state:
        state["graph"] = layout_from_steps(lines or [])


async def _clear_steps(client: Client, workflow_id: str) -> list[dict[str, Any]]:
    """What the history says in the clear of a sealed plan: each activity's id (the step
    id), type (the tool), outcome and attempts; a batch scheduled together is one level."""
    handle = client.get_workflow_handle(workflow_id)
    steps: dict[int, dict[str, Any]] = {}
    batches: dict[int, int] = {}
    read = 0
    async for event in handle.fetch_history_events():
        read += 1
        if read > MAX_HISTORY_EVENTS:
            break
        kind = event.event_type
        if kind == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            attrs = event.activity_task_scheduled_event_attributes
            level = batches.setdefault(attrs.workflow_task_completed_event_id, len(batches))
            steps[event.event_id] = {
                "id": attrs.activity_id,
                "tool": attrs.activity_type.name,
                "phase": "running",
                "level": level,
                "attempts": 0,
                "error": None,
            }
        elif kind == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            started = event.activity_task_started_event_attributes
            if (line := steps.get(started.scheduled_event_id)) is not None:
                line["attempts"] = started.attempt
        elif kind == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            done = event.activity_task_completed_event_attributes
            if (line := steps.get(done.scheduled_event_id)) is not None:
                line["phase"] = "ok"
        elif kind == EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED:
            failed = event.activity_task_failed_event_attributes
            if (line := steps.get(failed.scheduled_event_id)) is not None:
                line["phase"] = "failed"
                line["error"] = f"error text {SEALED}"
    return list(steps.values())


async def _agent_step(
    client: Client, workflow_id: str, description: Any, state: dict[str, Any]
) -> None:
    """An agent step's child: its rounds and tool calls (as `durable-plan show` reads them)."""
    from durable_plan.cli.commands.ledger import agent_step_state
    from durable_plan.temporal.client.start import PlanHandle

    try:
        found = await agent_step_state(
            PlanHandle(client.get_workflow_handle(workflow_id)), description
        )
    except CommandError as exc:
        state["hidden"].append(str(exc))
        return
    state["agent"] = preview(found, 8_000)
