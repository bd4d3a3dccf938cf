"""A reader that resumes at an offset the conversation's open run already holds reads that
run alone: each closed run it read was a query replaying that run on a worker (review of
issue 45, item 7: a late follower of a long conversation cost a replay per run)."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest
from temporalio.client import Client
from temporalio.strands_agents import StrandsPlugin

from durable_plan.temporal.client import subscribe
from durable_plan.testing import ScriptedModel
from tests.durable.agents.test_conversation_continues import ASKS, THREE_PLANS
from worker import build_worker
from workflows.conversation import ConversationInput, GameMasterConversation


async def test_a_reader_resuming_in_the_open_run_reads_no_closed_run(
    temporal_target: str, task_queue: str, workflow_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    models = {"scripted": lambda: ScriptedModel(scripts={ASKS[0]: THREE_PLANS})}
    client = await Client.connect(temporal_target, plugins=[StrandsPlugin(models=models)])
    async with build_worker(client, task_queue):
        await client.start_workflow(
            GameMasterConversation.run,
            ConversationInput(continue_after_events=1),
            id=workflow_id,
            task_queue=task_queue,
        )
        latest = client.get_workflow_handle_for(GameMasterConversation.run, workflow_id)
        for prompt in ASKS:
            await asyncio.wait_for(latest.execute_update(GameMasterConversation.ask, prompt), 60)
        # Three turns, three continues-as-new: the open run is the fourth.

        async def items(start: int) -> list[tuple[int, Any]]:
            reading = subscribe.stream_items(
                client,
                workflow_id,
                subscribe.PLANS_TOPIC,
                start,
                timedelta(seconds=0.1),
                ended=lambda: True,
            )
            return [item async for item in reading]

        everything = await asyncio.wait_for(items(0), 60)
        assert len(everything) == 3, everything  # one announcement per plan, across the runs
        polled: list[str | None] = []
        real_poll = subscribe._poll

        async def recording(handle: Any, topic: str, offset: int, *, open_only: bool) -> Any:
            polled.append(handle.run_id)
            return await real_poll(handle, topic, offset, open_only=open_only)

        monkeypatch.setattr(subscribe, "_poll", recording)
        resumed = await asyncio.wait_for(items(everything[-1][0] + 1), 60)
        open_run = (await latest.describe()).run_id
        await latest.signal(GameMasterConversation.end)
        await asyncio.wait_for(latest.result(), 60)
    assert resumed == []
    assert polled and set(polled) == {open_run}, polled
