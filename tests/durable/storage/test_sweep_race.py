"""Issue 45, item 5: ``sweep-store`` never deletes what a plan started again still needs.

A plan id run again with the same input reuses the payload file of its input (content-
addressed; the client's key has no run id): the file must count as new (the driver touches
it), and the sweep asks about a file's owner again right before it deletes it (the list of
running workflows it took first is stale by then). The interleavings are made in order
here: the list is taken, the plan is started again, then the sweep walks. Also ``--dry-run``
(issue 46), which lists and deletes nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.common.v1 import Payload
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.converter import StorageDriverStoreContext, StorageDriverWorkflowInfo

from durable_plan import plan_worker, start_plan
from durable_plan.cli.commands.store import _sweep, running_plans, sweep_store
from durable_plan.cli.parser import build_parser
from durable_plan.protect.payload_file_driver import FileStorageDriver
from durable_plan.protect.payload_storage import (
    PAYLOADS_DIR,
    PayloadStoragePlugin,
    external_storage,
)
from durable_plan.protect.result_keys import owner_key, owner_record, plan_prefix, result_key
from durable_plan.protect.result_store import STORE_ENV, FileResultStore
from durable_plan.temporal.client.start import PlanHandle
from durable_plan.tools.registry import ToolRegistry

DAYS = 86400
BIG = 300 * 1024


async def size_of(doc: dict[str, Any]) -> dict[str, int]:
    return {"chars": len(doc["text"])}


def registry() -> ToolRegistry:
    reg = ToolRegistry()
    reg.add(size_of)
    return reg


PLAN = {"steps": [{"id": "n", "tool": "size_of", "args": {"doc": {"text": "q" * BIG}}}]}


def age(paths: list[Path], days: float) -> None:
    then = time.time() - days * DAYS
    for path in paths:
        os.utime(path, (then, then))


def inputs_of(root: Path, workflow_id: str) -> list[Path]:
    """The plan's input as the client stored it (its key has no run id: ``ri/null``)."""
    return [p for p in root.rglob("*/d/sha256/*") if f"/wi/{workflow_id}/ri/null/" in p.as_posix()]


def sweep_args(store: Path, temporal_target: str, *extra: str) -> argparse.Namespace:
    return build_parser().parse_args(
        [
            "sweep-store",
            "--older-than",
            "2d",
            "--store",
            str(store),
            "--address",
            temporal_target,
            *extra,
        ]
    )


async def start(client: Client, task_queue: str, workflow_id: str) -> PlanHandle:
    return await start_plan(
        client,
        PLAN,
        task_queue=task_queue,
        registry=registry(),
        workflow_id=workflow_id,
        max_result_bytes=BIG * 2,
        if_no_worker="ignore",
    )


async def ran_once_and_aged(
    client: Client, task_queue: str, workflow_id: str, payloads: Path
) -> list[Path]:
    """The plan's first run, done; its stored files made three days old."""
    async with plan_worker(client, task_queue=task_queue, registry=registry()):
        result = await (await start(client, task_queue, workflow_id)).result()
    assert result.ok, result.ledger
    (stored_input,) = inputs_of(payloads, workflow_id)
    age([p for p in payloads.rglob("*") if p.is_file()], 3)
    return [stored_input]


async def second_run_finishes(client: Client, task_queue: str, handle: PlanHandle) -> None:
    async with plan_worker(client, task_queue=task_queue, registry=registry()):
        result = await asyncio.wait_for(handle.result(), 30)
    assert result.ok, result.ledger
    description = await handle.handle.describe()
    assert description.status == WorkflowExecutionStatus.COMPLETED


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return tmp_path / "store"


@pytest.fixture
async def storing(temporal_target: str, store: Path) -> Client:
    driver = FileStorageDriver(store / PAYLOADS_DIR)
    return await Client.connect(
        temporal_target, plugins=[PayloadStoragePlugin(external_storage(driver))]
    )


async def test_a_plan_started_again_keeps_its_reused_input_through_an_age_only_sweep(
    storing: Client, temporal_target: str, task_queue: str, workflow_id: str, store: Path
) -> None:
    """``--no-running-check``: by age alone. The second run's input is the first run's
    file, three days old: the store touched it when it was reused, so it is new."""
    payloads = store / PAYLOADS_DIR
    (stored_input,) = await ran_once_and_aged(storing, task_queue, workflow_id, payloads)
    second = await start(storing, task_queue, workflow_id)  # no worker yet: it waits
    assert inputs_of(payloads, workflow_id) == [stored_input], "the same file, reused"
    code = sweep_store(sweep_args(store, temporal_target, "--no-running-check"))
    assert code == 0
    assert stored_input.exists(), "the reused input counts as new"
    await second_run_finishes(storing, task_queue, second)


async def test_the_sweep_asks_about_an_owner_again_right_before_deleting(
    storing: Client, temporal_target: str, task_queue: str, workflow_id: str, store: Path
) -> None:
    """The list of running workflows is taken, then the plan is started again, then the
    sweep walks. The reused file is made old again (as a run that reads an old file without
    storing it, a reset, would leave it): only asking the server again keeps it."""
    payloads = store / PAYLOADS_DIR
    (stored_input,) = await ran_once_and_aged(storing, task_queue, workflow_id, payloads)
    args = sweep_args(store, temporal_target)
    is_running = await running_plans(args)  # the plan is not running now
    second = await start(storing, task_queue, workflow_id)
    age([stored_input], 3)
    assert await asyncio.to_thread(_sweep, args, is_running) == 0
    assert stored_input.exists(), "its owner runs again: kept"
    await second_run_finishes(storing, task_queue, second)
    # Closed for good: the same sweep now deletes what is old.
    age([p for p in payloads.rglob("*") if p.is_file()], 3)
    is_running = await running_plans(args)
    await asyncio.to_thread(_sweep, args, is_running)
    assert not inputs_of(payloads, workflow_id)


def claim_context(workflow_id: str) -> StorageDriverStoreContext:
    return StorageDriverStoreContext(
        target=StorageDriverWorkflowInfo(namespace="default", id=workflow_id, type="T")
    )


async def test_a_file_reused_between_the_walk_and_its_deletion_is_kept(tmp_path: Path) -> None:
    """The owner's answer comes after the walk; a store reuses the file meanwhile (here:
    while the owner is asked). The file is held under another name while its age is read
    again, so the touch is seen and the file put back."""
    driver = FileStorageDriver(tmp_path)
    payload = Payload(metadata={"encoding": b"binary/plain"}, data=b"x" * 100)
    (claim,) = await driver.store(claim_context("wf"), [payload])
    path = tmp_path / claim.claim_data["key"]
    age([path], 3)
    stored_again: list[Any] = []

    def running(workflow_id: str) -> bool:
        stored_again.extend(driver._store_all(claim_context(workflow_id), [payload]))
        return False  # not running when asked; started again right after

    assert driver.sweep(2 * DAYS, running) == []
    assert stored_again == [claim] and path.exists(), "reused: kept"
    assert not [p for p in tmp_path.rglob(".sweep-*")], "nothing left held"
    age([path], 3)
    assert driver.sweep(2 * DAYS, lambda workflow_id: False) == [path]
    assert not path.exists()


async def test_a_reader_reads_a_file_a_sweep_holds(tmp_path: Path) -> None:
    """Held (renamed aside while the sweep reads its age again): read under the held name,
    at once (more cases in ``test_sweep_interleavings.py``)."""
    from temporalio.converter import StorageDriverRetrieveContext

    driver = FileStorageDriver(tmp_path)
    payload = Payload(metadata={"encoding": b"binary/plain"}, data=b"y" * 100)
    (claim,) = await driver.store(claim_context("wf"), [payload])
    path = tmp_path / claim.claim_data["key"]
    os.rename(path, path.with_name(".sweep-" + path.name))
    (back,) = await driver.retrieve(StorageDriverRetrieveContext(), [claim])
    assert back == payload


def test_a_result_written_again_after_the_walk_is_kept(tmp_path: Path) -> None:
    """The result store's sweep reads an object's age again right before deleting it."""
    store = FileResultStore(tmp_path)
    key = result_key("wf", "a", 1)
    store.put(owner_key(plan_prefix("wf")), owner_record("wf", None))
    store.put(key, b"old")
    age([Path(store.where(key))], 3)

    def running(workflow_id: str, chain: str | None) -> bool:
        store.put(key, b"again")  # a reset run writes the step's result again meanwhile
        return False

    assert store.sweep(2 * DAYS, running) == 0
    assert store.get(key) == b"again"


async def test_dry_run_lists_and_deletes_nothing(
    storing: Client,
    temporal_target: str,
    task_queue: str,
    workflow_id: str,
    store: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(STORE_ENV, raising=False)
    payloads = store / PAYLOADS_DIR
    await ran_once_and_aged(storing, task_queue, workflow_id, payloads)
    results = FileResultStore(store)
    key = result_key("wf-closed", "a", 1)
    results.put(key, b"kept by a closed plan")
    age([Path(results.where(key))], 3)
    before = sorted(p for p in store.rglob("*") if p.is_file())
    capsys.readouterr()

    args = sweep_args(store, temporal_target, "--dry-run")
    is_running = await running_plans(args)
    assert await asyncio.to_thread(_sweep, args, is_running) == 0
    out = capsys.readouterr().out.splitlines()
    assert sorted(p for p in store.rglob("*") if p.is_file()) == before, "nothing deleted"
    listed = {
        line.removeprefix("would delete ") for line in out if line.startswith("would delete /")
    }
    assert results.where(key) in listed
    old_payloads = {str(p) for p in payloads.rglob("*/d/sha256/*")}
    assert old_payloads and old_payloads <= listed, (old_payloads, listed)
    assert any(
        line.startswith("would delete 1 stored result(s)") and "nothing deleted" in line
        for line in out
    ), out
    # The same sweep for real deletes exactly what the dry run listed.
    args = sweep_args(store, temporal_target)
    await asyncio.to_thread(_sweep, args, await running_plans(args))
    gone = {str(p) for p in before} - {str(p) for p in store.rglob("*") if p.is_file()}
    assert gone - {str(Path(results.where(key)).parent.parent / "owner.json")} == listed


def test_an_s3_object_reused_is_written_again(s3_endpoint: str) -> None:
    """A lifecycle rule expires by the object's last write: reusing an object must write
    it again, as touching a file does."""
    from durable_plan.protect.payload_s3_driver import s3_driver
    from tests.support.helpers import s3_client

    s3 = s3_client(s3_endpoint)
    s3.create_bucket(Bucket="reuse")
    puts: list[str] = []

    class Counting:
        def __getattr__(self, name: str) -> Any:
            return getattr(s3, name)

        def put_object(self, **kwargs: Any) -> Any:
            puts.append(kwargs["Key"])
            return s3.put_object(**kwargs)

    driver = s3_driver("reuse", "p", client=Counting())
    payload = Payload(metadata={"encoding": b"binary/plain"}, data=b"z" * 100)
    first = asyncio.run(driver.store(claim_context("wf"), [payload]))
    again = asyncio.run(driver.store(claim_context("wf"), [payload]))
    assert first == again and len(puts) == 2 and puts[0] == puts[1]
