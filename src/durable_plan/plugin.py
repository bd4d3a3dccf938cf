"""Moved to ``durable_plan.strands``; this import path keeps working (the README and
``examples/`` use it)."""

from durable_plan.strands.carried import PlanToolState as PlanToolState
from durable_plan.strands.options import durable_plan_options as durable_plan_options
from durable_plan.strands.plan_tool import PlanTool as PlanTool
from durable_plan.strands.plan_tool import unwrap_peer_input as unwrap_peer_input
from durable_plan.strands.plugin import PLUGIN_NAME as PLUGIN_NAME
from durable_plan.strands.plugin import WorkflowPlanPlugin as WorkflowPlanPlugin
