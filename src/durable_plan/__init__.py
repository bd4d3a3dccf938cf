"""durable-plan: a Temporal-durable plan executor for LLM agents.

The workflow sandbox imports this package whenever it loads a workflow from it,
so the public names are imported passed through (they are deterministic, and
some pull in libraries the sandbox must not re-import).
"""

from temporalio import workflow as _workflow

with _workflow.unsafe.imports_passed_through():
    from durable_plan.check import CheckedPlan, ToolCatalog, ToolSpec, check_plan
    from durable_plan.errors import PlanRejected, Problem
    from durable_plan.local import execute_plan
    from durable_plan.plan import Plan, PlanResult, Step, StepOutcome
    from durable_plan.summary import result_for_model, summarize
    from durable_plan.tools import ToolRegistry

__version__ = "0.1.0"

__all__ = [
    "CheckedPlan",
    "Plan",
    "PlanRejected",
    "PlanResult",
    "Problem",
    "Step",
    "StepOutcome",
    "ToolCatalog",
    "ToolRegistry",
    "ToolSpec",
    "__version__",
    "check_plan",
    "execute_plan",
    "result_for_model",
    "summarize",
]
