"""durable-plan: a Temporal-durable plan executor for LLM agents.

The public names are imported on first use (PEP 562), not at ``import durable_plan``:
most of them pull in Strands, pydantic and jsonata, which cost the command line about
a second before ``durable-plan --version`` could answer. The workflow sandbox imports
this package whenever it loads a workflow from it, so each name is imported passed
through (they are deterministic, and some pull in libraries the sandbox must not
re-import).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    "CheckedPlan": "durable_plan.check",
    "ToolCatalog": "durable_plan.check",
    "ToolSpec": "durable_plan.check",
    "check_plan": "durable_plan.check",
    "PlanRejected": "durable_plan.language.errors",
    "Problem": "durable_plan.language.errors",
    "execute_plan": "durable_plan.local.runner",
    "Plan": "durable_plan.language.plan",
    "PlanResult": "durable_plan.language.plan",
    "Step": "durable_plan.language.plan",
    "StepOutcome": "durable_plan.language.plan",
    "result_for_model": "durable_plan.run.summary",
    "summarize": "durable_plan.run.summary",
    "ToolRegistry": "durable_plan.tools.registry",
}

if TYPE_CHECKING:
    from durable_plan.check import CheckedPlan, ToolCatalog, ToolSpec, check_plan
    from durable_plan.language.errors import PlanRejected, Problem
    from durable_plan.language.plan import Plan, PlanResult, Step, StepOutcome
    from durable_plan.local.runner import execute_plan
    from durable_plan.run.summary import result_for_model, summarize
    from durable_plan.tools.registry import ToolRegistry

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
