"""Durable plans on Temporal: the workflows, the tool activities, client and worker helpers.

The public names are imported on first use (PEP 562): a module of this package
(``messages``, ``ids``) can be imported without the workflow module, so a plain
in-process agent never loads workflow code. The workflow sandbox imports this package
whenever it loads ``PlanWorkflow``; the client and activity helpers pull in Strands and
boto, which the sandbox must not re-import, so each name is imported passed through.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS: dict[str, str] = {
    "StepContext": "durable_plan.temporal.activities",
    "current_step": "durable_plan.temporal.activities",
    "tool_activity": "durable_plan.temporal.activities",
    "PlanFailed": "durable_plan.temporal.client",
    "PlanHandle": "durable_plan.temporal.client",
    "plan_input": "durable_plan.temporal.client",
    "run_plan": "durable_plan.temporal.client",
    "start_plan": "durable_plan.temporal.client",
    "ApprovalDecision": "durable_plan.temporal.messages",
    "PlanInput": "durable_plan.temporal.messages",
    "PLAN_WORKFLOW_NAME": "durable_plan.temporal.messages",
    "plan_worker": "durable_plan.temporal.worker",
    "tool_worker": "durable_plan.temporal.worker",
    "model_worker": "durable_plan.temporal.worker",
    "PlanWorkflow": "durable_plan.temporal.workflow",
    "JsonLinesExporter": "durable_plan.temporal.tracing",
    "tracing_plugin": "durable_plan.temporal.tracing",
}

if TYPE_CHECKING:
    from durable_plan.temporal.activities import StepContext, current_step, tool_activity
    from durable_plan.temporal.client import (
        PlanFailed,
        PlanHandle,
        plan_input,
        run_plan,
        start_plan,
    )
    from durable_plan.temporal.messages import PLAN_WORKFLOW_NAME, ApprovalDecision, PlanInput
    from durable_plan.temporal.tracing import JsonLinesExporter, tracing_plugin
    from durable_plan.temporal.worker import model_worker, plan_worker, tool_worker
    from durable_plan.temporal.workflow import PlanWorkflow

__all__ = [
    "PLAN_WORKFLOW_NAME",
    "ApprovalDecision",
    "JsonLinesExporter",
    "PlanFailed",
    "PlanHandle",
    "PlanInput",
    "PlanWorkflow",
    "StepContext",
    "current_step",
    "model_worker",
    "plan_input",
    "plan_worker",
    "run_plan",
    "start_plan",
    "tool_activity",
    "tool_worker",
    "tracing_plugin",
]


def __getattr__(name: str) -> Any:
    """Import a public name on first use; submodules are found as usual."""
    module_name = _EXPORTS.get(name)
    if module_name is None:
        raise AttributeError(f"module 'durable_plan.temporal' has no attribute {name!r}")
    from temporalio import workflow

    with workflow.unsafe.imports_passed_through():
        value = getattr(importlib.import_module(module_name), name)
    globals()[name] = value
    return value
