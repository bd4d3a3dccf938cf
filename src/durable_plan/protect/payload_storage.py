"""Large payloads of every kind out of history: Temporal's External Storage, configured once.

``temporalio.converter.ExternalStorage`` on the client's data converter stores every payload
above a threshold (256 KiB by default) through a driver and leaves a small reference in
history: model-call inputs and outputs, tool results, plan inputs, agent-step conversations,
whatever the SDK encodes. It runs after the codec, so with encryption on only ciphertext is
stored. ``PayloadStoragePlugin`` puts it on a client (and the workers built from it).
Where payloads go follows ``$DURABLE_PLAN_STORE``, like the result store: ``s3://bucket/prefix``
uses the SDK's ``S3StorageDriver`` (through boto3, which we depend on already), anything else a
directory, through ``FileStorageDriver``.

Whether it is on is said, never guessed (``storage_setting``): ``$DURABLE_PLAN_STORE`` set, or
``DURABLE_PLAN_PAYLOAD_STORAGE=on`` (this machine's default directory), or an argument
(``connect(payload_storage=...)``; the processes that start their own server and worker, the
offline demo and ``durable-plan run``, pass it). How the server's address is written says
nothing about where the workers are: a client on ``localhost:P`` through a port-forward and a
worker reaching the same server by its host name must agree, so the address plays no part.
With nothing said, storage is off in every process (they agree), and payloads stay in history
as Temporal keeps them. A process with storage off still carries an External Storage that
stores nothing (``unconfigured_storage``): a reference written by a process with storage on
then fails the workflow, naming the payload and the fix, where the SDK alone would fail its
workflow task forever (``TMPRL1105``). The same for a stored payload that is gone or altered:
``StoredPayloadUnreadable`` is a non-retryable ``ApplicationError``, which the worker turns
into the workflow's failure (an activity's arguments: the step's).

Keys follow the SDK's S3 layout (``v0/ns/<ns>/wt/<type>/wi/<workflow id>/ri/<run>/d/sha256/
<hex>``), so one retention rule reads both: an S3 lifecycle rule on the prefix, or the file
driver's ``sweep`` (which asks the server which workflows run, and keeps theirs).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from temporalio.api.common.v1 import Payload
from temporalio.converter import (
    DataConverter,
    ExternalStorage,
    StorageDriver,
    StorageDriverClaim,
    StorageDriverRetrieveContext,
    StorageDriverStoreContext,
)
from temporalio.plugin import SimplePlugin

from durable_plan.protect.payload_errors import SAME_STORE_FIX, StoredPayloadUnreadable
from durable_plan.protect.payload_file_driver import FileStorageDriver
from durable_plan.protect.payload_s3_driver import s3_driver

if TYPE_CHECKING:
    from temporalio.client import Client

PAYLOADS_DIR = "payloads"
"""Under the store's root: what External Storage keeps (results stored by reference are
beside it)."""
DEFAULT_THRESHOLD = 256 * 1024
STORAGE_ENV = "DURABLE_PLAN_PAYLOAD_STORAGE"
"""``on`` turns External Storage on in ``connect`` (and the CLI, worker.py, client.py) at the
default directory when ``$DURABLE_PLAN_STORE`` is unset; ``off`` keeps it off even when set."""
NEVER = 2**62
"""The threshold of a storage that stores nothing (reads only: `unconfigured_storage`)."""


def storage_driver(spec: str | None = None) -> StorageDriver:
    """The driver ``$DURABLE_PLAN_STORE`` names (or ``spec``): S3 for ``s3://bucket/prefix``,
    else files under ``<directory>/payloads`` (the result store's default directory)."""
    from durable_plan.protect.result_store import STORE_ENV, default_root

    value = spec if spec is not None else os.environ.get(STORE_ENV, "")
    if value.startswith("s3://"):
        bucket, _, prefix = value[len("s3://") :].partition("/")
        if not bucket:
            raise ValueError(f"{STORE_ENV}={value!r}: name a bucket, s3://bucket/prefix")
        return s3_driver(bucket, "/".join(p for p in (prefix.strip("/"), PAYLOADS_DIR) if p))
    root = Path(value) if value else default_root()
    return FileStorageDriver(root / PAYLOADS_DIR)


class _Storage(ExternalStorage):
    """Temporal's ``ExternalStorage``, except that a reference naming a driver this process
    does not have reads as a `StoredPayloadUnreadable` (the workflow fails, naming the
    payload and the fix) instead of the SDK's ``ValueError``, which fails the workflow
    task again and again. The SDK looks drivers up through ``_get_driver_by_name`` alone
    (temporalio 1.35, which we pin; ``test_payload_storage`` holds it)."""

    @property
    def stores_payloads(self) -> bool:
        """False for `unconfigured_storage`, which only refuses to read (the agent-step
        guards of ``temporal/wire/payload_limits.py`` read this: such a worker stores nothing)."""
        return not all(isinstance(d, _Unavailable) for d in self.drivers)

    def _get_driver_by_name(self, name: str) -> StorageDriver:
        driver = self._driver_map.get(name)
        if driver is not None:
            return driver
        return _Unavailable(
            name, [d.name() for d in self.drivers if not isinstance(d, _Unavailable)]
        )


class _Unavailable(StorageDriver):
    """Stands for a driver this process does not have: reading through it fails, saying
    which payload and what to set. Never stores (its storage's threshold is `NEVER`)."""

    def __init__(self, name: str, configured: Sequence[str] = ()) -> None:
        self._name = name
        self._configured = list(configured)

    def name(self) -> str:
        return self._name

    def type(self) -> str:
        return "durable-plan.unavailable"

    async def store(
        self, context: StorageDriverStoreContext, payloads: Sequence[Payload]
    ) -> list[StorageDriverClaim]:
        raise RuntimeError("External Storage is off in this process: nothing is stored")

    async def retrieve(
        self, context: StorageDriverRetrieveContext, claims: Sequence[StorageDriverClaim]
    ) -> list[Payload]:
        where = ", ".join(_claim_text(c) for c in claims)
        if self._configured:
            why = f"this process's External Storage has only {', '.join(self._configured)}"
        else:
            why = (
                f"this process has External Storage off (neither ${_store_env()} nor "
                f"{STORAGE_ENV}=on is set)"
            )
        raise StoredPayloadUnreadable(
            f"the payload {where} is stored outside history (External Storage, driver "
            f"{self._name!r}) and {why}: {SAME_STORE_FIX} (on one machine, "
            f"{STORAGE_ENV}=on uses the default directory), then start the plan again"
        )


def _claim_text(claim: StorageDriverClaim) -> str:
    data = claim.claim_data
    key = data.get("key", "?")
    return f"s3://{data['bucket']}/{key}" if "bucket" in data else str(key)


def _store_env() -> str:
    from durable_plan.protect.result_store import STORE_ENV

    return STORE_ENV


def external_storage(
    driver: StorageDriver | None = None, *, threshold: int = DEFAULT_THRESHOLD
) -> ExternalStorage:
    return _Storage(drivers=[driver or storage_driver()], payload_size_threshold=threshold)


def unconfigured_storage() -> ExternalStorage:
    """The External Storage of a process with storage off: stores nothing, and fails a
    workflow that holds a reference with a `StoredPayloadUnreadable` (which payload, what to
    set) where the SDK without one fails its workflow task forever (``TMPRL1105``)."""
    return _Storage(drivers=[_Unavailable("durable-plan.off")], payload_size_threshold=NEVER)


class PayloadStoragePlugin(SimplePlugin):
    """External Storage on a client and the workers built from it (and on a replayer)."""

    def __init__(self, storage: ExternalStorage | None = None) -> None:
        self.storage = storage or external_storage()
        super().__init__("durable-plan.PayloadStorage", data_converter=self._converter)

    def _converter(self, existing: DataConverter | None) -> DataConverter:
        base = existing or DataConverter.default
        if base.external_storage is not None and not getattr(self.storage, "stores_payloads", True):
            return base  # the converter's own storage stays; this one would only refuse
        return dataclasses.replace(base, external_storage=self.storage)


def storage_setting(
    explicit: bool | str | None = None, environ: Mapping[str, str] | None = None
) -> str | None:
    """Where External Storage stores (a spec for `storage_driver`; ``""``: the default
    directory), or None when it is off.

    ``explicit``: a store (a directory or ``s3://bucket/prefix``), or True (on, at
    ``$DURABLE_PLAN_STORE`` or the default directory: what a process that starts its own
    server and worker passes), or False (off). None: the environment says, the same in
    every process: on when ``$DURABLE_PLAN_STORE`` is set or ``DURABLE_PLAN_PAYLOAD_STORAGE
    =on``, off when it says ``off`` or nothing is set. Never the server's address: how it is
    written (``localhost`` through a port-forward, a host name) says nothing about where
    the workers are, and a client and a worker that chose differently left plans stuck."""
    from durable_plan.protect.result_store import STORE_ENV

    env = environ if environ is not None else os.environ
    store = env.get(STORE_ENV, "")
    if isinstance(explicit, str):
        return explicit
    if explicit is not None:
        return store if explicit else None
    setting = env.get(STORAGE_ENV, "").strip().lower()
    if setting in ("off", "0", "false"):
        return None
    if setting in ("on", "1", "true") or store:
        return store
    return None


def storage_plugin(explicit: bool | str | None = None) -> PayloadStoragePlugin:
    """The plugin `storage_setting` asks for: storing where it says, or (off) reading
    nothing, clearly (`unconfigured_storage`)."""
    spec = storage_setting(explicit)
    if spec is None:
        return PayloadStoragePlugin(unconfigured_storage())
    return PayloadStoragePlugin(external_storage(storage_driver(spec)))


def with_payload_storage(plugins: Iterable[Any], explicit: bool | str | None = None) -> list[Any]:
    """``plugins`` plus `storage_plugin` (``explicit`` as in `storage_setting`), unless one
    is there already."""
    listed = list(plugins)
    if any(isinstance(p, PayloadStoragePlugin) for p in listed):
        return listed
    return [*listed, storage_plugin(explicit)]


def readable_client(client: Client) -> Client:
    """``client``, or (its converter has no External Storage at all, as with a plain
    ``Client.connect``) a client on the same connection with `unconfigured_storage`: a
    worker built on it fails a workflow holding a reference, saying what to set, instead of
    failing its workflow task forever (``TMPRL1105``)."""
    from temporalio.client import Client

    if client.config(active_config=True)["data_converter"].external_storage is not None:
        return client
    config = client.config()
    config["plugins"] = [*config["plugins"], PayloadStoragePlugin(unconfigured_storage())]
    return Client(**config)
