"""A long conversation continues as new and forgets nothing the plan tool needs.

``workflows/conversation.py``'s ``GameMasterConversation`` takes one ``ask`` update per turn.
With a threshold of one event it continues as new after every turn, so each turn here runs
in a new run of the workflow. The second turn's plan reuses the first turn's lookup (the
memory of steps was carried), reads its attack roll as ``prior.attack`` (refused if the memory
were lost), and the model continues its conversation where it was (the messages were
carried: the scripted model plays the turn the conversation has reached, so without them it
would submit the first plan again). The plan count goes on from 1 to 2.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowUpdateFailedError
from temporalio.strands_agents import StrandsPlugin

from durable_plan.strands.carried import recent_turns
from durable_plan.temporal.replay import replay
from durable_plan.temporal.result_form import expand_result
from durable_plan.testing import ScriptedModel, TurnLike, call, say
from worker import build_worker
from workflows.conversation import ConversationInput, GameMasterConversation

FIRST = "The fighter faces the goblin: look it up and roll an attack."
SECOND = "Now apply the damage of that attack to the goblin."

LOOKUP: dict[str, Any] = {"id": "lookup", "tool": "look_up_monster", "args": {"name": "goblin"}}
FIRST_PLAN = {
    "steps": [
        LOOKUP,
        {"id": "attack", "tool": "roll_attack", "bind": {"armour": "steps.lookup.armour"}},
    ]
}
SECOND_PLAN = {
    "steps": [
        LOOKUP,  # the same id, tool and arguments: reused, not run again
        {
            "id": "damage",
            "tool": "apply_damage",
            "bind": {"monster": "steps.lookup.name", "damage": "prior.attack.damage"},
        },
    ],
    "returns": ["damage"],
}
SCRIPT: list[TurnLike] = [
    call("submit_workflow_plan", **FIRST_PLAN),
    say("The attack hits for 6."),
    call("submit_workflow_plan", **SECOND_PLAN),
    say("The goblin is down to 1 hp."),
]


async def test_a_conversation_continues_as_new_and_keeps_the_plan_tools_memory(
    temporal_target: str, task_queue: str, workflow_id: str
) -> None:
    models = {"scripted": lambda: ScriptedModel(scripts={FIRST: SCRIPT})}
    client = await Client.connect(temporal_target, plugins=[StrandsPlugin(models=models)])
    async with build_worker(client, task_queue):
        started = await client.start_workflow(
            GameMasterConversation.run,
            ConversationInput(continue_after_events=1),
            id=workflow_id,
            task_queue=task_queue,
        )
        # No run id: updates, queries and the result go to the conversation's current run.
        latest = client.get_workflow_handle_for(GameMasterConversation.run, workflow_id)
        first = await asyncio.wait_for(latest.execute_update(GameMasterConversation.ask, FIRST), 60)
        second = await asyncio.wait_for(
            latest.execute_update(GameMasterConversation.ask, SECOND), 60
        )
        status = await latest.query(GameMasterConversation.status)
        await latest.signal(GameMasterConversation.end)
        ended = await asyncio.wait_for(latest.result(), 60)
        first_run = await client.get_workflow_handle(
            workflow_id, run_id=started.first_execution_run_id
        ).fetch_history()
        plans = [
            expand_result(  # the full form
                await client.get_workflow_handle(f"{workflow_id}/plan/tooluse_{n}_0").result()
            )
            for n in (0, 2)
        ]

    assert (first, second) == ("The attack hits for 6.", "The goblin is down to 1 hp.")
    # Two turns, each followed by a continue-as-new: the third run waits for the next turn.
    continued = EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW
    assert first_run.events[-1].event_type == continued
    assert (status.turns, status.run, status.plans) == (2, 3, 2)
    assert (ended.turns, ended.run, ended.plans) == (2, 3, 2)
    assert set(status.remembered_steps) == {"lookup", "attack", "damage"}
    # The run that continued as new replays on this code (a worker taking it over would).
    [replayed] = await replay(
        [("first run", first_run)],
        workflows=[GameMasterConversation],
        plugins=[StrandsPlugin(models={})],
    )
    assert replayed.ok, replayed.line()
    ledger = {line["id"]: line for line in plans[1]["ledger"]}
    assert ledger["lookup"]["reused_from"] == 1 and ledger["lookup"]["attempts"] == 0
    assert ledger["damage"]["status"] == "ok"
    assert plans[1]["returned"]["damage"] == {"hp_after": 1, "defeated": False}


async def test_a_turn_that_fails_fails_its_ask_only(
    temporal_target: str, task_queue: str, workflow_id: str
) -> None:
    """The model runs out of script on the third turn: that ``ask`` fails with the root cause,
    no workflow task fails (it would retry forever), and the conversation still ends cleanly."""
    models = {"scripted": lambda: ScriptedModel(scripts={FIRST: SCRIPT})}
    client = await Client.connect(temporal_target, plugins=[StrandsPlugin(models=models)])
    async with build_worker(client, task_queue):
        await client.start_workflow(
            GameMasterConversation.run, ConversationInput(), id=workflow_id, task_queue=task_queue
        )
        latest = client.get_workflow_handle_for(GameMasterConversation.run, workflow_id)
        for prompt in (FIRST, SECOND):
            await asyncio.wait_for(latest.execute_update(GameMasterConversation.ask, prompt), 60)
        with pytest.raises(WorkflowUpdateFailedError) as failed:
            await asyncio.wait_for(latest.execute_update(GameMasterConversation.ask, "More?"), 60)
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await latest.execute_update(GameMasterConversation.ask, "x" * 100_001)
        await latest.signal(GameMasterConversation.end)
        ended = await asyncio.wait_for(latest.result(), 60)
        history = await latest.fetch_history()
    assert "the turn failed" in str(failed.value.cause)
    assert "at most 100,000 characters" in str(refused.value.cause)
    assert (ended.turns, ended.run) == (3, 1)
    failed_tasks = EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED
    assert not [e for e in history.events if e.event_type == failed_tasks]


def _turn(n: int, *, tool_bytes: int = 10) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": [{"text": f"turn {n}"}]},
        {"role": "assistant", "content": [{"toolUse": {"toolUseId": f"t{n}", "name": "x"}}]},
        {"role": "user", "content": [{"toolResult": {"toolUseId": f"t{n}", "content": [
            {"text": "r" * tool_bytes}]}}]},
        {"role": "assistant", "content": [{"text": f"answer {n}"}]},
    ]  # fmt: skip


def test_recent_turns_keeps_the_newest_whole_turns_within_the_bound() -> None:
    messages = _turn(1) + _turn(2, tool_bytes=5_000) + _turn(3)
    assert recent_turns(messages) == messages  # all fit
    size = len(json.dumps(_turn(3), separators=(",", ":")))
    # A bound that holds the last turn only: never a tool call without its result.
    assert recent_turns(messages, max_bytes=size + 100) == _turn(3)
    assert recent_turns(messages, max_bytes=size - 1) == []  # not even the newest fits
    assert recent_turns([]) == []
