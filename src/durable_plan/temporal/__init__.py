"""Durable plans on Temporal: the workflow, the tool activities, client and worker helpers.

The workflow sandbox imports this package when it loads ``PlanWorkflow``; the
client and activity helpers pull in Strands and boto, which the sandbox must not
re-import, so everything here is imported passed through.
"""

from temporalio import workflow as _workflow

with _workflow.unsafe.imports_passed_through():
    from durable_plan.temporal.activities import StepContext, current_step, tool_activity
    from durable_plan.temporal.client import (
        PlanFailed,
        PlanHandle,
        plan_input,
        run_plan,
        start_plan,
    )
    from durable_plan.temporal.messages import ApprovalDecision, PlanInput
    from durable_plan.temporal.worker import plan_worker
    from durable_plan.temporal.workflow import PLAN_WORKFLOW_NAME, PlanWorkflow

__all__ = [
    "PLAN_WORKFLOW_NAME",
    "ApprovalDecision",
    "PlanFailed",
    "PlanHandle",
    "PlanInput",
    "PlanWorkflow",
    "StepContext",
    "current_step",
    "plan_input",
    "plan_worker",
    "run_plan",
    "start_plan",
    "tool_activity",
]
