"""Everything knowable about a plan before a side effect, with every problem at once."""

from durable_plan.check.checker import CheckedPlan, CheckedStep, ToolCatalog, ToolSpec, check_plan

__all__ = ["CheckedPlan", "CheckedStep", "ToolCatalog", "ToolSpec", "check_plan"]
