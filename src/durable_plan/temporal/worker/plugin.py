"""``DurablePlanPlugin``: durable plans in an existing Temporal app, through one plugin.

A Temporal user already has ``Client.connect(...)`` and ``Worker(client, task_queue=...,
workflows=[...], activities=[...])``; every Temporal integration joins that with one plugin
(``StrandsPlugin(models=...)``), and so does durable-plan::

    client = await Client.connect(address, plugins=[StrandsPlugin(models=...),
                                                    DurablePlanPlugin(TOOLS)])
    Worker(client, task_queue="my-app", workflows=[MyAgentWorkflow], activities=[mine])

On a ``Client`` it sets the data converter pieces (encryption, External Storage), so the
client and every worker built from it agree, and (the SDK hands a client's plugins to its
workers) it configures those workers too. On a ``Worker`` alone
(``Worker(..., plugins=[DurablePlanPlugin(TOOLS)])``) it does the same for that worker:
a client lacking its converter pieces is replaced, for that worker only, by one on the same
connection that has them.

What a worker gets depends on its task queue:

* the plans' queue (any queue the registry routes no tool to): ``PlanWorkflow``,
  ``AgentStepWorkflow``, every tool's activity, the claim-check activities (results kept by
  reference) and ``recover_ledger`` (what an ended plan did), the recovery defaults
  (``STICKY_TIMEOUT``, ``GRACEFUL_SHUTDOWN``) and the ``PlanStatus`` check before it polls;
* a queue the registry routes tools to (``ToolRegistry.add(task_queue=...)``): those tools'
  activities only, no workflows, and the tools' limits as the worker's options;
* without a registry: the converter pieces only (a client; a model worker).

A user's own setting is never silently replaced: an option the user set stays (the
defaults fill only options left at the SDK's default), and one the plugin cannot keep
(concurrency above the tool owner's limit, a second External Storage, other encryption
keys) is refused with a message naming it and the fix.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Literal

import temporalio.client
import temporalio.worker
from temporalio.client import ClientConfig, WorkflowHistory
from temporalio.converter import DataConverter, ExternalStorage
from temporalio.service import ConnectConfig, ServiceClient
from temporalio.worker import (
    Replayer,
    ReplayerConfig,
    Worker,
    WorkerConfig,
    WorkflowReplayResult,
)

from durable_plan.language.routing import queue_limits
from durable_plan.protect.payload_storage import (
    external_storage,
    storage_driver,
    storage_setting,
    unconfigured_storage,
)
from durable_plan.protect.result_store import ResultStore
from durable_plan.temporal.activities.claim_check import claim_check_activities, worker_store
from durable_plan.temporal.activities.ledger_recovery import recover_ledger
from durable_plan.temporal.activities.sandbox_calls import bind_worker_sandboxes
from durable_plan.temporal.activities.tool_activities import registry_activities
from durable_plan.temporal.client.status_attribute import PlanStatusCheck
from durable_plan.temporal.wire.payload_limits import note_worker_converter
from durable_plan.temporal.workflows.agent_workflow import AgentStepWorkflow
from durable_plan.temporal.workflows.plan_workflow import PlanWorkflow
from durable_plan.tools.registry import ToolRegistry

if TYPE_CHECKING:
    from temporalio.contrib.opentelemetry import OpenTelemetryPlugin

    from durable_plan.protect.keys import Keyring

__all__ = ["GRACEFUL_SHUTDOWN", "STICKY_TIMEOUT", "DurablePlanPlugin", "Role"]

PLUGIN_NAME = "durable_plan.DurablePlanPlugin"
STICKY_TIMEOUT = timedelta(seconds=2)
"""How long a plan's next workflow task waits for the worker that has it cached. A lost
worker is not noticed until then; a live but busy one replays the history elsewhere."""
GRACEFUL_SHUTDOWN = timedelta(seconds=10)
"""How long a worker told to stop lets running steps finish before it goes."""

Role = Literal["auto", "plans", "tools", "converter"]
"""What the plugin serves on a worker's queue: ``auto`` (by the registry's routes, the
module docstring), or one of them forced (``plan_worker`` forces ``plans``: a plan queue
may have tools routed to it as well)."""

_SDK_DEFAULTS = {
    name: p.default
    for name, p in inspect.signature(Worker.__init__).parameters.items()
    if p.default is not inspect.Parameter.empty
}
"""The SDK's own defaults: a worker option still at one was not set by the user (the
plugin's defaults fill only those)."""


class DurablePlanPlugin(temporalio.client.Plugin, temporalio.worker.Plugin):
    """Durable plans on a Temporal ``Client`` or ``Worker`` (the module docstring says what
    it registers).

    Args:
        registry: the tools plans (and agents' direct calls) may use; None: the converter
            pieces only (a client that starts plans; a worker for model calls).
        encryption: seal every payload with these keys (``Keyring.from_env()``); results
            kept by reference are sealed with them too. Every client and worker of the
            plans needs the same keys.
        payload_storage: Temporal's External Storage for large payloads of every kind
            (``protect/payload_storage``): None (default) as the environment says
            (``$DURABLE_PLAN_STORE`` set or ``DURABLE_PLAN_PAYLOAD_STORAGE=on``), True on at
            the default store, a store (a directory or ``s3://bucket/prefix``) on there,
            False no store added (a client's own stays). With none storing, a reference
            written elsewhere fails its workflow saying so, never its task forever.
        result_store: where step results too large for history are kept by reference
            (default: ``$DURABLE_PLAN_STORE``, else a temp directory). Every worker of a
            task queue needs the same store.
        tracing: ``tracing_plugin(exporter, ...)``: the plans' spans, linked across
            processes (its interceptors and sandbox passthrough, applied by this plugin).
        role: ``auto`` (default) serves by the worker's queue; ``plans``, ``tools`` or
            ``converter`` forces one.
    """

    def __init__(
        self,
        registry: ToolRegistry | None = None,
        *,
        encryption: Keyring | None = None,
        payload_storage: bool | str | None = None,
        result_store: ResultStore | None = None,
        tracing: OpenTelemetryPlugin | None = None,
        role: Role = "auto",
    ) -> None:
        if registry is None and role in ("plans", "tools"):
            raise ValueError(f"DurablePlanPlugin(role={role!r}) needs registry=ToolRegistry(...)")
        self.registry = registry
        self.encryption = encryption
        self.payload_storage = payload_storage
        self.result_store = result_store
        self.tracing = tracing
        self.role = role
        self._storage: ExternalStorage | None = None

    def name(self) -> str:
        return PLUGIN_NAME

    # -- the data converter: one for the client and every worker built from it -----------

    def data_converter(self, existing: DataConverter | None) -> DataConverter:
        """``existing`` (the user's own, else Temporal's default) with encryption (when keys
        are given) and External Storage (per ``payload_storage``); ``existing`` itself when
        it has both already. Its payload and failure converters are kept (Strands' pydantic
        one, the user's own), and so is a codec of its own (encryption goes after it)."""
        converter = existing or DataConverter.default
        converter = self._with_storage(converter)
        if self.encryption is not None:
            from durable_plan.protect.converter import codec_of, encrypted_converter

            current = codec_of(converter)
            if current is None or current.keyring != self.encryption:
                if current is not None:
                    raise ValueError(
                        "the client's data converter already encrypts with other keys than "
                        "DurablePlanPlugin(encryption=...): give both the same Keyring, or "
                        "drop one of them"
                    )
                converter = encrypted_converter(self.encryption, converter)
        return converter

    def _with_storage(self, converter: DataConverter) -> DataConverter:
        existing = converter.external_storage
        if existing is not None and existing is self._storage:
            return converter  # this plugin's own, on a client built with it
        stores = existing is not None and bool(getattr(existing, "stores_payloads", True))
        spec = None if self.payload_storage is False else storage_setting(self.payload_storage)
        if stores:
            if self.payload_storage not in (None, False):
                raise ValueError(
                    "the client's data converter has an External Storage of its own and "
                    f"DurablePlanPlugin(payload_storage={self.payload_storage!r}) asks for "
                    "another: a payload stored by one could not be read through the other; "
                    "drop payload_storage= (the converter's storage is kept) or the "
                    "converter's external_storage"
                )
            return converter
        if spec is None and existing is not None:
            return converter  # the storage that refuses reads clearly is there already
        if self._storage is None:  # one per plugin: its client and workers share it
            self._storage = (
                unconfigured_storage() if spec is None else external_storage(storage_driver(spec))
            )
        return dataclasses.replace(converter, external_storage=self._storage)

    # -- temporalio.client.Plugin -------------------------------------------------------

    def configure_client(self, config: ClientConfig) -> ClientConfig:
        config["data_converter"] = self.data_converter(config.get("data_converter"))
        if self.tracing is not None and not _has_tracing(config.get("plugins", ())):
            config = self.tracing.configure_client(config)
        return config

    async def connect_service_client(
        self,
        config: ConnectConfig,
        next: Callable[[ConnectConfig], Awaitable[ServiceClient]],
    ) -> ServiceClient:
        return await next(config)

    # -- temporalio.worker.Plugin -------------------------------------------------------

    def configure_worker(self, config: WorkerConfig) -> WorkerConfig:
        client = config["client"]
        config["client"] = client = self._worker_client(client)
        if self.tracing is not None and not _has_tracing(client.config()["plugins"]):
            config = self.tracing.configure_worker(config)
        note_worker_converter(client.data_converter)
        task_queue = config["task_queue"]
        role = self.serves(task_queue)
        if role == "converter":
            _default(config, "graceful_shutdown_timeout", GRACEFUL_SHUTDOWN)
            return config
        assert self.registry is not None  # a role other than converter has one (__init__)
        workflows = list(config.get("workflows") or ())
        if PlanWorkflow in workflows:
            raise ValueError(
                "PlanWorkflow is registered on this worker already: DurablePlanPlugin is given "
                "twice (on the client and on the worker, say); a client's plugins apply to its "
                "workers, so give it to one of them"
            )
        store = _sealed_if_encrypting(worker_store(self.result_store), client)
        if role == "tools":
            served = self.registry.routed_to(task_queue)
            for key, limit in self.registry.queue_limits(task_queue).items():
                asked = config.get(key)
                if asked is None:
                    config[key] = limit  # type: ignore[literal-required]
                elif asked > limit:
                    raise ValueError(
                        f"{key}={asked} on the worker of task queue {task_queue!r} is above "
                        f"the limit its tools' owner set ({limit}: "
                        f"{', '.join(t.name for t in served)}); a worker may tighten a "
                        f"tool's limits, never loosen them: ask for at most {limit}, or "
                        "leave it unset"
                    )
            _default(config, "graceful_shutdown_timeout", GRACEFUL_SHUTDOWN)
            config["activities"] = [
                *(config.get("activities") or ()),
                *registry_activities(served, store),
            ]
            return config
        limited = [
            t.name for t in self.registry.routed_to(task_queue) if queue_limits([t], task_queue)
        ]
        if limited:
            raise ValueError(
                f"tools {limited} are limited and routed to {task_queue!r}, the plan's own "
                "queue: its limits would hold every tool and the plan's own activities; route "
                "them to a queue of their own and serve it with a worker of that queue"
            )
        _default(config, "sticky_queue_schedule_to_start_timeout", STICKY_TIMEOUT)
        _default(config, "graceful_shutdown_timeout", GRACEFUL_SHUTDOWN)
        config["workflows"] = [PlanWorkflow, AgentStepWorkflow, *workflows]
        config["activities"] = [
            # Tools routed elsewhere too: a plan started before their route keeps their
            # steps on this queue (its tool table says so) and must still find them.
            *registry_activities(self.registry, store),
            *claim_check_activities(store),
            recover_ledger,
            *(config.get("activities") or ()),
        ]
        return config

    def serves(self, task_queue: str) -> Literal["plans", "tools", "converter"]:
        """What this plugin registers on a worker of ``task_queue``."""
        if self.role != "auto":
            return self.role
        if self.registry is None:
            return "converter"
        return "tools" if task_queue in self.registry.task_queues() else "plans"

    async def run_worker(self, worker: Worker, next: Callable[[Worker], Awaitable[None]]) -> None:
        # The SDK gives a worker's activities the client it was constructed with; this one's
        # converter (keys, storage) is the one ``configure_worker`` chose.
        worker.client = worker.client
        # Sandbox tools call the factories StrandsPlugin registered on this worker, found now
        # that every plugin has configured it, whatever their order (``sandbox_calls``).
        bind_worker_sandboxes(worker.config(active_config=True).get("activities") or ())
        if self.serves(worker.config()["task_queue"]) != "plans":
            await next(worker)
            return
        # Before it polls, the worker learns whether plans a conversation starts on it may
        # keep the PlanStatus search attribute (``status_attribute``).
        await PlanStatusCheck().run_worker(worker, next)

    def configure_replayer(self, config: ReplayerConfig) -> ReplayerConfig:
        config["data_converter"] = self.data_converter(config.get("data_converter"))
        workflows = list(config.get("workflows") or ())
        if self.registry is not None and PlanWorkflow not in workflows:
            config["workflows"] = [PlanWorkflow, AgentStepWorkflow, *workflows]
        if self.tracing is not None:
            config = self.tracing.configure_replayer(config)
        return config

    @asynccontextmanager
    async def run_replayer(
        self,
        replayer: Replayer,
        histories: AsyncIterator[WorkflowHistory],
        next: Callable[
            [Replayer, AsyncIterator[WorkflowHistory]],
            AbstractAsyncContextManager[AsyncIterator[WorkflowReplayResult]],
        ],
    ) -> AsyncIterator[AsyncIterator[WorkflowReplayResult]]:
        async with next(replayer, histories) as results:
            yield results

    # -- internals ----------------------------------------------------------------------

    def _worker_client(self, client: temporalio.client.Client) -> temporalio.client.Client:
        """``client`` when its converter has this plugin's pieces (the plugin is on it, or
        its own plugins did the same), else a client on the same connection with this
        plugin added after its plugins (for this worker only)."""
        active = client.config(active_config=True)["data_converter"]
        if self.data_converter(active) is active:
            return client
        config = client.config()
        config["plugins"] = [*config["plugins"], self]
        return temporalio.client.Client(**config)


def _default(config: WorkerConfig, key: str, value: Any) -> None:
    """``value`` for ``key`` unless the user set it (it differs from the SDK's default)."""
    if config.get(key, _SDK_DEFAULTS.get(key)) == _SDK_DEFAULTS.get(key):
        config[key] = value  # type: ignore[literal-required]


def _has_tracing(plugins: Any) -> bool:
    from temporalio.contrib.opentelemetry import OpenTelemetryPlugin

    return any(isinstance(p, OpenTelemetryPlugin) for p in plugins)


def _sealed_if_encrypting(store: ResultStore, client: temporalio.client.Client) -> ResultStore:
    """With payload encryption on, results kept by reference are sealed with the same keys:
    history holds ciphertext only, so the store must not hold the plaintext."""
    from durable_plan.protect.converter import codec_of

    codec = codec_of(client.data_converter)
    if codec is None:
        return store
    from durable_plan.protect.sealed_store import SealedResultStore

    return SealedResultStore(store, codec.keyring)
