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

import asyncio
import contextlib
import dataclasses
import hashlib
import os
import tempfile
import time
import urllib.parse
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from temporalio.api.common.v1 import Payload
from temporalio.contrib.aws.s3driver import S3StorageDriver, S3StorageDriverClient
from temporalio.converter import (
    DataConverter,
    ExternalStorage,
    StorageDriver,
    StorageDriverActivityInfo,
    StorageDriverClaim,
    StorageDriverRetrieveContext,
    StorageDriverStoreContext,
    StorageDriverWorkflowInfo,
)
from temporalio.exceptions import ApplicationError
from temporalio.plugin import SimplePlugin

from durable_plan.protect.result_store import (
    HELD,
    file_mtime,
    read_file,
    remove_if_old,
    sweep_lock,
    sweepable_files,
)

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
SAME_STORE_FIX = (
    "give every worker and every client the same store: $DURABLE_PLAN_STORE (a directory "
    "or s3://bucket/prefix), set alike for all of them"
)


class StoredPayloadUnreadable(ApplicationError):
    """A reference in history this process cannot turn back into its payload: storage not
    configured here, another store, the object gone or altered. Non-retryable: a worker
    raising it while decoding a workflow task fails the workflow (the SDK fails the
    execution on a non-retryable ``ApplicationError``) instead of retrying the task forever,
    since no retry of this worker brings the payload back."""

    def __init__(self, message: str) -> None:
        super().__init__(message, type=type(self).__name__, non_retryable=True)


class MissingStoredPayload(StoredPayloadUnreadable):
    """A reference in history whose stored payload is gone (deleted, expired, elsewhere) or
    is not what was stored."""


MAX_SEGMENT_BYTES = 200
HASHED = "~"


def _segment(value: str | None) -> str:
    """A key segment: percent-encoded (dots too, so ``.`` and ``..`` stay names), and an
    id too long for a file name as ``~<digest>`` (the sweep keeps those: it cannot tell
    whose they are)."""
    text = urllib.parse.quote(value or "null", safe="").replace(".", "%2E") or "null"
    if len(text.encode()) > MAX_SEGMENT_BYTES:
        return HASHED + hashlib.sha256(text.encode()).hexdigest()[:40]
    return text


def payload_key(context: StorageDriverStoreContext, digest: str) -> str:
    """The SDK S3 driver's key layout, so a lifecycle rule or a sweep reads both drivers."""
    target = context.target
    if target is None:
        return f"v0/d/sha256/{digest}"
    parts = [f"v0/ns/{_segment(target.namespace)}"]
    if isinstance(target, StorageDriverWorkflowInfo):
        parts.append(f"wt/{_segment(target.type)}/wi/{_segment(target.id)}")
        parts.append(f"ri/{_segment(target.run_id)}")
    elif isinstance(target, StorageDriverActivityInfo):
        parts.append(f"at/{_segment(target.type)}/ai/{_segment(target.id)}")
        parts.append(f"ri/{_segment(target.run_id)}")
    return "/".join([*parts, f"d/sha256/{digest}"])


class FileStorageDriver(StorageDriver):
    """Payloads as files under ``root``: content-addressed, written to a temporary name
    and renamed, so a worker killed while storing leaves no half payload under a key (a
    retry stores it again, the same bytes under the same name). Storing bytes that are
    there already touches the file: a plan started again with the same id and input reuses
    the file, and a sweep must see it as new (it goes by modification time)."""

    def __init__(self, root: str | Path, name: str = "durable-plan.file") -> None:
        self.root = Path(root)
        self._name = name

    def name(self) -> str:
        return self._name

    def type(self) -> str:
        return "durable-plan.file"

    async def store(
        self, context: StorageDriverStoreContext, payloads: Sequence[Payload]
    ) -> list[StorageDriverClaim]:
        return await asyncio.to_thread(self._store_all, context, list(payloads))

    def _store_all(
        self, context: StorageDriverStoreContext, payloads: list[Payload]
    ) -> list[StorageDriverClaim]:
        claims = []
        for payload in payloads:
            data = payload.SerializeToString()
            digest = hashlib.sha256(data).hexdigest()
            key = payload_key(context, digest)
            path = self.root / key
            if not _touched(path):
                path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
                fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".part-")
                os.close(fd)
                try:
                    self._write(Path(tmp), data)
                    os.replace(tmp, path)
                except BaseException:
                    Path(tmp).unlink(missing_ok=True)
                    raise
            claims.append(StorageDriverClaim({"key": key, "sha256": digest}))
        return claims

    async def retrieve(
        self, context: StorageDriverRetrieveContext, claims: Sequence[StorageDriverClaim]
    ) -> list[Payload]:
        return await asyncio.to_thread(self._retrieve_all, list(claims))

    def _write(self, path: Path, data: bytes) -> None:
        """The temporary file's bytes, on disk before it takes its name (a machine that
        crashes right after the rename must not leave an empty file under a key)."""
        with path.open("wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())

    def _retrieve_all(self, claims: list[StorageDriverClaim]) -> list[Payload]:
        payloads = []
        for claim in claims:
            key = str(claim.claim_data.get("key", ""))
            path = (self.root / key).resolve()
            if not path.is_relative_to(self.root.resolve()) or ".." in Path(key).parts:
                raise MissingStoredPayload(f"a stored payload's key leaves the store: {key!r}")
            data = read_file(path)  # held by a sweep: the held file, the digest checked
            if data is None:
                raise MissingStoredPayload(
                    f"the stored payload {key} is not in {self.root} (deleted by a sweep or a "
                    f"lifecycle rule, or this worker uses another store): {SAME_STORE_FIX}, and "
                    "start the plan again"
                )
            if hashlib.sha256(data).hexdigest() != claim.claim_data.get("sha256"):
                raise MissingStoredPayload(
                    f"the stored payload {key} in {self.root} does not match its digest (it "
                    "was altered after it was stored): start the plan again"
                )
            payload = Payload()
            payload.ParseFromString(data)
            payloads.append(payload)
        return payloads

    def sweep(
        self,
        older_than_s: float,
        running: Callable[[str], bool] | None,
        namespace: str | None = None,
        *,
        dry_run: bool = False,
        report: Callable[[str], None] | None = None,
    ) -> list[Path]:
        """Delete stored payloads older than ``older_than_s`` whose workflow is not running
        (for keys of ``namespace``; the others are kept). ``running=None``: by age alone.
        Payloads whose workflow cannot be told (activities', hashed ids) are kept unless by
        age alone. The deleted files (``dry_run``: those it would delete, deleting none;
        ``report`` hears each). One sweep at a time (`sweep_lock`: a second raises
        ``SweepRunning``).

        Each decision is made again just before its deletion, since plans start while the
        sweep walks: ``running(workflow_id)`` is asked once per workflow after the walk,
        right before that workflow's files go (pass a check that asks the server then, not
        a list taken earlier); and each file is held under another name while its age is
        read again (`remove_if_old`), so a file that a plan started again reused (and
        touched) meanwhile is put back, and one it finds gone it writes again. A file a
        killed sweep left held is put back and judged like the others."""
        base = self.root / "v0"
        if not base.is_dir():
            return []
        deadline = time.time() - older_than_s
        with contextlib.nullcontext() if dry_run else sweep_lock(self.root):
            owners: dict[str | None, list[Path]] = {}
            for path in sweepable_files(base, put_back_held=not dry_run):
                if not _is_payload_file(path) or file_mtime(path) > deadline:
                    continue
                owner = workflow_of(path.relative_to(self.root).as_posix())
                others = owner is None or (namespace is not None and owner[0] != namespace)
                if running is not None and others:
                    continue  # nobody to ask about, or another namespace's: kept
                owners.setdefault(owner[1] if owner else None, []).append(path)
            deleted: list[Path] = []
            for workflow_id, paths in sorted(owners.items(), key=lambda item: item[0] or ""):
                if running is not None and workflow_id is not None and running(workflow_id):
                    continue
                for path in paths:
                    if _delete_if_old(path, deadline, dry_run):
                        deleted.append(path)
                        if report is not None:
                            report(str(path))
        return deleted


def _touched(path: Path) -> bool:
    """Mark an existing file as just stored; False if there is none (or a sweep took it)."""
    try:
        os.utime(path)
    except FileNotFoundError:
        return False
    return True


def _delete_if_old(path: Path, deadline: float, dry_run: bool) -> bool:
    """`remove_if_old`; a temporary file (a killed write: no reader) is deleted as it is."""
    if dry_run:
        return file_mtime(path) <= deadline
    if path.name.startswith(".part-"):
        path.unlink(missing_ok=True)
        return True
    return remove_if_old(path, deadline)


def workflow_of(key: str) -> tuple[str, str] | None:
    """``(namespace, workflow id)`` of a workflow's key (``v0/ns/<ns>/wt/<type>/wi/<id>/...``,
    read by position), or None (an activity's, no target, a hashed id)."""
    parts = key.split("/")
    if len(parts) < 7 or parts[0] != "v0" or parts[1] != "ns" or parts[3] != "wt":
        return None
    if parts[5] != "wi" or parts[6].startswith(HASHED):
        return None
    return urllib.parse.unquote(parts[2]), urllib.parse.unquote(parts[6])


def _is_payload_file(path: Path) -> bool:
    """A stored payload (``.../d/sha256/<64 hex>``), a temporary one or (listed by a dry
    run) one a killed sweep held: all a sweep deletes."""
    if path.name.startswith((".part-", HELD)):
        return True
    return (
        path.parent.name == "sha256"
        and path.parent.parent.name == "d"
        and len(path.name) == 64
        and all(c in "0123456789abcdef" for c in path.name)
    )


class Boto3S3Client(S3StorageDriverClient):
    """The SDK S3 driver's client over boto3 (no aioboto3 dependency): each call in a
    thread."""

    def __init__(self, client: Any = None) -> None:
        import boto3  # type: ignore[import-untyped]

        self._client = client if client is not None else boto3.client("s3")

    async def put_object(self, *, bucket: str, key: str, data: bytes) -> None:
        await asyncio.to_thread(self._client.put_object, Bucket=bucket, Key=key, Body=data)

    async def object_exists(self, *, bucket: str, key: str) -> bool:
        """Always False, so the driver writes the object again even when it is there: a
        plan started again with the same id and input reuses its key, and a lifecycle rule
        expires by the object's last write. Skipped, the rule could expire the new run's
        input the day after it started."""
        return False

    async def get_object(self, *, bucket: str, key: str) -> bytes:
        from botocore.exceptions import ClientError  # type: ignore[import-untyped]

        try:
            response = await asyncio.to_thread(self._client.get_object, Bucket=bucket, Key=key)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
                raise NoSuchObject(f"s3://{bucket}/{key}") from None
            raise
        body: bytes = await asyncio.to_thread(response["Body"].read)
        return body

    def describe(self) -> Mapping[str, str]:
        region = getattr(getattr(self._client, "meta", None), "region_name", None)
        return {"region": region} if region else {}


class NoSuchObject(LookupError):
    """The bucket has no object under the key (`Boto3S3Client.get_object`)."""


class _S3Driver(S3StorageDriver):
    """The SDK's driver, with an object that is gone or altered a `MissingStoredPayload`
    (the workflow fails, naming it), not a ``RuntimeError`` that fails the workflow task
    again and again. Other errors (the network, credentials) stay retryable."""

    async def retrieve(
        self, context: StorageDriverRetrieveContext, claims: Sequence[StorageDriverClaim]
    ) -> list[Payload]:
        try:
            return await super().retrieve(context, claims)
        except RuntimeError as exc:
            if not isinstance(exc.__cause__, NoSuchObject):
                raise
            raise MissingStoredPayload(
                f"the stored payload {exc.__cause__} is not there (expired by a lifecycle rule "
                f"or deleted, or this worker uses another store): {SAME_STORE_FIX}, and start "
                "the plan again"
            ) from None
        except ValueError as exc:  # the driver's integrity checks
            raise MissingStoredPayload(f"{exc}: start the plan again") from None


def s3_driver(bucket: str, prefix: str = "", client: Any = None) -> StorageDriver:
    """The SDK's ``S3StorageDriver`` over boto3; ``prefix`` is put before its keys."""
    inner: S3StorageDriverClient = Boto3S3Client(client)
    if prefix:
        inner = _Prefixed(inner, prefix.strip("/") + "/")
    return _S3Driver(inner, bucket)


class _Prefixed(S3StorageDriverClient):
    """Keys under a prefix of the bucket (``s3://bucket/prefix``)."""

    def __init__(self, inner: S3StorageDriverClient, prefix: str) -> None:
        self._inner = inner
        self._prefix = prefix

    async def put_object(self, *, bucket: str, key: str, data: bytes) -> None:
        await self._inner.put_object(bucket=bucket, key=self._prefix + key, data=data)

    async def object_exists(self, *, bucket: str, key: str) -> bool:
        return await self._inner.object_exists(bucket=bucket, key=self._prefix + key)

    async def get_object(self, *, bucket: str, key: str) -> bytes:
        return await self._inner.get_object(bucket=bucket, key=self._prefix + key)

    def describe(self) -> Mapping[str, str]:
        return dict(self._inner.describe())


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
        guards of ``temporal/payload_limits.py`` read this: such a worker stores nothing)."""
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
