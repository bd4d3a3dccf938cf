"""Reading a durable plan's events from outside: ``PlanHandle.events`` is built on this.

A plan's events come from its Workflow Stream (``event_stream.py``), each with its
offset: a caller that lost its connection resumes with ``from_offset`` = the last offset
it saw + 1 and misses nothing, sees nothing twice. An agent step's rounds and tool calls
are published by the step's own child workflow; ``follow_agent_steps`` merges them in as
they arrive (they carry the child stream's offset in ``detail["child_offset"]`` and no
plan offset: resuming is by the plan's offsets, and a resumed caller sees the rounds of
agent steps that start after it).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

from temporalio.client import Client, WorkflowHandle
from temporalio.contrib.workflow_streams import WorkflowStreamClient
from temporalio.service import RPCError, RPCStatusCode

from durable_plan.language.agent_step import AGENT_TOOL
from durable_plan.run.events import EVENTS_TOPIC, PlanEvent
from durable_plan.temporal.ids import child_workflow_id

POLL_COOLDOWN = timedelta(milliseconds=50)
"""Between polls when caught up: events of one plan arrive in batches of this much time."""
PLANS_TOPIC = "plans"
"""A conversation's topic announcing each plan it starts (``WorkflowPlanPlugin(plan_stream=)``)."""
CHILD_RETRY_S = 0.1
"""An agent step's child is started a moment after its step_started event."""


async def stream_items(
    client: Client,
    workflow_id: str,
    from_offset: int,
    poll_cooldown: timedelta,
    *,
    wait_for_start: asyncio.Event | None = None,
) -> AsyncIterator[PlanEvent]:
    """The events of one workflow's stream, from ``from_offset``, until it closes.

    ``wait_for_start``: retry while the workflow does not exist yet, until this is set
    (its step ended: the child will not come)."""
    stream = WorkflowStreamClient.create(client, workflow_id)
    while True:
        try:
            async for item in stream.subscribe(
                [EVENTS_TOPIC],
                from_offset=from_offset,
                result_type=dict,
                poll_cooldown=poll_cooldown,
            ):
                yield PlanEvent.from_wire(item.data, item.offset)
                from_offset = item.offset + 1
            return
        except RPCError as exc:
            if wait_for_start is None or exc.status != RPCStatusCode.NOT_FOUND:
                raise
            if wait_for_start.is_set():
                return
            await asyncio.sleep(CHILD_RETRY_S)


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
        async for event in stream_items(client, handle.id, from_offset, poll_cooldown):
            yield event
            if event.kind == "plan_finished":
                return
        return
    queue: asyncio.Queue[PlanEvent | BaseException | None] = asyncio.Queue()
    children: dict[str, tuple[asyncio.Task[None], asyncio.Event]] = {}

    async def follow_child(step: str, ended: asyncio.Event) -> None:
        child_id = child_workflow_id(handle.id, "agent", step)
        try:
            async for event in stream_items(
                client, child_id, 0, poll_cooldown, wait_for_start=ended
            ):
                detail = dict(event.detail or {}, child_offset=event.offset)
                await queue.put(PlanEvent.from_wire({**event.to_wire(), "detail": detail}))
        except Exception:  # a child that cannot be read costs its rounds, not the plan's events
            return

    async def follow_plan() -> None:
        try:
            async for event in stream_items(client, handle.id, from_offset, poll_cooldown):
                if event.kind == "step_started" and event.tool == AGENT_TOOL and event.step:
                    ended = asyncio.Event()
                    task = asyncio.create_task(follow_child(event.step, ended))
                    children[event.step] = (task, ended)
                elif event.kind == "step_finished" and event.step in children:
                    task, ended = children[event.step]
                    ended.set()
                    await task  # the child's rounds come before its step's end
                await queue.put(event)
                if event.kind == "plan_finished":
                    break
            await queue.put(None)
        except BaseException as exc:  # handed to the reader, who raises it
            await queue.put(exc)

    reader = asyncio.create_task(follow_plan())
    try:
        while (item := await queue.get()) is not None:
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        reader.cancel()
        for task, _ in children.values():
            task.cancel()
        with contextlib.suppress(BaseException):
            await asyncio.gather(reader, *(t for t, _ in children.values()))


async def conversation_events(
    client: Client, workflow_id: str, *, poll_cooldown: timedelta = POLL_COOLDOWN
) -> AsyncIterator[PlanEvent]:
    """The events of every plan a conversation starts, as they happen, until the
    conversation closes (its workflow hosts a ``WorkflowStream`` given to the plugin as
    ``plan_stream``); each plan's events are read from its own stream, agent steps'
    rounds included."""
    queue: asyncio.Queue[PlanEvent | BaseException | None] = asyncio.Queue()
    plans: list[asyncio.Task[None]] = []

    async def follow(plan_id: str) -> None:
        with contextlib.suppress(Exception):  # a plan that cannot be read costs its events
            handle = client.get_workflow_handle(plan_id)
            async for event in plan_events(handle, poll_cooldown=poll_cooldown):
                await queue.put(event)

    async def announcements() -> None:
        try:
            stream = WorkflowStreamClient.create(client, workflow_id)
            async for item in stream.subscribe(
                [PLANS_TOPIC], result_type=dict, poll_cooldown=poll_cooldown
            ):
                plan_id = item.data.get("plan") if isinstance(item.data, dict) else None
                if isinstance(plan_id, str):
                    plans.append(asyncio.create_task(follow(plan_id)))
            await asyncio.gather(*plans)
            await queue.put(None)
        except BaseException as exc:
            await queue.put(exc)

    reader = asyncio.create_task(announcements())
    try:
        while (item := await queue.get()) is not None:
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        reader.cancel()
        for task in plans:
            task.cancel()
        with contextlib.suppress(BaseException):
            await asyncio.gather(reader, *plans)
