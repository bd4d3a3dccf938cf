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
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import pytest
from strands import Agent, tool
from strands.vended_interventions.hitl import HumanInTheLoop
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowUpdateFailedError
from temporalio.strands_agents import StrandsPlugin

from durable_plan import plan_worker
from durable_plan.run.events import PlanEvent
from durable_plan.strands.carried import (
    MAX_CARRIED_INTERRUPT_BYTES,
    carried_interrupt,
    recent_turns,
)
from durable_plan.strands.plugin import WorkflowPlanPlugin
from durable_plan.temporal.client.replay import replay
from durable_plan.temporal.client.subscribe import conversation_events, plan_events
from durable_plan.temporal.wire.result_form import expand_result
from durable_plan.testing import ScriptedModel, TurnLike, call, say, turn
from tests.support.carried_workflows import (
    CALLS,
    CARRIED_TOOLS,
    UNGATED,
    CarriedConversation,
    CarriedInput,
    Turn,
    charge,
    confirm,
    print_label,
    ship,
)
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


# -- a follower of a conversation that continues as new (issue 45, item 7) ------------------

MONSTERS = ("goblin", "ogre", "skeleton")
ASKS = [f"Look up the {name} and roll against it." for name in MONSTERS]


def _look_and_roll(name: str) -> dict[str, Any]:
    return {
        "steps": [
            {"id": f"look_{name}", "tool": "look_up_monster", "args": {"name": name}},
            {
                "id": f"roll_{name}",
                "tool": "roll_attack",
                "bind": {"armour": f"steps.look_{name}.armour"},
            },
        ]
    }


THREE_PLANS: list[TurnLike] = [
    item
    for name in MONSTERS
    for item in (call("submit_workflow_plan", **_look_and_roll(name)), say(f"The {name}."))
]


async def _read_all(events: AsyncIterator[PlanEvent]) -> list[PlanEvent]:
    return [event async for event in events]


def _by_plan(seen: list[PlanEvent]) -> dict[str, list[tuple[int | None, str, str | None]]]:
    plans: dict[str, list[tuple[int | None, str, str | None]]] = {}
    for event in seen:
        plans.setdefault(event.plan, []).append((event.offset, event.kind, event.step))
    return plans


async def test_a_follower_sees_every_plan_of_a_conversation_that_continues_as_new(
    temporal_target: str, task_queue: str, workflow_id: str
) -> None:
    """Three turns, a continue-as-new after each (four runs). A reader from the start,
    following live, and one that starts after the first continue-as-new both see the three
    plans' events, each once, each plan's in order as its own stream has them. Before the fix
    the reader kept the old run's offset on the new run's stream (offsets started at 0
    again): it saw 1 of the 3 plans."""
    models = {"scripted": lambda: ScriptedModel(scripts={ASKS[0]: THREE_PLANS})}
    client = await Client.connect(temporal_target, plugins=[StrandsPlugin(models=models)])
    async with build_worker(client, task_queue):
        started = await client.start_workflow(
            GameMasterConversation.run,
            ConversationInput(continue_after_events=1),
            id=workflow_id,
            task_queue=task_queue,
        )
        early = asyncio.create_task(_read_all(conversation_events(client, workflow_id)))
        latest = client.get_workflow_handle_for(GameMasterConversation.run, workflow_id)
        await asyncio.wait_for(latest.execute_update(GameMasterConversation.ask, ASKS[0]), 60)
        for _ in range(200):  # the first run has continued as new
            if (await latest.describe()).run_id != started.first_execution_run_id:
                break
            await asyncio.sleep(0.05)
        late = asyncio.create_task(_read_all(conversation_events(client, workflow_id)))
        for prompt in ASKS[1:]:
            await asyncio.wait_for(latest.execute_update(GameMasterConversation.ask, prompt), 60)
        await latest.signal(GameMasterConversation.end)
        ended = await asyncio.wait_for(latest.result(), 60)
        seen_early = await asyncio.wait_for(early, 60)
        seen_late = await asyncio.wait_for(late, 60)
        plan_ids = [f"{workflow_id}/plan/tooluse_{n}_0" for n in (0, 2, 4)]
        truth = {
            plan_id: await _read_all(plan_events(client.get_workflow_handle(plan_id)))
            for plan_id in plan_ids
        }
    assert ended.run == 4 and ended.plans == 3
    expected = _by_plan([event for plan_id in plan_ids for event in truth[plan_id]])
    assert all(events[-1][1] == "plan_finished" for events in expected.values())
    for name, seen in (("from the start", seen_early), ("after a run", seen_late)):
        assert _by_plan(seen) == expected, name  # every event once, in each plan's order
        # Plans are read side by side and their events merged as they arrive: a catching-up
        # reader may see a later, open plan before an earlier, closed one (read by replay).
        assert sorted(dict.fromkeys(event.plan for event in seen)) == plan_ids, name
        assert len(seen) == sum(len(events) for events in expected.values()), name


# -- a person's pending answer and the memory of charged steps, across runs -----------------

PAY_AND_PRINT = "Charge order A1 and print its label."
PAY: dict[str, Any] = {"id": "pay", "tool": "charge", "args": {"order": "A1", "amount": 13}}
PRINT_PLAN = {
    "steps": [PAY, {"id": "label", "tool": "print_label", "bind": {"receipt": "steps.pay.receipt"}}]
}
SHIP_PLAN = {  # the repair: the same pay step (reused, not charged again), then ship
    "steps": [PAY, {"id": "send", "tool": "ship", "bind": {"receipt": "steps.pay.receipt"}}]
}
ASK_FIRST = "The printer is out of paper: may I ship without a label?"
PAY_SCRIPT: list[TurnLike] = [
    call("submit_workflow_plan", **PRINT_PLAN),  # pay runs, label fails
    call("confirm", question=ASK_FIRST),  # gated: the turn ends waiting for a person
    call("submit_workflow_plan", **SHIP_PLAN),  # after the person's yes
    say("Charged once and shipped without a label."),
]


def test_a_repair_after_a_persons_answer_reuses_the_charged_step() -> None:
    """In-process, no continue-as-new: the invocation that answers an interrupt is the same
    request going on, so the memory of its plans stays (before the fix it was cleared as for
    a new request, and the repair charged the order again)."""
    CALLS.clear()
    agent = Agent(
        model=ScriptedModel(scripts={PAY_AND_PRINT: PAY_SCRIPT}),
        tools=[charge, print_label, ship, confirm],
        plugins=[WorkflowPlanPlugin(plannable=["*"])],
        interventions=[HumanInTheLoop(allowed_tools=UNGATED)],
        callback_handler=None,
    )
    first = agent(PAY_AND_PRINT)
    assert first.stop_reason == "interrupt" and CALLS["charge"] == 1
    answers = [
        {"interruptResponse": {"interruptId": i.id, "response": "y"}}
        for i in first.interrupts or []
    ]
    second = agent(answers)  # type: ignore[arg-type]
    assert str(second).strip() == "Charged once and shipped without a label."
    assert (CALLS["charge"], CALLS["confirm"], CALLS["ship"]) == (1, 1, 1)


async def test_a_pending_interrupt_and_the_memory_survive_continue_as_new(
    temporal_target: str, task_queue: str, workflow_id: str
) -> None:
    """A turn ends waiting for a person (a gated direct call) after its plan charged and then
    failed; the conversation continues as new. The person's yes, in the next run, resumes the
    pending call (the interrupt was carried), and the repair plan reuses the charge (the
    memory was carried, and kept by the resumed request). The conversation's stream, made
    without ``prior_state``, is moved on by ``resume``: a follower sees both plans. Before the
    fix the next run knew no interrupt: the call never ran and the order was charged twice."""
    CALLS.clear()
    models = {"scripted": lambda: ScriptedModel(scripts={PAY_AND_PRINT: PAY_SCRIPT})}
    client = await Client.connect(temporal_target, plugins=[StrandsPlugin(models=models)])
    async with plan_worker(
        client, task_queue=task_queue, registry=CARRIED_TOOLS, workflows=[CarriedConversation]
    ):
        await client.start_workflow(
            CarriedConversation.run, CarriedInput(), id=workflow_id, task_queue=task_queue
        )
        follower = asyncio.create_task(_read_all(conversation_events(client, workflow_id)))
        latest = client.get_workflow_handle_for(CarriedConversation.run, workflow_id)
        first = await asyncio.wait_for(
            latest.execute_update(CarriedConversation.ask, Turn(prompt=PAY_AND_PRINT)), 60
        )
        second = await asyncio.wait_for(
            latest.execute_update(CarriedConversation.ask, Turn(approve=first.interrupts)), 60
        )
        await latest.signal(CarriedConversation.end)
        runs = await asyncio.wait_for(latest.result(), 60)
        seen = await asyncio.wait_for(follower, 60)
    assert (first.stop_reason, first.run, len(first.interrupts)) == ("interrupt", 1, 1)
    assert first.remembered == ["pay"]
    assert (second.text, second.run, runs) == ("Charged once and shipped without a label.", 2, 3)
    assert (CALLS["charge"], CALLS["confirm"], CALLS["ship"]) == (1, 1, 1)
    [repair] = second.ledgers  # this run's plans
    assert repair[0] == {"id": "pay", "status": "ok", "reused_from": 1}
    plans = list(dict.fromkeys(event.plan for event in seen))
    assert plans == [f"{workflow_id}/plan/tooluse_0_0", f"{workflow_id}/plan/tooluse_2_0"]
    assert [e.kind for e in seen].count("plan_finished") == 2


# -- a pending interrupt's size across continue-as-new --------------------------------------

BIG_KIB = 300
BIG_CALLS = 3
BIG_AND_ASK = "Fetch the three reports and tell the customer."


@tool
async def fetch_report(n: int) -> dict[str, Any]:
    """Fetch a large report; returns {"n": int, "data": str}.

    Args:
        n: Which report.
    """
    CALLS["fetch_report"] += 1
    return {"n": n, "data": "r" * (BIG_KIB * 1024)}


BIG_SCRIPT: list[TurnLike] = [
    turn(
        *(call("fetch_report", n=n) for n in range(BIG_CALLS)),
        call("confirm", question="Your reports are ready."),
    ),
    say("Sent."),
]


def _agent(plugin: WorkflowPlanPlugin, messages: list[dict[str, Any]] | None = None) -> Agent:
    return Agent(
        model=ScriptedModel(scripts={BIG_AND_ASK: BIG_SCRIPT}),
        messages=messages,  # type: ignore[arg-type]
        tools=[fetch_report, confirm],
        plugins=[plugin],
        interventions=[HumanInTheLoop(allowed_tools=[*UNGATED, "fetch_report"])],
        callback_handler=None,
    )


def test_a_pending_interrupt_with_large_results_is_carried_within_its_bound() -> None:
    """A turn whose three 300 KiB calls ran before a fourth waits for a person: Strands keeps
    their results whole in its interrupt state, which ``carry_over`` carried unbounded (with
    1 MiB of messages, a continue-as-new argument past 2 MB: refused, the task failing
    forever). Now their results are previews within ``MAX_CARRIED_INTERRUPT_BYTES``, and the
    next run resumes from it: the person's yes runs the waiting call, and the calls that ran
    are not run again."""
    CALLS.clear()
    plugin = WorkflowPlanPlugin(plannable=["*"])
    first = _agent(plugin)
    stopped = first(BIG_AND_ASK)
    assert stopped.stop_reason == "interrupt" and CALLS["fetch_report"] == BIG_CALLS
    state = plugin.carry_over()
    assert state.interrupt is not None
    carried = json.dumps(state.interrupt)
    assert len(carried.encode()) <= MAX_CARRIED_INTERRUPT_BYTES
    assert carried.count("is not run again") == BIG_CALLS  # cut; its id and status kept
    # The next run: what a continue-as-new argument carries, through JSON.
    plugin = WorkflowPlanPlugin(plannable=["*"])
    plugin.resume(replace(state, interrupt=json.loads(carried)))
    second = _agent(plugin, recent_turns(first.messages))  # type: ignore[arg-type]
    answers = [
        {"interruptResponse": {"interruptId": i.id, "response": "y"}}
        for i in stopped.interrupts or []
    ]
    done = second(answers)  # type: ignore[arg-type]
    assert str(done).strip() == "Sent."
    assert (CALLS["fetch_report"], CALLS["confirm"]) == (BIG_CALLS, 1)


def test_an_interrupt_that_cannot_be_cut_enough_is_refused_saying_why() -> None:
    """What the next run needs to go on (here an interrupt's reason) is never cut: past the
    bound, ``carried_interrupt`` says which part is too large (``carry_over`` ends the
    workflow with it, non-retryable, rather than a continue-as-new the server refuses)."""
    state = {
        "interrupts": {"i": {"id": "i", "name": "n", "reason": "z" * 1000, "response": None}},
        "context": {},
        "activated": True,
    }
    assert carried_interrupt(state, max_bytes=2000) == state
    with pytest.raises(ValueError, match="its 'interrupts' is"):
        carried_interrupt(state, max_bytes=500)
