"""The sandbox bench's workflow (its own module: Temporal's sandbox re-imports it)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from temporalio.strands_agents import TemporalAgent, TemporalSandbox

    from durable_plan.strands.plugin import WorkflowPlanPlugin
    from durable_plan.tools.registry import ToolRegistry
    from durable_plan.tools.sandbox_tools import add_sandbox_tools

SANDBOX = "bench"
TOOLS = ToolRegistry()
add_sandbox_tools(TOOLS, SANDBOX, timeout_s=30, retries=1)
COMMAND = "true"


def chain_plan(n: int) -> dict[str, Any]:
    """``n`` sandbox_shell steps, each after the one before (no two at once)."""
    steps: list[dict[str, Any]] = []
    for i in range(n):
        step: dict[str, Any] = {
            "id": f"s{i}",
            "tool": "sandbox_shell",
            "args": {"command": COMMAND},
        }
        if i:
            step["after"] = [f"s{i - 1}"]
        steps.append(step)
    return {"steps": steps}


@workflow.defn
class SandboxBenchWorkflow:
    """``mode`` "direct": ``n`` calls through ``TemporalSandbox`` (the SDK's activities), one
    after another; "plan": one plan of ``n`` chained ``sandbox_shell`` steps. Returns the
    seconds it took, by workflow time."""

    @workflow.run
    async def run(self, mode: str, n: int) -> float:
        sandbox = TemporalSandbox(
            SANDBOX,
            start_to_close_timeout=timedelta(seconds=30),
            retry_policy=RetryPolicy(maximum_attempts=2),
        )
        started = workflow.now()
        if mode == "direct":
            for _ in range(n):
                await sandbox.execute(COMMAND)
        else:
            agent = TemporalAgent(
                model="bench",
                sandbox=sandbox,
                plugins=[WorkflowPlanPlugin(["*"], registry=TOOLS)],
                callback_handler=None,
                start_to_close_timeout=timedelta(seconds=30),
                retry_policy=RetryPolicy(maximum_attempts=2),
            )
            await agent.invoke_async(f"plan {n}")
        return (workflow.now() - started).total_seconds()
