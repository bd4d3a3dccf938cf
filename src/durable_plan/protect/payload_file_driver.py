"""External Storage's file driver: payloads as files under one directory, and its sweep.

Apart from the configuration (``payload_storage.py``) because it is one driver among
others (``payload_s3_driver.py``): how payloads are written (a temporary file renamed into
place), read back (checked against their digest), keyed (the SDK's S3 layout, so one
retention rule reads both drivers) and swept by age, keeping the payloads of workflows
the server says still run.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import tempfile
import time
import urllib.parse
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from temporalio.api.common.v1 import Payload
from temporalio.converter import (
    StorageDriver,
    StorageDriverActivityInfo,
    StorageDriverClaim,
    StorageDriverRetrieveContext,
    StorageDriverStoreContext,
    StorageDriverWorkflowInfo,
)

from durable_plan.protect.payload_errors import SAME_STORE_FIX, MissingStoredPayload
from durable_plan.protect.sweep_files import (
    HELD,
    file_mtime,
    read_file,
    remove_if_old,
    sweep_lock,
    sweepable_files,
)

if TYPE_CHECKING:
    pass

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
