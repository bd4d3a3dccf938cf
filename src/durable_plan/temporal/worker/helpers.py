"""Workers that run plans, routed tools and model calls: thin helpers over `DurablePlanPlugin`.

One way to configure a worker: each helper is ``Worker(client, task_queue=..., plugins=
[DurablePlanPlugin(...)])`` with its role fixed; an existing app adds the plugin to its own
``Client.connect`` or ``Worker`` instead (``temporal/worker/plugin.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from temporalio.client import Client
from temporalio.worker import Worker

from durable_plan.protect.result_store import ResultStore
from durable_plan.temporal.worker.plugin import (
    GRACEFUL_SHUTDOWN,
    STICKY_TIMEOUT,
    DurablePlanPlugin,
    Role,
)
from durable_plan.tools.registry import ToolRegistry

if TYPE_CHECKING:
    from durable_plan.protect.encryption import Keyring

__all__ = ["GRACEFUL_SHUTDOWN", "STICKY_TIMEOUT", "model_worker", "plan_worker", "tool_worker"]


def plan_worker(
    client: Client,
    *,
    task_queue: str,
    registry: ToolRegistry,
    workflows: Sequence[type] = (),
    activities: Sequence[Callable[..., Any]] = (),
    encryption: Keyring | None = None,
    result_store: ResultStore | None = None,
    **worker_kwargs: Any,
) -> Worker:
    """Register ``PlanWorkflow``, ``AgentStepWorkflow`` (agent steps), every tool of
    ``registry`` and any extra workflows/activities. Agent steps also need the model
    activities of ``temporalio.strands_agents.StrandsPlugin`` on the client.

    Recovery defaults (any ``worker_kwargs`` overrides them): a crashed worker's
    cached plans move to another worker after ``STICKY_TIMEOUT`` instead of the
    SDK's 10 s, and a worker told to stop lets running steps finish for up to
    ``GRACEFUL_SHUTDOWN`` before it goes.

    ``encryption`` (``Keyring.from_env()``, say) seals every payload the worker writes and
    opens the ones it reads (`durable_plan.protect.encryption`): the worker runs on a client like
    ``client`` whose data converter encrypts. Clients that start plans or read their results
    need the same keys (``EncryptionPlugin``).

    ``result_store``: where step results too large for history are kept, by reference
    (``FileResultStore(dir)``, ``S3ResultStore(bucket, prefix)``); default: the store
    ``$DURABLE_PLAN_STORE`` names, else a directory in the temp dir. Every worker of a
    task queue needs the same store.

    Before it polls, the worker asks whether its namespace has the ``PlanStatus`` search
    attribute (``status_attribute.PlanStatusCheck``): plans a conversation on this queue
    starts keep it up to date only then.
    """
    return _worker(
        client,
        "plans",
        task_queue,
        registry,
        encryption,
        result_store,
        workflows=list(workflows),
        activities=list(activities),
        **worker_kwargs,
    )


def tool_worker(
    client: Client,
    *,
    task_queue: str,
    registry: ToolRegistry,
    encryption: Keyring | None = None,
    result_store: ResultStore | None = None,
    **worker_kwargs: Any,
) -> Worker:
    """A worker for the tools routed to ``task_queue`` (``ToolRegistry.add(task_queue=...)``,
    ``route``): their activities only, no workflows. Plans on other queues schedule those
    tools' steps here, so this process alone needs their code and credentials.

    The tools' limits become this worker's options: ``max_per_second`` the queue's rate
    (the server holds every worker of the queue to it), ``max_concurrent`` this worker's
    slots (each worker of the queue has that many: N workers, N times the calls at once).
    ``worker_kwargs`` may tighten them; one asking for more gets the owner's limit (the
    plugin on a user's own ``Worker`` refuses it instead, saying so). ``encryption`` and
    ``result_store`` as for ``plan_worker`` (the plan's workers and this one share both)."""
    if not registry.routed_to(task_queue):
        raise ValueError(
            f"no tool of the registry runs on task queue {task_queue!r} (queues routed: "
            f"{', '.join(registry.task_queues()) or 'none'}); route tools there "
            "(ToolRegistry.route / add(task_queue=...)) or serve the plan's queue with plan_worker"
        )
    # The registry's one merge of the queue's limits, which holds in-process calls too.
    for key, limit in registry.queue_limits(task_queue).items():
        asked = worker_kwargs.get(key)
        worker_kwargs[key] = limit if asked is None else min(asked, limit)
    return _worker(client, "tools", task_queue, registry, encryption, result_store, **worker_kwargs)


def model_worker(
    client: Client,
    *,
    task_queue: str,
    encryption: Keyring | None = None,
    **worker_kwargs: Any,
) -> Worker:
    """A worker for agent steps' model calls alone (``PlanInput.model_task_queue``): the
    model activities of the client's ``StrandsPlugin(models=...)``, no workflows, no tools.
    Only the machines that hold the model's credentials need to run one. ``encryption``
    as for ``plan_worker``: with encrypted plans, the model calls are sealed too."""
    from temporalio.strands_agents import StrandsPlugin

    if not any(isinstance(p, StrandsPlugin) for p in client.config()["plugins"]):
        raise ValueError(
            "model_worker needs a client connected with StrandsPlugin(models=...): the model "
            "activities come from it"
        )
    return _worker(client, "converter", task_queue, None, encryption, None, **worker_kwargs)


def _worker(
    client: Client,
    role: Role,
    task_queue: str,
    registry: ToolRegistry | None,
    encryption: Keyring | None,
    result_store: ResultStore | None,
    **worker_kwargs: Any,
) -> Worker:
    """``Worker`` with `DurablePlanPlugin` in ``role`` after the caller's plugins. The
    client's own External Storage is kept, none added (``payload_storage=False``: the
    client chose, as ``connect`` does from the environment). The plugin's defaults are
    passed as options too, so ``Worker.config()`` shows them as before."""
    defaults: dict[str, Any] = {"graceful_shutdown_timeout": GRACEFUL_SHUTDOWN}
    if role == "plans":
        defaults["sticky_queue_schedule_to_start_timeout"] = STICKY_TIMEOUT
    worker_kwargs = {**defaults, **worker_kwargs}
    plugin = DurablePlanPlugin(
        registry,
        encryption=encryption,
        payload_storage=False,
        result_store=result_store,
        role=role,
    )
    plugins = [*worker_kwargs.pop("plugins", ()), plugin]
    return Worker(client, task_queue=task_queue, plugins=plugins, **worker_kwargs)
