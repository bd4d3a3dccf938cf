"""A worker that runs plans: ``PlanWorkflow`` plus one activity per tool."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from temporalio.client import Client
from temporalio.worker import Worker

from durable_plan.temporal.activities import registry_activities
from durable_plan.temporal.agent_workflow import AgentStepWorkflow
from durable_plan.temporal.workflow import PlanWorkflow
from durable_plan.tools import ToolRegistry


def plan_worker(
    client: Client,
    *,
    task_queue: str,
    registry: ToolRegistry,
    workflows: Sequence[type] = (),
    activities: Sequence[Callable[..., Any]] = (),
    **worker_kwargs: Any,
) -> Worker:
    """Register ``PlanWorkflow``, every tool of ``registry`` and any extra workflows/activities."""
    return Worker(
        client,
        task_queue=task_queue,
        workflows=[PlanWorkflow, AgentStepWorkflow, *workflows],
        activities=[*registry_activities(registry), *activities],
        **worker_kwargs,
    )
