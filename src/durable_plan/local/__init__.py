"""The in-process runner: plans on asyncio, agent steps on a plain Strands ``Agent``."""

from durable_plan.local.runner import execute_plan, run_checked

__all__ = ["execute_plan", "run_checked"]
