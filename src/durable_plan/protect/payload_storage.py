"""Large payloads of every kind out of history: Temporal's External Storage, configured once.

``temporalio.converter.ExternalStorage`` on the client's data converter stores every payload
above a threshold (256 KiB by default) through a driver and leaves a small reference in
history: model-call inputs and outputs, tool results, plan inputs, agent-step conversations,
whatever the SDK encodes. It runs after the codec, so with encryption on only ciphertext is
stored. ``PayloadStoragePlugin`` puts it on a client (and the workers built from it);
``connect`` adds it by default. Where payloads go follows ``$DURABLE_PLAN_STORE``, like the
result store: ``s3://bucket/prefix`` uses the SDK's ``S3StorageDriver`` (through boto3, which
we depend on already), anything else a directory, through ``FileStorageDriver``.

Keys follow the SDK's S3 layout (``v0/ns/<ns>/wt/<type>/wi/<workflow id>/ri/<run>/d/sha256/
<hex>``), so one retention rule reads both: an S3 lifecycle rule on the prefix, or the file
driver's ``sweep`` (which asks the server which workflows run, and keeps theirs).
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import os
import tempfile
import time
import urllib.parse
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

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
from temporalio.plugin import SimplePlugin

PAYLOADS_DIR = "payloads"
"""Under the store's root: what External Storage keeps (results stored by reference are
beside it)."""
DEFAULT_THRESHOLD = 256 * 1024
STORAGE_ENV = "DURABLE_PLAN_PAYLOAD_STORAGE"
"""``off`` turns External Storage off in ``connect`` (and the CLI, worker.py, client.py)."""


class MissingStoredPayload(RuntimeError):
    """A reference in history whose stored payload is gone (deleted, expired, elsewhere)."""


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
    retry stores it again, the same bytes under the same name)."""

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
            if not path.exists():
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
            key = claim.claim_data.get("key", "")
            path = (self.root / key).resolve()
            if not path.is_relative_to(self.root.resolve()) or ".." in Path(key).parts:
                raise MissingStoredPayload(f"a stored payload's key leaves the store: {key!r}")
            try:
                data = path.read_bytes()
            except FileNotFoundError:
                raise MissingStoredPayload(
                    f"the stored payload {key} is not in {self.root} (deleted by a sweep or a "
                    "lifecycle rule, or this worker uses another store: give every worker and "
                    "client the same $DURABLE_PLAN_STORE)"
                ) from None
            if hashlib.sha256(data).hexdigest() != claim.claim_data.get("sha256"):
                raise MissingStoredPayload(f"the stored payload {key} does not match its digest")
            payload = Payload()
            payload.ParseFromString(data)
            payloads.append(payload)
        return payloads

    def sweep(
        self,
        older_than_s: float,
        running: Callable[[str], bool] | None,
        namespace: str | None = None,
    ) -> list[Path]:
        """Delete stored payloads older than ``older_than_s`` whose workflow is not running
        (``running(workflow_id)``, asked once per workflow, for keys of ``namespace``; the
        others are kept). ``running=None``: by age alone. Payloads whose workflow cannot be
        told (activities', hashed ids) are kept unless by age alone. The deleted files."""
        base = self.root / "v0"
        if not base.is_dir():
            return []
        deadline = time.time() - older_than_s
        deleted: list[Path] = []
        verdicts: dict[str, bool] = {}
        for path in base.rglob("*"):
            if not path.is_file() or not _is_payload_file(path):
                continue
            if path.stat().st_mtime > deadline:
                continue
            if running is not None:
                owner = workflow_of(path.relative_to(self.root).as_posix())
                if owner is None or (namespace is not None and owner[0] != namespace):
                    continue
                if owner[1] not in verdicts:
                    verdicts[owner[1]] = running(owner[1])
                if verdicts[owner[1]]:
                    continue
            path.unlink(missing_ok=True)
            deleted.append(path)
        return deleted


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
    """A stored payload (``.../d/sha256/<64 hex>``) or a temporary one: all a sweep deletes."""
    if path.name.startswith(".part-"):
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
        from botocore.exceptions import ClientError  # type: ignore[import-untyped]

        try:
            await asyncio.to_thread(self._client.head_object, Bucket=bucket, Key=key)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
                return False
            raise
        return True

    async def get_object(self, *, bucket: str, key: str) -> bytes:
        response = await asyncio.to_thread(self._client.get_object, Bucket=bucket, Key=key)
        body: bytes = await asyncio.to_thread(response["Body"].read)
        return body

    def describe(self) -> Mapping[str, str]:
        region = getattr(getattr(self._client, "meta", None), "region_name", None)
        return {"region": region} if region else {}


def s3_driver(bucket: str, prefix: str = "", client: Any = None) -> StorageDriver:
    """The SDK's ``S3StorageDriver`` over boto3; ``prefix`` is put before its keys."""
    inner: S3StorageDriverClient = Boto3S3Client(client)
    if prefix:
        inner = _Prefixed(inner, prefix.strip("/") + "/")
    return S3StorageDriver(inner, bucket)


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


def external_storage(
    driver: StorageDriver | None = None, *, threshold: int = DEFAULT_THRESHOLD
) -> ExternalStorage:
    return ExternalStorage(drivers=[driver or storage_driver()], payload_size_threshold=threshold)


class PayloadStoragePlugin(SimplePlugin):
    """External Storage on a client and the workers built from it (and on a replayer)."""

    def __init__(self, storage: ExternalStorage | None = None) -> None:
        self.storage = storage or external_storage()
        super().__init__("durable-plan.PayloadStorage", data_converter=self._converter)

    def _converter(self, existing: DataConverter | None) -> DataConverter:
        base = existing or DataConverter.default
        return dataclasses.replace(base, external_storage=self.storage)


def storage_enabled(address: str | None = None, environ: Mapping[str, str] | None = None) -> bool:
    """On when ``DURABLE_PLAN_PAYLOAD_STORAGE=on``, or (unless it says ``off``) when
    ``$DURABLE_PLAN_STORE`` names the store every worker and client shares, or when the
    server is on this machine (the embedded default, a directory here, serves only it)."""
    from durable_plan.protect.result_store import STORE_ENV

    env = environ if environ is not None else os.environ
    setting = env.get(STORAGE_ENV, "").strip().lower()
    if setting in ("off", "0", "false"):
        return False
    if setting in ("on", "1", "true") or env.get(STORE_ENV):
        return True
    host = (address or "").rsplit(":", 1)[0].strip("[]")
    return host in ("localhost", "127.0.0.1", "::1")


def with_payload_storage(plugins: Iterable[Any], address: str | None = None) -> list[Any]:
    """``plugins`` plus ``PayloadStoragePlugin`` when storage is on (``storage_enabled``)
    and none is there yet."""
    listed = list(plugins)
    if not storage_enabled(address) or any(isinstance(p, PayloadStoragePlugin) for p in listed):
        return listed
    return [*listed, PayloadStoragePlugin()]
