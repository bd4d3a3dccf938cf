"""Does the namespace have the ``PlanStatus`` search attribute? Asked by whoever starts a plan.

A plan upserts ``PlanStatus`` only when its input says it may (``Visibility.
plan_status_attribute``): an upsert of an attribute the namespace lacks fails the workflow
task, and Temporal retries it forever. The one who starts the plan decides, from the
namespace's registered attributes, and the decision is recorded in the plan's input:

- ``start_plan`` asks the server once per client (``client_sees_plan_status``; the answer
  is kept for the client's life: registering one later takes a new client);
- a plan a conversation starts is started by workflow code, which cannot ask the server:
  ``plan_worker`` asks when the worker starts (``PlanStatusCheck``), and the plan tool
  records what this process's workers of the conversation's task queue found
  (``workers_see_plan_status``) in the child's input, so a replay of the conversation
  never asks again and the child replays from its own input. ``WorkflowPlanPlugin(
  plan_options={"plan_status_attribute": ...})`` decides it explicitly instead.

Client and worker code (never imported by workflow code).
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import TYPE_CHECKING

from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest
from temporalio.client import Client
from temporalio.service import RPCError
from temporalio.worker import Plugin, WorkerConfig

from durable_plan.temporal.workflows.plan_status import (
    PLAN_STATUS_ATTRIBUTE,
    note_workers_see,
    workers_see_plan_status,
)

if TYPE_CHECKING:
    from contextlib import AbstractAsyncContextManager
    from typing import Any

    from temporalio.worker import Replayer, ReplayerConfig, Worker

__all__ = [
    "PlanStatusCheck",
    "client_sees_plan_status",
    "namespace_has_plan_status",
    "workers_see_plan_status",
]

ASK_TIMEOUT = timedelta(seconds=5)
"""How long the server may take to list its attributes: a worker asks before it polls, so a
server that does not answer must not stall the worker's start."""

_log = logging.getLogger(__name__)

_by_client: weakref.WeakKeyDictionary[Client, bool] = weakref.WeakKeyDictionary()


async def namespace_has_plan_status(client: Client, timeout: timedelta = ASK_TIMEOUT) -> bool:
    """The server's answer: ``PlanStatus`` is a Keyword attribute of the client's namespace.
    A server that will not say (no operator access, an old server) or not within
    ``timeout`` counts as no: the plan then shows its status in its current details alone,
    never a task failing forever (the log says so when the server did not answer)."""
    try:
        response = await client.operator_service.list_search_attributes(
            ListSearchAttributesRequest(namespace=client.namespace), timeout=timeout
        )
    except RPCError as exc:
        # Whatever the status (a deadline this short may also come back as CANCELLED or
        # UNKNOWN from the transport): said once, in words.
        _log.warning(
            "durable-plan: the server did not say within %.1f s whether namespace %s has "
            "the PlanStatus search attribute (%s): taken as not registered (plans show their "
            "status in their current details only)",
            timeout.total_seconds(),
            client.namespace,
            exc.status.name if exc.status is not None else "no status",
        )
        return False
    kind = response.custom_attributes.get(PLAN_STATUS_ATTRIBUTE)
    return kind == IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD


async def client_sees_plan_status(client: Client) -> bool:
    """``namespace_has_plan_status``, asked once per client."""
    known = _by_client.get(client)
    if known is None:
        known = _by_client[client] = await namespace_has_plan_status(client)
    return known


class PlanStatusCheck(Plugin):
    """A worker plugin (``plan_worker`` adds it): before the worker polls, it asks whether
    its namespace has ``PlanStatus`` (``workers_see_plan_status``), so the first workflow
    task of a conversation already knows."""

    def configure_worker(self, config: WorkerConfig) -> WorkerConfig:
        return config

    async def run_worker(self, worker: Worker, next: Callable[[Worker], Awaitable[None]]) -> None:
        client = worker.client
        registered = await client_sees_plan_status(client)
        note_workers_see(client.namespace, worker.config()["task_queue"], registered)
        await next(worker)

    def configure_replayer(self, config: ReplayerConfig) -> ReplayerConfig:
        return config

    def run_replayer(
        self, replayer: Replayer, histories: Any, next: Any
    ) -> AbstractAsyncContextManager[Any]:
        return next(replayer, histories)  # type: ignore[no-any-return]
