"""The plan workflow's input built from a checked plan: the wire, no client, no network.

Both starters build it here: ``client.start_plan`` outside any workflow, and the plan
tool's body inside a conversation's workflow (``strands.durable``). Workflow code must
not load the client (``temporalio.client``, pollers, subscriptions), so the pure part
lives apart from it; ``durable_plan.temporal.client.start.checked_input`` re-exports it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from durable_plan.check import CheckedPlan
from durable_plan.check.json_schema import without_annotations
from durable_plan.check.saved_plans import tools_inside
from durable_plan.language.options import ToolOptions
from durable_plan.temporal.wire.plan_settings import Models, PlanSettings
from durable_plan.temporal.wire.workflow_inputs import PlanInput
from durable_plan.temporal.workflows.ui_summary import check_ui_metadata

__all__ = ["checked_input"]


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
