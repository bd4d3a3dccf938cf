"""A plan submitted inside a ``TemporalAgent``: it runs as a ``PlanWorkflow`` child.

Imported only when the plan tool's body runs in workflow code, so a plain in-process
agent never loads workflow code. The tool body checks the plan in the parent (a bad
plan costs no child workflow), starts the child with the readable id
``<parent id>/plan/<toolUseId>``, answers its requests to the agent's tool hooks while
it runs (``hook_relay``), and, when the plan ends as a whole, finds out what it did
(``recovery``).
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

from temporalio import workflow
from temporalio.common import RawValue
from temporalio.exceptions import ApplicationError, ChildWorkflowError

from durable_plan.check import CheckedPlan, ToolCatalog
from durable_plan.language.plan import PlanResult
from durable_plan.run.hooks import ToolHooks
from durable_plan.run.reuse import REMEMBERED_KEY, Recall, Remembered
from durable_plan.strands.plan_tool import PlanFailed
from durable_plan.strands.settings import PlanToolSettings
from durable_plan.temporal.wire.ids import child_workflow_id
from durable_plan.temporal.wire.messages import (
    PLAN_WORKFLOW_NAME,
    PLANS_TOPIC,
    failure_message,
    json_payload,
)
from durable_plan.temporal.wire.payload_limits import workers_store_payloads
from durable_plan.temporal.wire.plan_settings import (
    DEFAULT_MAX_HISTORY_BYTES,
    HookRelay,
    Models,
    PlanSettings,
)
from durable_plan.temporal.wire.result_form import plan_result_of
from durable_plan.temporal.workflows.hook_relay import RelayDesk, hook_inbox
from durable_plan.temporal.workflows.plan_request import checked_input
from durable_plan.temporal.workflows.plan_status import start_attributes, workers_see_plan_status
from durable_plan.temporal.workflows.recovery import Salvage, recover
from durable_plan.temporal.workflows.sandbox_chain import conversation_chain
from durable_plan.temporal.workflows.ui_summary import plan_metadata
from durable_plan.tools.registry import ToolRegistry

CONVERSATION_MAX_HISTORY_BYTES = DEFAULT_MAX_HISTORY_BYTES
"""A conversation past this starts no more plans (Temporal terminates it at 50 MiB)."""


async def run_child(
    plugin: PlanToolSettings,
    checked: CheckedPlan,
    registry: ToolRegistry,
    catalog: ToolCatalog,
    tool_use_id: str,
    hooks: ToolHooks | None,
    agent: Any,
    recall: Recall | None,
) -> tuple[PlanResult, list[Remembered]]:
    """The plan as a child workflow: its result, and the steps it ran ok (to remember).

    While it runs, this body also answers its requests to the agent's tool hooks
    (``hook_relay``), so nothing of the plan outlives it in this workflow."""
    parent = workflow.info()
    room = CONVERSATION_MAX_HISTORY_BYTES - parent.get_current_history_size()
    if room <= 0:
        raise PlanFailed(
            f"this conversation's history is {parent.get_current_history_size() // 2**20} "
            "MiB, near Temporal's 50 MiB limit for one workflow: no more plans can run in "
            "it; answer with what you have, and let the user start a new conversation"
        )
    # Only what this agent may plan travels: agent steps choose among these too.
    plannable = set(catalog.plannable)
    tools = {n: o for n, o in plugin.tool_options(registry).items() if n in plannable}
    # Shapes travel only where the parent checked with them (a conversation whose history
    # ran this plan before its tools declared them starts it as it did: ``versions``).
    tools = {
        n: o
        if o.output_schema is None or catalog.tools[n].output_schema is not None
        else replace(o, output_schema=None)
        for n, o in tools.items()
    }
    options = dict(plugin.plan_options)
    inputs = options.pop("inputs", None)  # the plan's own, not a setting
    given = PlanSettings.of(options)
    bounds = replace(given.bounds, max_steps=plugin.max_steps)
    if plugin.max_result_bytes is not None:
        bounds = replace(bounds, max_result_bytes=plugin.max_result_bytes)
    child_id = child_workflow_id(parent.workflow_id, "plan", tool_use_id)
    desk: RelayDesk | None = None
    relay = HookRelay()
    gated = frozenset(n for n, o in tools.items() if o.requires_approval)
    if hooks is not None and hooks.active:
        # Each step passes the agent's tool hooks, run here in the agent's workflow.
        desk = hook_inbox().open(child_id, hooks, gated)
        relay = HookRelay(
            hooks_workflow_id=parent.workflow_id,
            hook_key=child_id,
            hook_bytes=min(plugin.hook_relay_bytes, room),
            hooked_tools=list(plugin.hooked_tools) if plugin.hooked_tools is not None else None,
        )
    visibility = given.visibility
    if "plan_status_attribute" not in options:
        # What this process's plan workers found at start (workflow code cannot ask the
        # server), recorded in the child's input: a replay of either reads it, never asks again.
        visibility = replace(
            visibility,
            plan_status_attribute=workers_see_plan_status(parent.namespace, parent.task_queue),
        )
    settings = replace(
        given,
        bounds=bounds,
        routing=replace(given.routing, task_queue=plugin.task_queue),
        models=Models(
            default_model=getattr(getattr(agent, "model", None), "_model_name", None),
            allowed_models=list(plugin.agent_models),
        ),
        relay=relay,
        storage=replace(given.storage, payloads_stored=workers_store_payloads()),
        visibility=visibility,
        chain=conversation_chain(agent, tools),  # sandbox tools: this conversation's environment
    )
    memory = recall.to_wire() if recall is not None else None
    request = checked_input(checked, tools, settings, inputs=inputs, memory=memory)
    task_queue = plugin.task_queue or parent.task_queue
    summary, details = plan_metadata(checked, request.visibility.ui_metadata)
    handle = await workflow.start_child_workflow(
        PLAN_WORKFLOW_NAME,
        RawValue(json_payload(request.to_wire())),  # in the plan's own key order
        id=child_id,
        task_queue=task_queue,
        result_type=dict,
        static_summary=summary,
        static_details=details,
        search_attributes=start_attributes() if request.visibility.plan_status_attribute else None,
    )
    if plugin.plan_stream is not None:  # workflow code: a replay announces it again, alike
        plugin.plan_stream.topic(PLANS_TOPIC).publish({"plan": child_id})
    waiting = asyncio.ensure_future(handle)
    try:
        if desk is not None:
            await desk.serve(waiting)
        raw = await waiting
    except ChildWorkflowError as exc:
        salvage = await _salvage(exc, child_id, handle.first_execution_run_id, task_queue)
        raise PlanFailed(failure_message(exc), salvage) from None
    finally:
        if not waiting.done():
            waiting.cancel()
    learned = [Remembered.from_wire(e) for e in raw.pop(REMEMBERED_KEY, None) or []]
    return plan_result_of(raw), learned


async def _salvage(
    exc: ChildWorkflowError, child_id: str, run_id: str | None, task_queue: str
) -> Salvage | None:
    """What a plan that ended as a whole had done: from its failure's details when it
    failed in its own code, else (cancelled, terminated, timed out) read from its history."""
    cause = exc.cause
    if isinstance(cause, ApplicationError):
        for detail in cause.details:
            salvage = Salvage.from_wire(detail)
            if salvage is not None:
                return salvage
        return None
    return await recover(child_id, run_id, task_queue)
