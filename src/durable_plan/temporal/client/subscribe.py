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

A workflow that continues as new (a long conversation) is followed across its runs: while a
run is open it is polled with ``reject_condition=NOT_OPEN``, so the server says at once, at no
worker's cost, that it closed; the closed run is then read to its end and the next run from
there, which is where its offsets start when the stream's state was carried
(``WorkflowStream(prior_state=...)``, ``WorkflowPlanPlugin.carry_over``). A follower sees
every item once, in order, whatever run it started in.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
from collections.abc import AsyncIterator, Callable, Coroutine
from datetime import timedelta
from typing import Any

from temporalio.api.common.v1 import Payload
from temporalio.api.enums.v1 import ContinueAsNewInitiator
from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowHandle,
    WorkflowHistoryEventFilterType,
    WorkflowQueryRejectedError,
)
from temporalio.common import QueryRejectCondition
from temporalio.contrib.workflow_streams import PollInput, PollResult
from temporalio.service import RPCError, RPCStatusCode

from durable_plan.language.agent_step import AGENT_TOOL
from durable_plan.run.events import EVENTS_TOPIC, PlanEvent
from durable_plan.temporal.wire.ids import child_workflow_id
from durable_plan.temporal.wire.messages import PLANS_TOPIC as PLANS_TOPIC  # re-exported

POLL_QUERY = "__temporal_workflow_stream_poll"
"""The stream's poll query (temporalio 1.35): retained items from an offset, at once."""
POLL_COOLDOWN = timedelta(milliseconds=100)
"""Between polls when caught up."""
CHILD_RETRY_S = 0.1
"""An agent step's child is started a moment after its step_started event."""
CHILD_DRAIN_S = 5.0
"""After an agent step ended, how long its step's end waits for its rounds to be read."""


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
    ``ended`` is given (an agent step's child).

    A workflow that continues as new is followed from run to run (``_chain_of_runs``):
    each item once, in order. Its offsets go on across runs when it passes its stream's
    state on (``WorkflowStream(prior_state=...)``; ``WorkflowPlanPlugin.carry_over`` carries
    it without the log, so the next run starts at the closed run's end): a closed run is
    read to its end, then the next from there. The first run read is the first of the
    chain of continue-as-new runs, so a reader that starts late still reads from the
    start; each closed run it reads costs one replay on a worker (a query to a closed
    workflow), once per reader, and only a reader that needs that run's items reads it (one
    resuming at an offset the open run holds reads that run alone)."""
    runs = await _chain_of_runs(client, workflow_id, ended)
    if len(runs) > 1 and not await _left_behind(client, workflow_id, runs[-1], from_offset):
        # The open latest run's stream starts at or before where the reader begins: the
        # closed runs hold nothing it needs, and reading each would replay it on a worker.
        runs = runs[-1:]
    offset = from_offset
    position = 0
    while position < len(runs):
        run_id = runs[position]
        handle = client.get_workflow_handle(workflow_id, run_id=run_id)
        status: WorkflowExecutionStatus | None = None
        if position + 1 < len(runs):
            status = WorkflowExecutionStatus.CONTINUED_AS_NEW  # an earlier run of the chain
        last = False
        while status is None:  # the run is open: follow it, cheaply, until it closes
            try:
                result = await _poll(handle, topic, offset, open_only=True)
            except WorkflowQueryRejectedError as exc:
                status = exc.status or WorkflowExecutionStatus.COMPLETED
                break
            for item in result.items:
                yield item.offset, _decode(client, item.data)
            # Never back: a stream's next offset is its end, which is before ``from_offset``
            # while it has not got there yet (or when a run's offsets started at 0 again).
            offset = max(offset, result.next_offset)
            if result.more_ready:
                continue
            if last:
                return
            if ended is not None and ended():
                last = True  # what it published before it ended, then stop
                continue
            await asyncio.sleep(poll_cooldown.total_seconds())
        successor: str | None = None
        if status == WorkflowExecutionStatus.CONTINUED_AS_NEW:
            if position + 1 == len(runs) and (following := await _successor(handle)):
                runs.append(following)
            successor = runs[position + 1] if position + 1 < len(runs) else None
        # The closed run's last items, unless its (open) successor starts where we are.
        if successor is None or await _left_behind(client, workflow_id, successor, offset):
            while True:
                result = await _poll(handle, topic, offset, open_only=False)
                for item in result.items:
                    yield item.offset, _decode(client, item.data)
                offset = max(offset, result.next_offset)
                if not result.more_ready:
                    break
        if successor is None:
            return
        position += 1


async def _poll(
    handle: WorkflowHandle[Any, Any], topic: str, offset: int, *, open_only: bool
) -> PollResult:
    """One read of the stream's retained items from ``offset``. ``open_only``: refused
    (``WorkflowQueryRejectedError``, by the server, at no worker's cost) once the run
    has closed; a closed run's items are read by a worker replaying its history."""
    result: PollResult = await handle.query(
        POLL_QUERY,
        PollInput(topics=[topic], from_offset=offset),
        result_type=PollResult,
        reject_condition=QueryRejectCondition.NOT_OPEN if open_only else None,
    )
    return result


async def _chain_of_runs(
    client: Client, workflow_id: str, ended: Callable[[], bool] | None
) -> list[str]:
    """The runs to read, oldest first: the workflow's latest run and the runs it
    continued as new from (each run's first event names the one before), back to the
    first; none when ``ended()`` says a workflow that does not exist never will."""
    latest = client.get_workflow_handle(workflow_id)
    while True:
        try:
            description = await latest.describe()
            break
        except RPCError as exc:
            if ended is None or exc.status != RPCStatusCode.NOT_FOUND:
                raise
            if ended():
                return []  # it never started
            await asyncio.sleep(CHILD_RETRY_S)
    runs = [description.run_id]
    first = description.raw_description.workflow_execution_info.first_run_id
    while runs[0] != first:
        handle = client.get_workflow_handle(workflow_id, run_id=runs[0])
        started = None
        async for event in handle.fetch_history_events(page_size=1):
            started = event.workflow_execution_started_event_attributes
            break
        if (
            started is None
            or started.initiator != ContinueAsNewInitiator.CONTINUE_AS_NEW_INITIATOR_WORKFLOW
            or not started.continued_execution_run_id
        ):
            break  # started afresh (or retried: a new stream, not a continued one)
        runs.insert(0, started.continued_execution_run_id)
    return runs


async def _successor(handle: WorkflowHandle[Any, Any]) -> str | None:
    """The run a closed run continued as new into (its close event names it)."""
    async for event in handle.fetch_history_events(
        event_filter_type=WorkflowHistoryEventFilterType.CLOSE_EVENT
    ):
        if event.HasField("workflow_execution_continued_as_new_event_attributes"):
            return event.workflow_execution_continued_as_new_event_attributes.new_execution_run_id
    return None


async def _left_behind(client: Client, workflow_id: str, run_id: str, offset: int) -> bool:
    """Whether the run before ``run_id`` still holds items at or after ``offset``: the new
    run's stream starts at its predecessor's end, so it is so when that start is past
    ``offset``. Asked of the new run while it is open (its worker has it in memory); a
    closed one is not asked (that would replay it): then the old run is read to its end."""
    handle = client.get_workflow_handle(workflow_id, run_id=run_id)
    try:
        result: PollResult = await handle.query(
            POLL_QUERY,
            PollInput(topics=[], from_offset=offset),  # every topic: its first offset
            result_type=PollResult,
            reject_condition=QueryRejectCondition.NOT_OPEN,
        )
    except WorkflowQueryRejectedError:
        return True
    start = result.items[0].offset if result.items else result.next_offset
    return start > offset


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
