"""Where large step results live outside Temporal's history: a small store protocol, a
local-filesystem store (the embedded default) and an S3 store (deployments).

Every result a plan stores is under one key prefix per plan run (a digest of
its workflow id and the id of the first run of its chain, so a second plan
started later with the same workflow id neither reads nor deletes the first
one's, while a reset run keeps its own), so the plan's clean-up deletes one
prefix, and a tool's activity can refuse a reference that does not belong to
the plan it serves. Keys are ``<plan digest>/<step id>/<attempt>``: a retried
step writes a new object and never collides with what an earlier attempt left.
Beside them, ``<plan digest>/owner.json`` names the workflow (not a result: it
holds no data of the plan), so a retention sweep can ask the server whether
the plan is still running, and never deletes the results of one that waits,
say, a week for an approval.

Stores are called from activities only (never from workflow code), through
``asyncio.to_thread``: their methods are plain blocking calls. The keys and the owner
record are in ``result_keys.py``; a sweep's file steps, in ``sweep_files.py``.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from durable_plan.protect.result_keys import (
    _PREFIX,
    _STORED_KEY,
    OWNER,
    _checked_key,
    _owner_of,
    owner_key,
)
from durable_plan.protect.sweep_files import (
    HELD,
    IsRunning,
    Report,
    file_mtime,
    put_back,
    read_file,
    remove_if_old,
    sweep_lock,
    sweepable_files,
)

STORE_ENV = "DURABLE_PLAN_STORE"
"""A directory, or ``s3://bucket/prefix``: the store ``store_from_env`` builds."""


class StoredResultMissing(LookupError):
    """The store has no object under the key (deleted, expired, or another store)."""


class StoredResultUnreadable(RuntimeError):
    """The store has the object but this process cannot read it (sealed with keys it lacks)."""


@runtime_checkable
class ResultStore(Protocol):
    """What the claim check needs from a store. Keys are ``/``-separated, URL-safe."""

    def put(self, key: str, data: bytes) -> None: ...

    def get(self, key: str) -> bytes:
        """The object's bytes; ``StoredResultMissing`` if there is none."""
        ...

    def delete_prefix(self, prefix: str) -> int:
        """Delete every object whose key starts with ``prefix + "/"``; how many."""
        ...

    def where(self, key: str) -> str:
        """Where the object lives, for error messages (a path, an s3:// URL)."""
        ...


class FileResultStore:
    """Results as files under ``root`` (created on first use).

    For one machine, or workers sharing a volume: a worker on another machine
    with its own disk cannot read what this one wrote (that step then fails,
    naming the path). Writes go to a temporary file that is renamed into place,
    so a reader never sees half an object.
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)

    def _path(self, key: str) -> Path:
        return self.root / _checked_key(key)

    def put(self, key: str, data: bytes) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f".{path.name}.{uuid.uuid4().hex}.part")
        try:
            partial.write_bytes(data)
            os.replace(partial, path)
        finally:
            partial.unlink(missing_ok=True)

    def get(self, key: str) -> bytes:
        data = read_file(self._path(key))
        if data is None:
            raise StoredResultMissing(f"no file {self._path(key)}")
        return data

    def delete_prefix(self, prefix: str) -> int:
        top = self._path(prefix)
        count = 0
        if not top.is_dir():
            return 0
        for path in sorted(top.rglob("*"), key=lambda p: len(p.parts), reverse=True):
            if path.is_dir():
                path.rmdir()
            else:
                path.unlink(missing_ok=True)
                count += 1
        top.rmdir()
        return count

    def sweep(
        self,
        older_than_s: float,
        is_running: IsRunning | None = None,
        *,
        dry_run: bool = False,
        report: Report | None = None,
    ) -> int:
        """Retention: delete objects written more than ``older_than_s`` ago (what plans
        kept with ``keep_stored_results``, or left by a terminated workflow), except those
        of a plan ``is_running`` says is still running (None: by age alone). How many
        (``dry_run``: how many it would delete, deleting nothing; ``report`` hears each).

        A plan's owner is asked once, after its old objects are found and right before they
        go, and each object's age is read again then: a plan that started (or was reset)
        while the sweep walked keeps what it uses."""
        cutoff = time.time() - older_than_s
        if not self.root.is_dir():
            return 0
        count = 0
        swept: list[str] = []
        with contextlib.nullcontext() if dry_run else sweep_lock(self.root):
            for top in sorted(self.root.iterdir()):
                if not top.is_dir() or not _PREFIX.fullmatch(top.name):
                    continue
                old = [
                    path
                    for path in sweepable_files(top, put_back_held=not dry_run)
                    if _STORED_KEY.fullmatch(path.relative_to(self.root).as_posix())
                    and file_mtime(path) <= cutoff
                ]
                if not old or _keeps(self, top.name, is_running):
                    continue
                swept.append(top.name)
                for path in old:
                    if (file_mtime(path) <= cutoff) if dry_run else remove_if_old(path, cutoff):
                        count += 1
                        if report is not None:
                            report(str(path))
            _drop_owners(self, swept, dry_run)
        return count

    def where(self, key: str) -> str:
        return str(self._path(key))

    def __repr__(self) -> str:
        return f"FileResultStore({str(self.root)!r})"


class S3ResultStore:
    """Results as objects in an S3 bucket (or any S3-compatible service), under ``prefix``.

    ``client``: a boto3 S3 client; without one, ``boto3.client("s3", **client_kwargs)``
    is made on first use (credentials and region as boto3 finds them; ``endpoint_url``
    for S3-compatible services). For retention of kept results, an S3 lifecycle rule
    on the prefix is the usual tool; ``sweep`` does the same by hand.
    """

    def __init__(
        self, bucket: str, prefix: str = "", *, client: Any = None, **client_kwargs: Any
    ) -> None:
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self._client = client
        self._client_kwargs = client_kwargs
        self._client_lock = threading.Lock()

    @property
    def client(self) -> Any:
        # Made once under a lock: steps' activities reach here from several threads, and
        # boto3's default session is not safe to build clients on concurrently.
        with self._client_lock:
            if self._client is None:
                import boto3  # type: ignore[import-untyped]

                self._client = boto3.session.Session().client("s3", **self._client_kwargs)
            return self._client

    def _key(self, key: str) -> str:
        key = _checked_key(key)
        return f"{self.prefix}/{key}" if self.prefix else key

    def put(self, key: str, data: bytes) -> None:
        self.client.put_object(Bucket=self.bucket, Key=self._key(key), Body=data)

    def get(self, key: str) -> bytes:
        try:
            response = self.client.get_object(Bucket=self.bucket, Key=self._key(key))
        except self.client.exceptions.NoSuchKey:
            raise StoredResultMissing(f"no object {self.where(key)}") from None
        data: bytes = response["Body"].read()
        return data

    def _delete(
        self,
        list_prefix: str,
        keep: Any = None,
        dry_run: bool = False,
        report: Report | None = None,
    ) -> int:
        count = 0
        paginator = self.client.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=self.bucket, Prefix=list_prefix):
            keys = [
                {"Key": item["Key"]}
                for item in page.get("Contents", ())
                if keep is None or not keep(item)
            ]
            if report is not None:
                for key in keys:
                    report(f"s3://{self.bucket}/{key['Key']}")
            if dry_run:
                count += len(keys)
                continue
            for start in range(0, len(keys), 1000):  # delete_objects takes 1,000 at most
                batch = keys[start : start + 1000]
                response = self.client.delete_objects(
                    Bucket=self.bucket, Delete={"Objects": batch, "Quiet": True}
                )
                count += len(batch) - len(response.get("Errors") or ())
        return count

    def delete_prefix(self, prefix: str) -> int:
        return self._delete(self._key(prefix) + "/")

    def sweep(
        self,
        older_than_s: float,
        is_running: IsRunning | None = None,
        *,
        dry_run: bool = False,
        report: Report | None = None,
    ) -> int:
        """Retention by hand: delete objects under the prefix older than ``older_than_s``,
        except those of a plan ``is_running`` says is still running (asked when the first
        of its objects is listed, right before that page's deletions). ``dry_run`` and
        ``report`` as for `FileResultStore.sweep`."""
        cutoff = time.time() - older_than_s
        base = f"{self.prefix}/" if self.prefix else ""
        base_len = len(base)
        kept_prefixes: dict[str, bool] = {}

        def keep(item: dict[str, Any]) -> bool:
            key = item["Key"][base_len:]
            if not _STORED_KEY.fullmatch(key):
                return True  # not a stored result: never ours to delete
            if item["LastModified"].timestamp() >= cutoff:
                return True
            prefix = key.split("/", 1)[0]
            if prefix not in kept_prefixes:
                kept_prefixes[prefix] = _keeps(self, prefix, is_running)
            return kept_prefixes[prefix]

        count = self._delete(base, keep=keep, dry_run=dry_run, report=report)
        _drop_owners(self, [p for p, kept in kept_prefixes.items() if not kept], dry_run)
        return count

    def keys(self, prefix: str) -> list[str]:
        """The keys under ``prefix`` (for the sweep's owner check)."""
        paginator = self.client.get_paginator("list_objects_v2")
        base = self._key(prefix) + "/"
        strip = len(self.prefix) + 1 if self.prefix else 0
        return [
            item["Key"][strip:]
            for page in paginator.paginate(Bucket=self.bucket, Prefix=base)
            for item in page.get("Contents", ())
        ]

    def delete(self, key: str) -> None:
        self.client.delete_object(Bucket=self.bucket, Key=self._key(key))

    def where(self, key: str) -> str:
        return f"s3://{self.bucket}/{self._key(key)}"

    def __repr__(self) -> str:
        return f"S3ResultStore({self.bucket!r}, {self.prefix!r})"


def _keeps(store: Any, prefix: str, is_running: IsRunning | None) -> bool:
    """True when the sweep must keep ``prefix``'s objects: its plan is still running."""
    if is_running is None:
        return False
    try:
        owner = _owner_of(store.get(owner_key(prefix)))
    except StoredResultMissing:
        return False  # stored by a version that wrote no owner: by age, as it was
    if owner is None:
        return False
    return is_running(*owner)


def _drop_owners(store: Any, prefixes: list[str], dry_run: bool) -> None:
    """After a sweep (not a dry run): the owner records of the prefixes it emptied."""
    for prefix in prefixes if not dry_run else ():
        _drop_owner_if_alone(store, prefix)


def _drop_owner_if_alone(store: Any, prefix: str) -> None:
    """After a sweep: the owner record goes with the last of its prefix's results.

    A worker writes a prefix's owner once per process (``claim_check._OWNERS_WRITTEN``), so
    a result a reset run stores while the record goes is not followed by a new record, and
    later sweeps would judge that prefix by age alone (a plan waiting a week for a person
    would lose it). So the prefix is looked at again after the record is taken away, and a
    result found then brings the record back. (A put that starts after that second look
    still lands without one: closing that needs the writer's help.)"""
    if isinstance(store, FileResultStore):
        top = store.root / prefix
        if _results_in(top):
            return
        owner = top / OWNER
        held = owner.with_name(HELD + OWNER)
        try:
            os.rename(owner, held)  # held, not deleted: readers still find it meanwhile
        except FileNotFoundError:
            return
        if _results_in(top):
            put_back(held, owner)
            return
        held.unlink(missing_ok=True)
        for path in sorted(top.rglob("*"), key=lambda p: len(p.parts), reverse=True):
            with contextlib.suppress(OSError):  # a put racing in: its directory stays
                if path.is_dir():
                    path.rmdir()
        with contextlib.suppress(OSError):
            top.rmdir()
    elif isinstance(store, S3ResultStore):
        if any(not k.endswith("/" + OWNER) for k in store.keys(prefix)):
            return
        try:
            record = store.get(owner_key(prefix))
        except StoredResultMissing:
            return
        store.delete(owner_key(prefix))
        if any(not k.endswith("/" + OWNER) for k in store.keys(prefix)):
            store.put(owner_key(prefix), record)


def _results_in(top: Path) -> bool:
    """Any file under a prefix's directory but its owner record: a result, a put in flight
    (its temporary file), a result a killed sweep held."""
    return any(p.is_file() and p.name not in (OWNER, HELD + OWNER) for p in top.rglob("*"))


def default_root() -> Path:
    """Where the embedded default keeps results: ``durable-plan-results-<uid>`` in the temp
    dir, made readable by its owner only (results may be private; on a shared machine
    another user must neither read them nor plant links in it)."""
    root = Path(tempfile.gettempdir()) / f"durable-plan-results-{os.getuid()}"
    root.mkdir(mode=0o700, exist_ok=True)
    info = root.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise RuntimeError(
            f"{root} is not a directory of this user's; set DURABLE_PLAN_STORE to a "
            "directory of your own"
        )
    return root


def store_from_env(value: str | None = None) -> ResultStore:
    """The store ``$DURABLE_PLAN_STORE`` names (or ``value``): ``s3://bucket/prefix`` for
    S3, any other text a directory; unset, a directory in the temp dir (one machine)."""
    spec = value if value is not None else os.environ.get(STORE_ENV, "")
    if spec.startswith("s3://"):
        bucket, _, prefix = spec[len("s3://") :].partition("/")
        if not bucket:
            raise ValueError(f"{STORE_ENV}={spec!r}: name a bucket, s3://bucket/prefix")
        return S3ResultStore(bucket, prefix)
    return FileResultStore(spec or default_root())
