"""Is a worker polling this task queue? Asked before a plan starts, remembered for a while.

``start_plan`` asks the server (``DescribeTaskQueue``) whether a worker polls the plan's
queue and the queues its tools are routed to, so a plan never waits for a worker in
silence. An application that starts many plans asked once per plan: one request more per
plan than a bare ``start_workflow``, on a server that answers from what it remembers of
pollers over the last minutes anyway. A yes is therefore remembered per client for
``SEEN_FOR_S`` seconds (a no is asked again each time, so a worker that starts is noticed
by the next plan).
"""

from __future__ import annotations

import asyncio
import time
import weakref

from temporalio.api.enums.v1 import TaskQueueKind, TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client
from temporalio.service import RPCError

__all__ = ["SEEN_FOR_S", "WORKER_GRACE_S", "task_queue_has_pollers", "worker_seen"]

WORKER_GRACE_S = 1.0
"""How long a queue may look empty before it counts as having no worker: a worker started a
moment ago in this process may not have sent its first poll yet."""

SEEN_FOR_S = 30.0
"""How long a queue a worker was seen polling counts as polled without asking again. The
server itself keeps a poller that stopped for minutes, so a fresher answer would say the
same; a worker stopped since is noticed no later than the server would notice it."""

_seen: weakref.WeakKeyDictionary[Client, dict[tuple[str, bool], float]] = (
    weakref.WeakKeyDictionary()
)


async def task_queue_has_pollers(
    client: Client,
    task_queue: str,
    *,
    grace_s: float = WORKER_GRACE_S,
    activities: bool = False,
) -> bool:
    """True if a worker polls ``task_queue`` for workflow tasks (``activities``: activity
    tasks, as a ``tool_worker`` does) (asked again for up to ``grace_s`` seconds before
    answering False, so a worker that is starting counts). Always asks the server.

    The server remembers a poller for a few minutes, so a worker that stopped a moment ago
    still counts: this catches "no worker was ever started", not every crash.
    """
    request = DescribeTaskQueueRequest(
        namespace=client.namespace,
        task_queue=TaskQueue(name=task_queue, kind=TaskQueueKind.TASK_QUEUE_KIND_NORMAL),
        task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY
        if activities
        else TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
    )
    loop = asyncio.get_running_loop()
    deadline = loop.time() + grace_s
    while True:
        response = await client.workflow_service.describe_task_queue(request)
        if response.pollers:
            return True
        if loop.time() >= deadline:
            return False
        await asyncio.sleep(min(0.1, grace_s))


async def worker_seen(client: Client, task_queue: str, *, activities: bool = False) -> bool:
    """``task_queue_has_pollers``, remembered for ``SEEN_FOR_S`` when yes; True when the
    server will not say (a namespace whose credentials may not describe task queues): the
    check is a courtesy, never a failure."""
    key = (task_queue, activities)  # a client has one namespace
    remembered = _seen.setdefault(client, {})
    now = time.monotonic()
    if remembered.get(key, 0.0) > now:
        return True
    try:
        polled = await task_queue_has_pollers(client, task_queue, activities=activities)
    except RPCError:
        return True
    if polled:
        remembered[key] = time.monotonic() + SEEN_FOR_S
    return polled
