"""A worker that runs plans: ``PlanWorkflow`` plus one activity per tool."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from temporalio.client import Client
from temporalio.worker import Worker

from durable_plan.language.routing import queue_limits
from durable_plan.protect.payload_storage import readable_client
from durable_plan.protect.result_store import ResultStore
from durable_plan.temporal.activities import registry_activities
from durable_plan.temporal.agent_workflow import AgentStepWorkflow
from durable_plan.temporal.claim_check import claim_check_activities, worker_store
from durable_plan.temporal.payload_limits import note_worker_converter
from durable_plan.temporal.recovery import recover_ledger
from durable_plan.temporal.status_attribute import PlanStatusCheck
from durable_plan.temporal.workflow import PlanWorkflow
from durable_plan.tools.registry import ToolRegistry

if TYPE_CHECKING:
    from durable_plan.protect.encryption import Keyring

STICKY_TIMEOUT = timedelta(seconds=2)
"""How long a plan's next workflow task waits for the worker that has it cached. A lost
worker is not noticed until then; a live but busy one replays the history elsewhere."""
GRACEFUL_SHUTDOWN = timedelta(seconds=10)


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
    client, store = _client_and_store(client, encryption, result_store)
    options: dict[str, Any] = {
        "sticky_queue_schedule_to_start_timeout": STICKY_TIMEOUT,
        "graceful_shutdown_timeout": GRACEFUL_SHUTDOWN,
        **worker_kwargs,
    }
    # Before it polls, the worker learns whether plans a conversation starts on it may
    # keep the PlanStatus search attribute (``status_attribute``).
    options["plugins"] = [PlanStatusCheck(), *options.get("plugins", ())]
    limited = [t.name for t in registry.routed_to(task_queue) if queue_limits([t], task_queue)]
    if limited:
        raise ValueError(
            f"tools {limited} are limited and routed to {task_queue!r}, the plan's own queue: "
            "its limits would hold every tool and the plan's own activities; route them to a "
            "queue of their own and serve it with tool_worker"
        )
    return Worker(
        client,
        task_queue=task_queue,
        workflows=[PlanWorkflow, AgentStepWorkflow, *workflows],
        activities=[
            # Tools routed elsewhere too: a plan started before their route keeps their
            # steps on this queue (its tool table says so) and must still find them.
            *registry_activities(registry, store),
            *claim_check_activities(store),
            recover_ledger,
            *activities,
        ],
        **options,
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
    ``worker_kwargs`` may tighten them, never loosen them. ``encryption`` and
    ``result_store`` as for ``plan_worker`` (the plan's workers and this one share both)."""
    served = registry.routed_to(task_queue)
    if not served:
        raise ValueError(
            f"no tool of the registry runs on task queue {task_queue!r} (queues routed: "
            f"{', '.join(registry.task_queues()) or 'none'}); route tools there "
            "(ToolRegistry.route / add(task_queue=...)) or serve the plan's queue with plan_worker"
        )
    client, store = _client_and_store(client, encryption, result_store)
    options: dict[str, Any] = {"graceful_shutdown_timeout": GRACEFUL_SHUTDOWN, **worker_kwargs}
    # The registry's one merge of the queue's limits, which holds in-process calls too.
    for key, limit in registry.queue_limits(task_queue).items():
        asked = options.get(key)
        options[key] = limit if asked is None else min(asked, limit)
    return Worker(
        client, task_queue=task_queue, activities=registry_activities(served, store), **options
    )


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
    if encryption is not None:
        from durable_plan.protect.encryption import encrypted_client

        client = encrypted_client(client, encryption)
    client = readable_client(client)
    options: dict[str, Any] = {"graceful_shutdown_timeout": GRACEFUL_SHUTDOWN, **worker_kwargs}
    note_worker_converter(client.data_converter)
    return Worker(client, task_queue=task_queue, **options)


def _client_and_store(
    client: Client, encryption: Keyring | None, result_store: ResultStore | None
) -> tuple[Client, ResultStore]:
    """The client a worker runs on (encrypting with ``encryption``; reading a stored
    payload it cannot read fails the workflow, `readable_client`) and its result store
    (sealed with the same keys): one setup for the plan's workers and the tools' alike."""
    store = worker_store(result_store)
    if encryption is not None:
        from durable_plan.protect.encryption import encrypted_client

        client = encrypted_client(client, encryption)
    client = readable_client(client)
    note_worker_converter(client.data_converter)
    return client, _sealed_if_encrypting(store, client)


def _sealed_if_encrypting(store: ResultStore, client: Client) -> ResultStore:
    """With payload encryption on, results kept by reference are sealed with the same keys:
    history holds ciphertext only, so the store must not hold the plaintext."""
    if client.data_converter.payload_codec is None:
        return store
    from durable_plan.protect.encryption import codec_of
    from durable_plan.protect.sealed_store import SealedResultStore

    codec = codec_of(client.data_converter)
    return store if codec is None else SealedResultStore(store, codec.keyring)
