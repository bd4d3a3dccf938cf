"""Workflows for the foundation tests, in their own module so the sandbox can re-import them."""

from __future__ import annotations

from datetime import timedelta

from temporalio import activity, workflow


@activity.defn
async def double(value: int) -> int:
    return value * 2


@workflow.defn
class DoubleWorkflow:
    @workflow.run
    async def run(self, value: int) -> int:
        return await workflow.execute_activity(
            double, value, start_to_close_timeout=timedelta(seconds=10)
        )
