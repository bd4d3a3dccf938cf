"""What a plan hands back to a durable conversation leaves room for its next model call
(issue 45, item 6), on the real dev server.

A ``TemporalAgent`` conversation on a plain ``Client.connect`` (no External Storage): each
model call's input carries the whole conversation, and a payload over 2 MiB fails the
workflow task that sends it, forever (``PAYLOADS_TOO_LARGE``). A plan whose returned steps
held 7 x 250 KiB completed, and its results (1.5 MiB after the plan's own bound) made the
conversation's next model call too large to send: the conversation was stuck. Now what the
plan tool returns is bounded by the room the conversation has left
(``temporal.conversation_room``); past it the model gets previews it can act on.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from strands.hooks import BeforeModelCallEvent, HookRegistry
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle
from temporalio.strands_agents import StrandsPlugin

from durable_plan import plan_worker
from durable_plan.temporal.wire import payload_limits
from durable_plan.temporal.workflows.conversation_room import (
    CONVERSATION_BYTES,
    carried_bytes,
    fit_tool_result,
    json_bytes,
    model_call_refusal,
    result_room,
    result_share,
)
from durable_plan.testing import ScriptedModel, TurnLike, call, say
from tests.support.relay_workflows import (
    RELAY_TOOLS,
    RelayConversationWorkflow,
    RelayInput,
    RelayOutput,
)

KIB = 250
BLOBS = 7


def blobs_plan(count: int, *, final: bool = False) -> dict[str, Any]:
    steps = [{"id": f"b{n}", "tool": "blob", "args": {"n": n, "kib": KIB}} for n in range(count)]
    return {"steps": steps, "returns": [s["id"] for s in steps], "final": final}


SCRIPTS: dict[str, list[TurnLike]] = {
    "seven large results": [call("submit_workflow_plan", **blobs_plan(BLOBS)), say("Done.")],
    "two plans of large results": [
        call("submit_workflow_plan", **blobs_plan(3)),
        call("submit_workflow_plan", **blobs_plan(3)),
        say("Both done."),
    ],
    "a prompt too large to send": [say("never said")],
    "where is the tea": [
        call("submit_workflow_plan", steps=[{"id": "s", "tool": "shelf", "args": {"item": "tea"}}]),
        say("Aisle 4."),
    ],
}


@pytest.fixture(autouse=True)
def no_worker_stores_payloads(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process's workers store no payloads (``payload_limits`` keeps that per process:
    another test's worker with External Storage must not turn the guard off here)."""
    monkeypatch.setattr(payload_limits, "_stored", False)


@pytest.fixture(scope="module")
async def agent_client(temporal_target: str) -> AsyncIterator[Client]:
    """A plain client: the Strands plugin's converter, no External Storage."""
    model = {"scripted": lambda: ScriptedModel(scripts=SCRIPTS)}
    client = await Client.connect(temporal_target, plugins=[StrandsPlugin(models=model)])
    assert client.data_converter.external_storage is None
    yield client


async def result_or_stuck(handle: WorkflowHandle[Any, RelayOutput], seconds: float) -> RelayOutput:
    """The conversation's result, or a failure naming the workflow task that keeps failing
    (which Temporal would retry forever): never waits longer than ``seconds``."""
    waiting = asyncio.ensure_future(handle.result())
    try:
        for _ in range(int(seconds / 0.5)):
            done, _pending = await asyncio.wait({waiting}, timeout=0.5)
            if done:
                return waiting.result()
            history = await handle.fetch_history()
            failed = [
                e.workflow_task_failed_event_attributes
                for e in history.events
                if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED
            ]
            if failed:
                pytest.fail(
                    f"{handle.id}: a workflow task failed ({failed[-1].cause}): "
                    f"{failed[-1].failure.message[:300]}"
                )
        pytest.fail(f"{handle.id}: no result within {seconds} s")
    finally:
        if not waiting.done():
            waiting.cancel()
            await handle.terminate("test over")


async def model_inputs(handle: WorkflowHandle[Any, Any]) -> list[bytes]:
    """Each model call's input, as recorded."""
    history = await handle.fetch_history()
    return [
        e.activity_task_scheduled_event_attributes.input.payloads[0].data
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and e.activity_task_scheduled_event_attributes.activity_type.name == "invoke_model"
    ]


def plan_reports(model_input: bytes) -> list[dict[str, Any]]:
    """The plan tool's reports among the messages a model call carried."""
    messages = json.loads(model_input)["messages"]
    return [
        item["json"]
        for message in messages
        for block in message["content"]
        if "toolResult" in block
        for item in block["toolResult"]["content"]
        if "json" in item
    ]


def worker(client: Client, task_queue: str) -> Any:
    return plan_worker(
        client, task_queue=task_queue, registry=RELAY_TOOLS, workflows=[RelayConversationWorkflow]
    )


async def converse(client: Client, task_queue: str, prompt: str) -> tuple[RelayOutput, list[bytes]]:
    async with worker(client, task_queue):
        handle = await client.start_workflow(
            RelayConversationWorkflow.run,
            RelayInput(prompt),
            id=f"room-{task_queue}",
            task_queue=task_queue,
        )
        out = await result_or_stuck(handle, 120)
        return out, await model_inputs(handle)


async def test_a_plan_of_large_results_leaves_room_for_the_next_model_call(
    agent_client: Client, task_queue: str
) -> None:
    """7 x 250 KiB returned, no External Storage: the conversation's next model call is
    sent and the conversation ends normally; the model reads what fitted whole and a
    preview of each of the rest. Before the fix the next workflow task failed with
    PAYLOADS_TOO_LARGE (3,083,241 bytes for the model call), forever."""
    out, inputs = await converse(agent_client, task_queue, "seven large results")
    assert out.answer == "Done."
    assert out.plans == 1 and all(line["status"] == "ok" for line in out.ledgers[0])
    sizes = [len(data) for data in inputs]
    assert len(sizes) == 2 and max(sizes) < 2 * 1024 * 1024, sizes
    (report,) = plan_reports(inputs[1])
    returned = report["returned"]
    assert list(returned) == [f"b{n}" for n in range(BLOBS)], "every step, in returns order"
    whole = [sid for sid, value in returned.items() if isinstance(value, str)]
    previews = {sid: value for sid, value in returned.items() if sid not in whole}
    assert whole and previews, returned.keys()
    for sid, preview in previews.items():
        assert preview["bytes"] == KIB * 1024 + 2 and preview["$preview"].startswith('"xxx')
        assert "the step ran ok" in preview["omitted"], sid
    # b6 was over the plan's own bound (max_returned_bytes); the others over the room left.
    assert "too large for this conversation; the step ran ok" in previews["b1"]["omitted"]


async def test_a_second_plan_counts_what_the_first_left_in_the_conversation(
    agent_client: Client, task_queue: str
) -> None:
    """Two plans of 3 x 250 KiB each: the first's results fit whole; the second's are
    bounded by what is left, not by their own size alone. Before the fix the third model
    call carried both (3 MB) and failed its workflow task forever."""
    out, inputs = await converse(agent_client, task_queue, "two plans of large results")
    assert out.answer == "Both done." and out.plans == 2
    sizes = [len(data) for data in inputs]
    assert len(sizes) == 3 and max(sizes) < 2 * 1024 * 1024, sizes
    first, second = plan_reports(inputs[2])
    assert sum(isinstance(v, str) for v in first["returned"].values()) >= 1
    assert sum("$preview" in v for v in second["returned"].values() if isinstance(v, dict)) >= 1


async def test_a_model_call_too_large_to_send_ends_the_turn_saying_why(
    agent_client: Client, task_queue: str
) -> None:
    """A first prompt of 1.1 MB: its model call would carry 2.2 MB. Without External
    Storage the turn ends with the reason, and no model call is made; before the fix the
    workflow task failed with PAYLOADS_TOO_LARGE forever."""
    prompt = "a prompt too large to send: " + "y" * (1100 * 1024)
    out, inputs = await converse(agent_client, task_queue, prompt)
    assert inputs == []
    assert out.answer.startswith("this conversation stopped: its next model call would carry")
    assert "over Temporal's 2 MB limit for one payload" in out.answer


# -- the bound itself, on an agent's state (no server) ---------------------------------------


class Conversation:
    """What ``conversation_room`` reads of an agent: its messages, prompt and tools."""

    def __init__(self, prompt: str, *uses: str) -> None:
        self.system_prompt = None
        self.tool_registry = None
        self.hooks = HookRegistry()
        self.messages: list[dict[str, Any]] = [
            {"role": "user", "content": [{"text": prompt}]},
            {
                "role": "assistant",
                "content": [{"toolUse": {"toolUseId": u, "name": "t", "input": {}}} for u in uses],
            },
        ]


def json_result(use_id: str, value: Any) -> Any:
    return {"toolUseId": use_id, "status": "success", "content": [{"json": value}]}


def test_results_of_one_turn_count_each_other_until_they_join_the_messages() -> None:
    """Strands runs a turn's tools side by side and appends their results together: the
    second result's room counts the first's, until the turn's results are in the messages."""
    agent = Conversation("hi", "a", "b")
    big = "z" * (400 * 1024)
    first = fit_tool_result(agent, json_result("a", big))
    assert first["content"] == [{"json": big}], "half the room is ~500 KB: it fits whole"
    room_before = CONVERSATION_BYTES - carried_bytes(Conversation("hi", "a", "b"))
    assert result_room(agent, "b") < room_before - 400 * 1024
    second = fit_tool_result(agent, json_result("b", big))
    (block,) = second["content"]
    assert block["json"]["bytes"] == len(big) + 2 and "$preview" in block["json"]
    # The turn's results joined the messages: nothing is counted twice.
    agent.messages.append(
        {"role": "user", "content": [{"toolResult": first}, {"toolResult": second}]}
    )
    assert carried_bytes(agent) == json_bytes(
        {"messages": agent.messages, "system_prompt": None, "tool_specs": []}
    )


def test_a_result_with_no_room_left_is_one_line_and_the_next_call_is_refused() -> None:
    agent = Conversation("p" * (CONVERSATION_BYTES - 300), "a")
    fitted = fit_tool_result(agent, json_result("a", {"rows": ["r" * 100] * 100}))
    assert fitted["status"] == "error"
    (block,) = fitted["content"]
    assert "does not fit in what is left of this conversation" in block["text"]
    refusal = model_call_refusal(agent)
    assert refusal is not None and "over Temporal's 2 MB limit for one payload" in refusal
    assert model_call_refusal(Conversation("hi")) is None
    # Handing out the result put the guard on the agent's model calls, once.
    fit_tool_result(agent, json_result("a", 1))
    assert len(list(agent.hooks.get_callbacks_for(BeforeModelCallEvent(agent=agent)))) == 1
    event, _interrupts = agent.hooks.invoke_callbacks(BeforeModelCallEvent(agent=agent))
    assert event.cancel == refusal, "the turn ends with the reason, no call is made"


def test_a_small_result_goes_through_whole_while_it_fits_at_all() -> None:
    agent = Conversation("p" * (CONVERSATION_BYTES - 12 * 1024), "a")
    room = result_room(agent, "a")
    assert 8 * 1024 < room < 12 * 1024 and result_share(room) == room, room
    small = json_result("a", {"text": "s" * (room - 200)})
    assert fit_tool_result(agent, small) is small


# -- key order: what the model reads of a plan's results, through the hooks too -----------


async def test_a_conversations_plan_and_hooks_keep_the_tools_key_order(
    agent_client: Client, temporal_target: str, task_queue: str
) -> None:
    """The plan runs on a worker of a plain client, whose converter (the SDK's default)
    sorts every object's keys; the agent's after-hook marks the result. The model reads
    ``{"item", "aisle", "bin", "marked"}`` as in-process; before the fix the hook's request
    and the plan's result came sorted (``{"aisle", "bin", "item", "marked"}``)."""
    plain = await Client.connect(temporal_target)
    plans = f"{task_queue}-plain"
    async with (
        worker(agent_client, task_queue),
        plan_worker(plain, task_queue=plans, registry=RELAY_TOOLS),
    ):
        handle = await agent_client.start_workflow(
            RelayConversationWorkflow.run,
            RelayInput("where is the tea", hook="mark", plugin={"task_queue": plans}),
            id=f"order-{task_queue}",
            task_queue=task_queue,
        )
        out = await result_or_stuck(handle, 60)
        inputs = await model_inputs(handle)
    assert out.answer == "Aisle 4." and out.hook_calls >= 2
    (report,) = plan_reports(inputs[1])
    assert list(report["returned"]["s"]) == ["item", "aisle", "bin", "marked"]
