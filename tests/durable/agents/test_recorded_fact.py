"""A fact of the worker's process that decides a command (does it store payloads?) is read
from history on replay, never from the replaying process (review of issue 45, item 6: the
conversation's model-call guard asked the process, so `durable-plan replay`, whose process
stores nothing, failed a history recorded with External Storage)."""

from __future__ import annotations

import uuid

import pytest
from temporalio.client import Client
from temporalio.worker import Replayer, Worker

from durable_plan.temporal.wire import payload_limits
from tests.support.recorded_fact_workflows import RecordedFactWorkflow


@pytest.mark.parametrize("recorded", [True, False])
async def test_a_replay_reads_the_fact_the_run_recorded(
    client: Client, task_queue: str, monkeypatch: pytest.MonkeyPatch, recorded: bool
) -> None:
    monkeypatch.setattr(payload_limits, "_stored", recorded)
    async with Worker(client, task_queue=task_queue, workflows=[RecordedFactWorkflow]):
        handle = await client.start_workflow(
            RecordedFactWorkflow.run, id=f"fact-{uuid.uuid4().hex[:8]}", task_queue=task_queue
        )
        assert await handle.result() is recorded
    history = await handle.fetch_history()
    monkeypatch.setattr(payload_limits, "_stored", not recorded)  # another process's answer
    await Replayer(workflows=[RecordedFactWorkflow]).replay_workflow(history)


async def test_a_run_keeps_its_first_answer(
    client: Client, task_queue: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A first False records nothing; a later True recorded a marker that a replay, whose
    first ask had answered False (the SDK keeps a patch's first answer per run), never
    took: the replay scheduled one timer fewer."""
    from tests.support.recorded_fact_workflows import ChangingFactWorkflow

    monkeypatch.setattr(payload_limits, "_stored", False)
    async with Worker(client, task_queue=task_queue, workflows=[ChangingFactWorkflow]):
        handle = await client.start_workflow(
            ChangingFactWorkflow.run, id=f"fact-{uuid.uuid4().hex[:8]}", task_queue=task_queue
        )
        assert await handle.result() == [False, False]
    history = await handle.fetch_history()
    monkeypatch.setattr(payload_limits, "_stored", False)
    await Replayer(workflows=[ChangingFactWorkflow]).replay_workflow(history)
