"""The plan workflow's input built from a checked plan, and the plan checked back from an
input as the workflow checks it: the wire, no client, no network.

Both starters build it here: ``client.start_plan`` outside any workflow, and the plan
tool's body inside a conversation's workflow (``strands.durable``). Workflow code must
not load the client (``temporalio.client``, pollers, subscriptions), so the pure part
lives apart from it; ``durable_plan.temporal.client.start.checked_input`` re-exports it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from durable_plan.check import CheckedPlan, ToolCatalog, check_plan
from durable_plan.check.json_schema import without_annotations
from durable_plan.check.saved_plans import tools_inside
from durable_plan.language.options import ToolOptions
from durable_plan.run.reuse import Recall, reusable_tools
from durable_plan.temporal.wire.plan_settings import Models, PlanSettings
from durable_plan.temporal.wire.workflow_inputs import PlanInput
from durable_plan.temporal.workflows.ui_summary import check_ui_metadata

__all__ = ["checked_input", "recorded_check", "recorded_recall"]


def checked_input(
    checked: CheckedPlan,
    tools: dict[str, ToolOptions],
    settings: PlanSettings | None = None,
    *,
    inputs: dict[str, Any] | None = None,
    memory: dict[str, Any] | None = None,
) -> PlanInput:
    """The workflow input for a plan the caller has already checked, with the tools it
    may call and nothing else (the table is in the plan's history, and an agent step's
    in its child's: a registry's other tools would be carried by every plan). A tool's
    description only travels when an agent step may call it: no model reads it else.
    ``settings``: the plan's records (``PlanSettings.of`` reads them from flat names; None:
    every default)."""
    if not checked.durable:
        raise ValueError("checked_input needs a plan checked for a durable run (durable=True)")
    plan = checked.plan.model_dump(mode="json", exclude_defaults=True)
    named, agent_tools = checked.tools_called(list(tools))
    # What saved plans call travels whole: their children check and run with it.
    agent_tools = [*agent_tools, *tools_inside([*named, *agent_tools], tools)]
    table = {
        name: tools[name] if name in agent_tools else _unread(tools[name])
        for name in tools
        if name in agent_tools or name in named
    }
    settings = settings or PlanSettings()
    if not checked.has_agent_steps:
        settings = replace(settings, models=Models())  # nothing of the plan calls a model
    check_ui_metadata(settings.visibility.ui_metadata)
    return PlanInput(
        plan=plan,
        tools=table,
        **settings.records(),
        inputs=inputs,
        memory=memory,
        # Checked here as the workflow would: it skips the checks that only refuse.
        checked_by_sender=True,
    )


def _unread(options: ToolOptions) -> ToolOptions:
    """A tool no model reads about in this plan: its description and its schema's
    annotations stay home (the workflow validates arguments with the rest)."""
    return replace(options, description="", input_schema=without_annotations(options.input_schema))


def recorded_recall(request: PlanInput) -> Recall | None:
    """The memory of earlier plans the input carries (what a repair may reuse)."""
    if request.memory is None:
        return None
    return Recall.from_wire(request.memory, reusable_tools(request.tools))


def recorded_check(request: PlanInput, recall: Recall | None) -> CheckedPlan:
    """The plan as ``PlanWorkflow`` checks it, from its input alone: the recorded tool table
    (shapes and all: the verdict is the same on replay), models, prior steps and inputs. The
    workflow and the console's drawing of a plan both check through here."""
    # An empty tool table means no tool may be planned, never "any tool".
    catalog = replace(
        ToolCatalog.from_options(request.tools),
        default_model=request.models.default_model,
        models=request.models.allowed_models,
    )
    return check_plan(
        request.plan,
        catalog=catalog,
        max_steps=request.bounds.max_steps,
        durable=True,
        prior=recall.prior_ids if recall is not None else None,
        inputs=request.inputs,
        checked_by_sender=request.checked_by_sender,
    )
