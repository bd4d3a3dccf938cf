"""One submitted plan, from the model's tool call to the tool result it reads.

The plan is checked (durably, as the conversation recorded it), then run in-process by the
engine or as a ``PlanWorkflow`` child (``strands.durable``); a rejection, a failure and a
plan that failed as a whole are each a tool result saying what happened and how to repair
it, never an exception out of the tool."""

from __future__ import annotations

import json
from typing import Any, Protocol

from strands.types.tools import ToolResult, ToolUse
from temporalio import workflow

from durable_plan.check import CheckedPlan, ToolCatalog, check_plan
from durable_plan.language.errors import PlanRejected, describe_exception
from durable_plan.language.plan import PlanResult
from durable_plan.local.agents import agent_steps
from durable_plan.local.hooked import hooked_invoker
from durable_plan.local.runner import run_checked
from durable_plan.run.calls import Invoker
from durable_plan.run.hooks import ToolHooks
from durable_plan.run.reuse import Remembered, StepMemory, repair_hint, reusable_tools
from durable_plan.run.summary import failure_text, result_for_model
from durable_plan.strands.plan_tool import PlanFailed, error_result, unwrap_peer_input
from durable_plan.strands.settings import PlanToolSettings
from durable_plan.strands.tool_description import WORKFLOW_INTERNALS
from durable_plan.tools.mcp import listed_tools, with_mcp_tools
from durable_plan.tools.registry import ToolRegistry


class Submitting(PlanToolSettings, Protocol):
    """What running a submitted plan reads of the plan tool (``WorkflowPlanPlugin`` has it):
    named here, not imported, so this module does not import the plugin that imports it."""

    _final_answers: dict[str, str]
    _mcp_servers: dict[str, Any]
    honor_final: bool
    models: dict[str, Any]
    memory: StepMemory
    plans_run: int

    def _registry_for(self, agent: Any, durable: bool) -> ToolRegistry: ...

    def catalog(self, registry: ToolRegistry, *, durable: bool) -> ToolCatalog: ...

    def _took(self, result: PlanResult, learned: list[Remembered]) -> None: ...


async def submit_plan(plugin: Submitting, tool_use: ToolUse, agent: Any) -> ToolResult:
    """Check and run one plan the model submitted, in-process or as a child workflow; every
    ending is a tool result the model can act on (``WorkflowPlanPlugin.submit``)."""
    tool_use_id = tool_use["toolUseId"]
    durable = workflow.in_workflow()
    learned: list[Remembered] = []
    try:
        registry = plugin._registry_for(agent, durable)
        if plugin._mcp_servers:
            mcp = await listed_tools(plugin._mcp_servers, durable=durable)
            registry = with_mcp_tools(registry, mcp)
        catalog = plugin.catalog(registry, durable=durable)
        memory = plugin.memory
        prior = memory.ids if memory.enabled else None
        raw = unwrap_peer_input(tool_use["input"])
        checked, catalog = _check(raw, catalog, plugin.max_steps, durable, prior)
        recall = None
        if memory.enabled:
            reusable = reusable_tools(plugin.tool_options(registry))
            recall = memory.recall(checked, plan=plugin.plans_run + 1, reusable=reusable)
        hooks = ToolHooks(agent) if agent is not None else None
        if durable:
            with workflow.unsafe.imports_passed_through():  # in the workflow sandbox
                from durable_plan.strands.durable import run_child

            result, learned = await run_child(
                plugin, checked, registry, catalog, tool_use_id, hooks, agent, recall
            )
        else:
            active = hooks if hooks is not None and hooks.active else None
            invoker = agent_steps(
                _invoker_for(registry, agent),
                registry,
                catalog.plannable,
                models=plugin.models,
                default_model=getattr(agent, "model", None),
                # Around saved plans' calls too (``plan__*``), as durably (``Stages``).
                around=(
                    (lambda inv: hooked_invoker(inv, active, tool_use_id, plugin.hooked_tools))
                    if active is not None
                    else None
                ),
            )
            result = await run_checked(
                checked, invoker, tool_timeouts=registry.timeouts(), recall=recall
            )
            learned = recall.learned if recall is not None else []
    except PlanRejected as exc:
        if durable:  # a row in the conversation's history says why (``plan_status``)
            with workflow.unsafe.imports_passed_through():
                from durable_plan.temporal.workflows.plan_status import note_rejection

            note_rejection(tool_use_id, [str(p) for p in exc.problems])
        return error_result(tool_use_id, str(exc))
    except PlanFailed as exc:
        if exc.salvage is None:
            return error_result(tool_use_id, f"The plan failed as a whole: {exc}")
        # The plan did part of its work: the model learns what, and a repair reuses it.
        result, learned = exc.salvage.result(), exc.salvage.remembered
        plugin._took(result, learned)
        text = f"The plan failed as a whole: {exc}\n" + failure_text(
            result, repair_hint(plugin.memory, result)
        )
        return error_result(tool_use_id, text)
    except Exception as exc:
        if isinstance(exc, WORKFLOW_INTERNALS):
            raise  # Temporal's own control flow (nondeterminism, eviction) must escape
        # Whatever went wrong, the model hears it and the conversation goes on.
        text = f"The plan failed as a whole: {describe_exception(exc)}"
        return error_result(tool_use_id, text)
    plugin._took(result, learned)
    if not result.ok:
        report = result_for_model(result)
        text = failure_text(result, repair_hint(plugin.memory, result))
        return {
            "toolUseId": tool_use_id,
            "status": "error",
            "content": [{"text": text}, {"json": report}],
        }
    if result.final and plugin.honor_final:
        plugin._final_answers[tool_use_id] = json.dumps(result.returned)
    return {
        "toolUseId": tool_use_id,
        "status": "success",
        "content": [{"json": result_for_model(result)}],
    }


def _invoker_for(registry: ToolRegistry, agent: Any) -> Invoker:
    """The registry's tools, called with the agent in their invocation state (as Strands does)."""
    state = {"agent": agent} if agent is not None else {}

    async def invoke(name: str, args: dict[str, Any]) -> Any:
        return await registry.invoke(name, args, state)

    return invoke


def _check(
    raw: Any, catalog: ToolCatalog, max_steps: int, durable: bool, prior: list[str] | None
) -> tuple[CheckedPlan, ToolCatalog]:
    """The checked plan, and the catalogue it was checked with (durably, as recorded)."""
    if not durable:
        return check_plan(raw, catalog=catalog, max_steps=max_steps, prior=prior), catalog
    with workflow.unsafe.imports_passed_through():  # deterministic code, loaded once
        from durable_plan.temporal.workflows.versions import check_as_recorded

    used: list[ToolCatalog] = []

    def check(with_catalog: ToolCatalog) -> CheckedPlan:
        used.append(with_catalog)
        # jsonata imports lazily; inside the workflow sandbox they are passed through.
        with workflow.unsafe.imports_passed_through():
            return check_plan(
                raw, catalog=with_catalog, max_steps=max_steps, durable=True, prior=prior
            )

    # Shapes come from the tools' code, not from history: a plan the conversation ran before
    # a tool declared its shape gets the verdict it had on replay.
    checked = check_as_recorded(check, catalog)
    return checked, used[-1]
