"""A workflow that decides a command from a recorded fact of its worker's process
(``versions.recorded_fact``), for tests/durable/agents/test_recorded_fact.py. Its own module so the
workflow sandbox can re-import it."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from durable_plan.temporal.wire import payload_limits
    from durable_plan.temporal.workflows.versions import STORAGE_RECORDED, recorded_fact


@workflow.defn
class RecordedFactWorkflow:
    @workflow.run
    async def run(self) -> bool:
        stored = recorded_fact(STORAGE_RECORDED, payload_limits.workers_store_payloads())
        if stored:  # a command only one answer makes: a replay that answered otherwise fails
            await workflow.sleep(timedelta(milliseconds=1))
        return stored


@workflow.defn
class ChangingFactWorkflow:
    """The process's answer changes between two asks of one run (a worker of the same
    process set up otherwise, or storage configured later): the run keeps its first."""

    @workflow.run
    async def run(self) -> list[bool]:
        first = recorded_fact(STORAGE_RECORDED, payload_limits.workers_store_payloads())
        payload_limits._stored = True  # the process now says otherwise (a test's stand-in)
        await workflow.sleep(timedelta(milliseconds=1))
        second = recorded_fact(STORAGE_RECORDED, payload_limits.workers_store_payloads())
        if second:
            await workflow.sleep(timedelta(milliseconds=1))
        return [first, second]
