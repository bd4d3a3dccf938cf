"""durable-plan: a Temporal-durable plan executor for LLM agents.

The public API is this package's names, one table (``_EXPORTS``): each name says the
module that owns it, and every other name is imported from its owning module. The names
are imported on first use (PEP 562), not at ``import durable_plan``: most of them pull
in Strands, pydantic, jsonata or the Temporal client, which cost the command line about
a second before ``durable-plan --version`` could answer, and a plain in-process agent
must not load workflow code. The workflow sandbox imports this package whenever it loads
a workflow from it, so each name is imported passed through (they are deterministic, and
some pull in libraries the sandbox must not re-import).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    # Plans: the language, the check, the in-process runner, the summary.
    "CheckedPlan": "durable_plan.check",
    "ToolCatalog": "durable_plan.check",
    "ToolSpec": "durable_plan.check",
    "check_plan": "durable_plan.check",
    "PlanRejected": "durable_plan.language.errors",
    "Problem": "durable_plan.language.errors",
    "Plan": "durable_plan.language.plan",
    "PlanResult": "durable_plan.language.plan",
    "Step": "durable_plan.language.plan",
    "StepOutcome": "durable_plan.language.plan",
    "execute_plan": "durable_plan.local.runner",
    "result_for_model": "durable_plan.run.summary",
    "summarize": "durable_plan.run.summary",
    "Pauses": "durable_plan.run.breakpoints",
    "PlanAborted": "durable_plan.run.breakpoints",
    # Tools.
    "ToolRegistry": "durable_plan.tools.registry",
    "SQLiteEffects": "durable_plan.temporal.activities.exactly_once",
    "exactly_once": "durable_plan.temporal.activities.exactly_once",
    # The Strands plugin (the plan tool).
    "WorkflowPlanPlugin": "durable_plan.strands.plugin",
    "PlanToolState": "durable_plan.strands.carried",
    "PlanBounds": "durable_plan.strands.options",
    # Durable plans on Temporal: the workflow, workers, client, tool-side helpers, tracing.
    "PlanWorkflow": "durable_plan.temporal.workflows.plan_workflow",
    "PLAN_WORKFLOW_NAME": "durable_plan.temporal.wire.messages",
    "ApprovalDecision": "durable_plan.temporal.wire.messages",
    "PlanInput": "durable_plan.temporal.wire.workflow_inputs",
    "DurablePlanPlugin": "durable_plan.temporal.worker.plugin",
    "fail_on_agent_error": "durable_plan.temporal.workflows.failures",
    "model_worker": "durable_plan.temporal.worker.helpers",
    "plan_worker": "durable_plan.temporal.worker.helpers",
    "tool_worker": "durable_plan.temporal.worker.helpers",
    "PlanHandle": "durable_plan.temporal.client.start",
    "plan_input": "durable_plan.temporal.client.start",
    "run_plan": "durable_plan.temporal.client.start",
    "start_plan": "durable_plan.temporal.client.start",
    "PlanFailed": "durable_plan.temporal.workflows.failures",
    "StepContext": "durable_plan.temporal.activities.tool_activities",
    "current_step": "durable_plan.temporal.activities.tool_activities",
    "tool_activity": "durable_plan.temporal.activities.tool_activities",
    "JsonLinesExporter": "durable_plan.temporal.client.tracing",
    "tracing_plugin": "durable_plan.temporal.client.tracing",
    # The server, encryption and result stores.
    "connect": "durable_plan.server.connection",
    "run_script": "durable_plan.server.script_runner",
    "EncryptionPlugin": "durable_plan.protect.encryption_plugin",
    "Keyring": "durable_plan.protect.keys",
    "FileResultStore": "durable_plan.protect.result_store",
    "ResultStore": "durable_plan.protect.result_store",
    "S3ResultStore": "durable_plan.protect.result_store",
}

if TYPE_CHECKING:
    from durable_plan.check import CheckedPlan, ToolCatalog, ToolSpec, check_plan
    from durable_plan.language.errors import PlanRejected, Problem
    from durable_plan.language.plan import Plan, PlanResult, Step, StepOutcome
    from durable_plan.local.runner import execute_plan
    from durable_plan.protect.encryption_plugin import EncryptionPlugin
    from durable_plan.protect.keys import Keyring
    from durable_plan.protect.result_store import FileResultStore, ResultStore, S3ResultStore
    from durable_plan.run.breakpoints import Pauses, PlanAborted
    from durable_plan.run.summary import result_for_model, summarize
    from durable_plan.server.connection import connect
    from durable_plan.server.script_runner import run_script
    from durable_plan.strands.carried import PlanToolState
    from durable_plan.strands.options import PlanBounds
    from durable_plan.strands.plugin import WorkflowPlanPlugin
    from durable_plan.temporal.activities.exactly_once import SQLiteEffects, exactly_once
    from durable_plan.temporal.activities.tool_activities import (
        StepContext,
        current_step,
        tool_activity,
    )
    from durable_plan.temporal.client.start import PlanHandle, plan_input, run_plan, start_plan
    from durable_plan.temporal.client.tracing import JsonLinesExporter, tracing_plugin
    from durable_plan.temporal.wire.messages import PLAN_WORKFLOW_NAME, ApprovalDecision
    from durable_plan.temporal.wire.workflow_inputs import PlanInput
    from durable_plan.temporal.worker.helpers import model_worker, plan_worker, tool_worker
    from durable_plan.temporal.worker.plugin import DurablePlanPlugin
    from durable_plan.temporal.workflows.failures import PlanFailed, fail_on_agent_error
    from durable_plan.temporal.workflows.plan_workflow import PlanWorkflow
    from durable_plan.tools.registry import ToolRegistry

__all__ = [
    "PLAN_WORKFLOW_NAME",
    "ApprovalDecision",
    "CheckedPlan",
    "DurablePlanPlugin",
    "EncryptionPlugin",
    "FileResultStore",
    "JsonLinesExporter",
    "Keyring",
    "Pauses",
    "Plan",
    "PlanAborted",
    "PlanBounds",
    "PlanFailed",
    "PlanHandle",
    "PlanInput",
    "PlanRejected",
    "PlanResult",
    "PlanToolState",
    "PlanWorkflow",
    "Problem",
    "ResultStore",
    "S3ResultStore",
    "SQLiteEffects",
    "Step",
    "StepContext",
    "StepOutcome",
    "ToolCatalog",
    "ToolRegistry",
    "ToolSpec",
    "WorkflowPlanPlugin",
    "__version__",
    "check_plan",
    "connect",
    "current_step",
    "exactly_once",
    "execute_plan",
    "fail_on_agent_error",
    "model_worker",
    "plan_input",
    "plan_worker",
    "result_for_model",
    "run_plan",
    "run_script",
    "start_plan",
    "summarize",
    "tool_activity",
    "tool_worker",
    "tracing_plugin",
]


def __getattr__(name: str) -> Any:
    """Import a public name on first use; unknown names (and submodules) raise AttributeError,
    which is what ``from durable_plan import expressions`` needs to find the submodule."""
    module_name = _EXPORTS.get(name)
    if module_name is None:
        raise AttributeError(f"module 'durable_plan' has no attribute {name!r}")
    from temporalio import workflow

    with workflow.unsafe.imports_passed_through():
        value = getattr(importlib.import_module(module_name), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
