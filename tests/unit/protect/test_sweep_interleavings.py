"""Issue 45, item 5 (review mend): a sweep racing readers, writers and another sweep.

Each interleaving is made in order, deterministically: a file-system step of the sweep (a
rename, an unlink, a ``stat``) is wrapped so that the other party acts right then.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.common.v1 import Payload
from temporalio.converter import (
    StorageDriverClaim,
    StorageDriverStoreContext,
    StorageDriverWorkflowInfo,
)
from temporalio.service import RPCError, RPCStatusCode

from durable_plan.cli.commands import CommandError
from durable_plan.cli.commands.store import _sweep
from durable_plan.cli.parser import build_parser
from durable_plan.protect import result_store, sweep_files
from durable_plan.protect.payload_file_driver import FileStorageDriver
from durable_plan.protect.payload_storage import PAYLOADS_DIR
from durable_plan.protect.result_keys import OWNER, owner_key, owner_record, plan_prefix, result_key
from durable_plan.protect.result_store import FileResultStore

DAYS = 86400
HELD = ".sweep-"


def age(paths: list[Path], days: float = 3) -> None:
    then = time.time() - days * DAYS
    for path in paths:
        os.utime(path, (then, then))


def context(workflow_id: str = "wf") -> StorageDriverStoreContext:
    return StorageDriverStoreContext(
        target=StorageDriverWorkflowInfo(namespace="default", id=workflow_id, type="T")
    )


PAYLOAD = Payload(metadata={"encoding": b"binary/plain"}, data=b"p" * 100)


async def stored(root: Path, workflow_id: str = "wf") -> tuple[StorageDriverClaim, Path]:
    (claim,) = await FileStorageDriver(root).store(context(workflow_id), [PAYLOAD])
    return claim, root / claim.claim_data["key"]


def held(path: Path) -> Path:
    return path.with_name(HELD + path.name)


def retrieve(driver: FileStorageDriver, claim: StorageDriverClaim) -> Payload:
    (back,) = driver._retrieve_all([claim])
    return back


def on_first(
    monkeypatch: pytest.MonkeyPatch, owner: Any, name: str, when: Callable[[Any], bool]
) -> Callable[[Callable[..., Any]], None]:
    """Run the decorated step (once) around the first call of ``owner.name`` that ``when``
    accepts (its first argument): the other party of the interleaving."""

    def install(step: Callable[..., Any]) -> None:
        original = getattr(owner, name)
        done: list[bool] = []

        def wrapped(first: Any, *args: Any, **kwargs: Any) -> Any:
            if done or not when(first):
                return original(first, *args, **kwargs)
            done.append(True)
            return step(original, first, *args, **kwargs)

        monkeypatch.setattr(owner, name, wrapped)

    return install


# -- readers --------------------------------------------------------------------------------


async def test_a_reader_finds_a_file_the_sweep_put_back_between_its_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sweep holds the file as the reader reads it, and puts it back before the reader
    looks for the held name: the reader looks under the file's own name once more (it
    gave up with MissingStoredPayload, non-retryable: the workflow failed for good)."""
    claim, path = await stored(tmp_path)

    @on_first(monkeypatch, Path, "read_bytes", lambda p: p == path)
    def read_while_held(original: Any, self: Path) -> bytes:
        os.rename(path, held(path))  # the sweep holds it
        try:
            return original(self)  # type: ignore[no-any-return]
        finally:
            os.rename(held(path), path)  # touched meanwhile: put back

    assert retrieve(FileStorageDriver(tmp_path), claim) == PAYLOAD


async def test_a_reader_reads_the_file_a_killed_sweep_left_held(tmp_path: Path) -> None:
    """A sweep killed while holding a file: the bytes are in ``.sweep-<name>``; the reader
    reads them (the digest is checked) where it waited 2 s and failed the plan."""
    claim, path = await stored(tmp_path)
    os.rename(path, held(path))
    started = time.monotonic()
    assert retrieve(FileStorageDriver(tmp_path), claim) == PAYLOAD
    assert time.monotonic() - started < 1.0, "no waiting"
    held(path).write_bytes(b"altered")
    with pytest.raises(Exception, match="does not match its digest"):
        retrieve(FileStorageDriver(tmp_path), claim)


def test_a_result_held_by_a_sweep_is_still_read(tmp_path: Path) -> None:
    store = FileResultStore(tmp_path)
    key = result_key("wf", "a", 1)
    store.put(key, b"result")
    path = Path(store.where(key))
    os.rename(path, held(path))
    assert store.get(key) == b"result"


# -- two sweeps, and a killed one -------------------------------------------------------------


async def test_a_second_sweep_refuses_while_one_runs(tmp_path: Path) -> None:
    _, path = await stored(tmp_path)
    age([path])
    driver = FileStorageDriver(tmp_path)
    with (
        sweep_files.sweep_lock(tmp_path),
        pytest.raises(sweep_files.SweepRunning, match="another sweep of"),
    ):
        driver.sweep(2 * DAYS, lambda workflow_id: False)
    assert path.exists()
    assert driver.sweep(2 * DAYS, lambda workflow_id: False, dry_run=True) == [path]
    assert driver.sweep(2 * DAYS, lambda workflow_id: False) == [path], "lock released"


async def test_a_sweep_leaves_a_file_held_by_another_sweep_that_is_deciding(
    tmp_path: Path,
) -> None:
    """Sweep A holds a file (a sweep not sharing the lock: another machine on a shared
    volume); sweep B runs meanwhile. B deleted A's held file unasked, and A, finding the
    file reused, crashed putting it back (FileNotFoundError) with the reused input gone."""
    _, path = await stored(tmp_path)
    age([path])
    os.rename(path, held(path))  # A holds it
    assert FileStorageDriver(tmp_path).sweep(2 * DAYS, lambda workflow_id: False) == []
    assert held(path).exists(), "within its grace period: left to A"
    os.utime(held(path))  # reused meanwhile: A puts it back
    sweep_files.put_back(held(path), path)
    assert path.exists() and not held(path).exists()


async def test_a_held_file_gone_when_the_sweep_puts_it_back_stops_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sweep finds its held file reused and puts it back, but the held file is gone
    (another party took it): the sweep goes on (it raised FileNotFoundError and stopped)."""
    _, path = await stored(tmp_path)
    _, other = await stored(tmp_path, "wf-2")
    age([path, other])

    @on_first(monkeypatch, Path, "stat", lambda p: p.name == HELD + path.name)
    def reused_then_taken(original: Any, self: Path, *args: Any, **kwargs: Any) -> Any:
        os.utime(self)  # reused (touched) before the sweep reads its age again
        info = original(self, *args, **kwargs)
        os.unlink(self)  # and taken by someone else before the sweep puts it back
        return info

    deleted = FileStorageDriver(tmp_path).sweep(2 * DAYS, lambda workflow_id: False)
    assert deleted == [other], "the other workflow's file is still swept"


async def test_a_file_a_killed_sweep_left_held_is_judged_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past its grace period, a held file goes back under its own name and its owner is
    asked (it was deleted unasked): a running workflow's is kept, a finished one's goes."""
    monkeypatch.setattr(sweep_files, "HELD_GRACE_S", -1.0)
    _, path = await stored(tmp_path, "running")
    _, done = await stored(tmp_path, "finished")
    age([path, done])
    os.rename(path, held(path))
    os.rename(done, held(done))
    driver = FileStorageDriver(tmp_path)
    assert driver.sweep(2 * DAYS, lambda workflow_id: workflow_id == "running") == [done]
    assert path.exists() and not held(path).exists() and not held(done).exists()


# -- the result store -----------------------------------------------------------------------


def test_a_result_written_again_right_before_its_deletion_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reset run writes the key again after the sweep read its age and before it deletes
    it: the new result stays (it was the one deleted)."""
    store = FileResultStore(tmp_path)
    key = result_key("wf", "a", 1)
    store.put(key, b"old")
    age([Path(store.where(key))])
    name = Path(store.where(key)).name

    @on_first(monkeypatch, Path, "unlink", lambda p: p.name in (name, HELD + name))
    def written_again(original: Any, self: Path, *args: Any, **kwargs: Any) -> Any:
        store.put(key, b"again")
        return original(self, *args, **kwargs)

    store.sweep(2 * DAYS)
    assert store.get(key) == b"again"


def test_a_result_stored_while_the_owner_goes_brings_the_owner_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sweep empties a prefix and takes its owner record away; a worker that wrote the
    record before (and so never writes it again) stores a result right then. The sweep
    stopped on "directory not empty", and the record stayed gone: later sweeps judged the
    prefix by age alone, deleting a running plan's results."""
    store = FileResultStore(tmp_path)
    prefix = plan_prefix("wf")
    store.put(owner_key(prefix), owner_record("wf", None))
    store.put(result_key("wf", "a", 1), b"old")
    age([Path(store.where(result_key("wf", "a", 1)))])
    owner = tmp_path / prefix / OWNER
    new = result_key("wf", "b", 1)

    def after(original: Any, first: Any, *args: Any, **kwargs: Any) -> Any:
        done = original(first, *args, **kwargs)
        store.put(new, b"a reset run's")
        return done

    on_first(monkeypatch, Path, "unlink", lambda p: p == owner)(after)
    on_first(monkeypatch, os, "rename", lambda p: Path(p) == owner)(after)
    assert store.sweep(2 * DAYS, lambda workflow_id, chain: False) == 1
    assert store.get(new) == b"a reset run's"
    assert store.get(owner_key(prefix)) == owner_record("wf", None), "the owner is back"
    age([Path(store.where(new))])
    assert store.sweep(2 * DAYS, lambda workflow_id, chain: workflow_id == "wf") == 0


def test_an_owner_record_kept_while_a_result_is_in_flight(tmp_path: Path) -> None:
    """A put's temporary file counts as a result: the record stays."""
    store = FileResultStore(tmp_path)
    prefix = plan_prefix("wf")
    store.put(owner_key(prefix), owner_record("wf", None))
    (tmp_path / prefix / "b").mkdir()
    (tmp_path / prefix / "b" / ".1.abc.part").write_bytes(b"half")
    result_store._drop_owner_if_alone(store, prefix)
    assert (tmp_path / prefix / OWNER).exists()


# -- the command's errors -------------------------------------------------------------------


def sweep_args(store: Path) -> argparse.Namespace:
    return build_parser().parse_args(
        ["sweep-store", "--older-than", "2d", "--store", str(store), "--address", "nowhere:1"]
    )


def raising(exc: BaseException) -> Callable[[str, str | None], bool]:
    def is_running(workflow_id: str, chain: str | None) -> bool:
        raise exc

    return is_running


def test_a_timeout_asking_about_a_plan_is_one_line_naming_it(tmp_path: Path) -> None:
    store = FileResultStore(tmp_path)
    store.put(owner_key(plan_prefix("wf")), owner_record("wf", None))
    store.put(result_key("wf", "a", 1), b"old")
    age([Path(store.where(result_key("wf", "a", 1)))])
    with pytest.raises(CommandError) as err:
        _sweep(sweep_args(tmp_path), raising(TimeoutError()))
    message = str(err.value)
    assert "could not be swept" in message and "TimeoutError" in message, message
    assert "\n" not in message


async def test_a_server_error_while_sweeping_payloads_is_one_line(tmp_path: Path) -> None:
    """The payload sweep's owner check failing (an RPCError, a timeout) or its rename (an
    OSError) escaped as a traceback."""
    _, path = await stored(tmp_path / PAYLOADS_DIR)
    age([path])
    error = RPCError("the namespace is unavailable", RPCStatusCode.UNAVAILABLE, b"")
    with pytest.raises(CommandError) as err:
        _sweep(sweep_args(tmp_path), raising(error))
    message = str(err.value)
    assert "payloads could not be swept" in message and "RPCError" in message, message
    assert "namespace is unavailable" in message and "\n" not in message
    assert path.exists()
    with sweep_files.sweep_lock(tmp_path / PAYLOADS_DIR), pytest.raises(CommandError) as err:
        _sweep(sweep_args(tmp_path), lambda workflow_id, chain: False)
    assert "another sweep of" in str(err.value)


def test_sweeps_import_and_run_without_fcntl(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``import fcntl`` at the top made the result store (and 22 modules through it)
    unimportable where there is none (Windows): a sweep there runs unlocked."""
    monkeypatch.setattr(sweep_files, "fcntl", None)
    with sweep_files.sweep_lock(tmp_path):
        pass
