"""Reading a durable plan's events from outside: ``PlanHandle.events`` is built on this.

A plan's events come from its Workflow Stream (``event_stream.py``), each with its
offset: a caller that lost its connection resumes with ``from_offset`` = the last offset
it saw + 1 and misses nothing, sees nothing twice. An agent step's rounds and tool calls
are published by the step's own child workflow; ``follow_agent_steps`` merges them in as
they arrive (they carry the child stream's offset in ``detail["child_offset"]`` and no
plan offset: resuming is by the plan's offsets, and a resumed caller sees the rounds of
agent steps that start after it).

We read the stream through its poll *query*, every ``poll_cooldown`` while caught up,
not through its long-poll *update*: an update lands in the plan's history (its result
too, up to 1 MB a poll), counts against Temporal's limits of 10 updates in flight and
2,000 per workflow (a person's ``decide_step`` is one), and grows the history the plan's
own guard must leave room for. A query costs the plan nothing of that: watching a plan
cannot make it fail. The price is latency of about half a cooldown.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
from collections.abc import AsyncIterator, Callable, Coroutine
from datetime import timedelta
from typing import Any

from temporalio.api.common.v1 import Payload
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHandle
from temporalio.contrib.workflow_streams import PollInput, PollResult
from temporalio.service import RPCError, RPCStatusCode

from durable_plan.language.agent_step import AGENT_TOOL
from durable_plan.run.events import EVENTS_TOPIC, PlanEvent
from durable_plan.temporal.ids import child_workflow_id

POLL_QUERY = "__temporal_workflow_stream_poll"
"""The stream's poll query (temporalio 1.35): retained items from an offset, at once."""
POLL_COOLDOWN = timedelta(milliseconds=100)
"""Between polls when caught up."""
CHILD_RETRY_S = 0.1
"""An agent step's child is started a moment after its step_started event."""
IDLE_POLLS_BEFORE_DESCRIBE = 20
"""Polls without a new event before asking whether the workflow still runs (a plan
started with stream_events=False, or terminated, publishes no end)."""
CHILD_DRAIN_S = 5.0
"""After an agent step ended, how long its step's end waits for its rounds to be read."""
PLANS_TOPIC = "plans"
"""A conversation's topic announcing each plan it starts (``WorkflowPlanPlugin(plan_stream=)``)."""


def _decode(client: Client, wire: str) -> Any:
    payload = Payload()
    payload.ParseFromString(base64.b64decode(wire))
    return client.data_converter.payload_converter.from_payload(payload)


async def stream_items(
    client: Client,
    workflow_id: str,
    topic: str,
    from_offset: int,
    poll_cooldown: timedelta,
    *,
    ended: Callable[[], bool] | None = None,
) -> AsyncIterator[tuple[int, Any]]:
    """``(offset, value)`` of one workflow's stream topic from ``from_offset``, until the
    workflow has closed and nothing is left, or ``ended()`` says the caller knows it is
    over (then one last read). A workflow that does not exist yet is waited for while
    ``ended`` is given (an agent step's child)."""
    handle = client.get_workflow_handle(workflow_id)
    offset = from_offset
    idle = 0
    last = False
    while True:
        try:
            result: PollResult = await handle.query(
                POLL_QUERY, PollInput(topics=[topic], from_offset=offset), result_type=PollResult
            )
        except RPCError as exc:
            if ended is None or exc.status != RPCStatusCode.NOT_FOUND:
                raise
            if ended():
                return  # it never started
            await asyncio.sleep(CHILD_RETRY_S)
            continue
        for item in result.items:
            yield item.offset, _decode(client, item.data)
        offset = result.next_offset
        if result.more_ready:
            continue
        if last:
            return
        if ended is not None and ended():
            last = True  # what it published before it ended, then stop
            continue
        idle = 0 if result.items else idle + 1
        if idle >= IDLE_POLLS_BEFORE_DESCRIBE:
            idle = 0
            description = await handle.describe()
            if description.status != WorkflowExecutionStatus.RUNNING:
                last = True
                continue
        await asyncio.sleep(poll_cooldown.total_seconds())


async def _events(
    client: Client,
    workflow_id: str,
    from_offset: int,
    poll_cooldown: timedelta,
    ended: Callable[[], bool] | None = None,
) -> AsyncIterator[PlanEvent]:
    async for offset, value in stream_items(
        client, workflow_id, EVENTS_TOPIC, from_offset, poll_cooldown, ended=ended
    ):
        if isinstance(value, dict):
            yield PlanEvent.from_wire(value, offset)


async def plan_events(
    handle: WorkflowHandle[Any, Any],
    from_offset: int = 0,
    *,
    follow_agent_steps: bool = True,
    poll_cooldown: timedelta = POLL_COOLDOWN,
) -> AsyncIterator[PlanEvent]:
    """The plan's events in order, ending after ``plan_finished`` (or when the workflow
    closed without one: terminated, or started with ``stream_events=False``)."""
    client = handle._client
    if not follow_agent_steps:
        async for event in _events(client, handle.id, from_offset, poll_cooldown):
            yield event
            if event.kind == "plan_finished":
                return
        return
    queue: asyncio.Queue[PlanEvent | BaseException | None] = asyncio.Queue()
    children: dict[str, tuple[asyncio.Task[None], asyncio.Event]] = {}

    async def follow_child(step: str, ended: asyncio.Event) -> None:
        child_id = child_workflow_id(handle.id, "agent", step)
        try:
            async for event in _events(client, child_id, 0, poll_cooldown, ended.is_set):
                detail = dict(event.detail or {}, child_offset=event.offset)
                await queue.put(PlanEvent.from_wire({**event.to_wire(), "detail": detail}))
        except Exception:  # a child that cannot be read costs its rounds, not the plan's events
            return

    async def follow_plan() -> None:
        try:
            async for event in _events(client, handle.id, from_offset, poll_cooldown):
                if event.kind == "step_started" and event.tool == AGENT_TOOL and event.step:
                    ended = asyncio.Event()
                    task = asyncio.create_task(follow_child(event.step, ended))
                    children[event.step] = (task, ended)
                elif event.kind == "step_finished" and event.step in children:
                    task, ended = children[event.step]
                    ended.set()
                    with contextlib.suppress(TimeoutError):  # its rounds before its end
                        await asyncio.wait_for(asyncio.shield(task), CHILD_DRAIN_S)
                await queue.put(event)
                if event.kind == "plan_finished":
                    break
            await queue.put(None)
        except BaseException as exc:  # handed to the reader, who raises it
            await queue.put(exc)

    async for item in _merged(queue, follow_plan(), lambda: [t for t, _ in children.values()]):
        yield item


async def conversation_events(
    client: Client,
    workflow_id: str,
    *,
    poll_cooldown: timedelta = POLL_COOLDOWN,
    ended: Callable[[], bool] | None = None,
) -> AsyncIterator[PlanEvent]:
    """The events of every plan a conversation starts, as they happen, until the
    conversation closes (its workflow hosts a ``WorkflowStream`` given to the plugin as
    ``plan_stream``); each plan's events are read from its own stream, agent steps'
    rounds included. ``ended``: the caller knows the conversation is over (it has its
    answer): one last read, then the iteration ends when its plans' events do."""
    queue: asyncio.Queue[PlanEvent | BaseException | None] = asyncio.Queue()
    plans: list[asyncio.Task[None]] = []

    async def follow(plan_id: str) -> None:
        with contextlib.suppress(Exception):  # a plan that cannot be read costs its events
            handle = client.get_workflow_handle(plan_id)
            async for event in plan_events(handle, poll_cooldown=poll_cooldown):
                await queue.put(event)

    async def announcements() -> None:
        try:
            async for _offset, value in stream_items(
                client, workflow_id, PLANS_TOPIC, 0, poll_cooldown, ended=ended
            ):
                plan_id = value.get("plan") if isinstance(value, dict) else None
                if isinstance(plan_id, str):
                    plans.append(asyncio.create_task(follow(plan_id)))
            await asyncio.gather(*plans)
            await queue.put(None)
        except BaseException as exc:
            await queue.put(exc)

    async for item in _merged(queue, announcements(), lambda: plans):
        yield item


async def _merged(
    queue: asyncio.Queue[PlanEvent | BaseException | None],
    lead: Coroutine[Any, Any, None],
    helpers: Callable[[], list[asyncio.Task[None]]],
) -> AsyncIterator[PlanEvent]:
    """What ``lead`` and the readers it starts (``helpers()``) put on ``queue``, until it
    puts None; an exception put there is raised here. Every reader ends with the
    iteration, however it ends."""
    reader = asyncio.create_task(lead)
    try:
        while (item := await queue.get()) is not None:
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        reader.cancel()
        started = helpers()
        for task in started:
            task.cancel()
        with contextlib.suppress(BaseException):
            await asyncio.gather(reader, *started)
