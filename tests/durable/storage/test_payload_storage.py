"""Temporal's External Storage as we configure it: the file driver, the S3 driver over boto3
(against moto), and plans on the dev server whose large payloads leave history, with and
without encryption, and what a missing stored payload says."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.message import Message
from temporalio.api.common.v1 import Payload
from temporalio.client import Client
from temporalio.converter import (
    StorageDriver,
    StorageDriverClaim,
    StorageDriverRetrieveContext,
    StorageDriverStoreContext,
    StorageDriverWorkflowInfo,
)

from durable_plan import plan_worker, start_plan
from durable_plan.protect.encryption import EncryptionPlugin, Keyring
from durable_plan.protect.keys import new_key
from durable_plan.protect.payload_errors import MissingStoredPayload
from durable_plan.protect.payload_file_driver import FileStorageDriver, workflow_of
from durable_plan.protect.payload_s3_driver import s3_driver
from durable_plan.protect.payload_storage import (
    PayloadStoragePlugin,
    external_storage,
    storage_driver,
)
from durable_plan.tools.registry import ToolRegistry
from tests.support.helpers import s3_client as _s3_client

THRESHOLD = 64 * 1024


def context(workflow_id: str = "wf-1") -> StorageDriverStoreContext:
    target = StorageDriverWorkflowInfo(namespace="default", id=workflow_id, run_id="r1", type="T")
    return StorageDriverStoreContext(target=target)


def payload(data: bytes) -> Payload:
    return Payload(metadata={"encoding": b"binary/plain"}, data=data)


# -- the file driver -------------------------------------------------------------------------


async def test_the_file_driver_round_trips_by_content_and_leaves_no_part_files(
    tmp_path: Path,
) -> None:
    driver = FileStorageDriver(tmp_path)
    first, again = await driver.store(context(), [payload(b"a" * 10), payload(b"a" * 10)])
    assert first == again, "content-addressed: the same bytes, the same object"
    assert first.claim_data["key"].startswith("v0/ns/default/wt/T/wi/wf-1/ri/r1/d/sha256/")
    (back,) = await driver.retrieve(StorageDriverRetrieveContext(), [first])
    assert back.data == b"a" * 10
    assert not [p for p in tmp_path.rglob(".part-*")]
    assert workflow_of(first.claim_data["key"]) == ("default", "wf-1")
    (dots,) = await driver.store(context(".."), [payload(b"d")])
    assert "/wi/%2E%2E/" in dots.claim_data["key"], "'..' is a name, not a way out"
    assert workflow_of(dots.claim_data["key"]) == ("default", "..")
    (back,) = await driver.retrieve(StorageDriverRetrieveContext(), [dots])
    assert back.data == b"d"
    (long,) = await driver.store(context("p/" * 150), [payload(b"l")])
    assert workflow_of(long.claim_data["key"]) is None, "a hashed id is nobody's to sweep"


async def test_a_missing_or_altered_payload_is_named(tmp_path: Path) -> None:
    driver = FileStorageDriver(tmp_path)
    (claim,) = await driver.store(context(), [payload(b"x" * 100)])
    path = tmp_path / claim.claim_data["key"]
    path.write_bytes(payload(b"y" * 100).SerializeToString())
    with pytest.raises(MissingStoredPayload, match="does not match its digest"):
        await driver.retrieve(StorageDriverRetrieveContext(), [claim])
    path.unlink()
    with pytest.raises(MissingStoredPayload, match=f"{claim.claim_data['key']} is not in"):
        await driver.retrieve(StorageDriverRetrieveContext(), [claim])
    escape = StorageDriverClaim({"key": "../../etc/passwd", "sha256": "0"})
    with pytest.raises(MissingStoredPayload, match="leaves the store"):
        await driver.retrieve(StorageDriverRetrieveContext(), [escape])


async def test_the_sweep_keeps_running_workflows_payloads(tmp_path: Path) -> None:
    driver = FileStorageDriver(tmp_path)
    (done,) = await driver.store(context("finished"), [payload(b"1")])
    (live,) = await driver.store(context("running"), [payload(b"2")])
    old = time.time() - 7200
    for claim in (done, live):
        os.utime(tmp_path / claim.claim_data["key"], (old, old))
    asked: list[str] = []

    def running(workflow_id: str) -> bool:
        asked.append(workflow_id)
        return workflow_id == "running"

    assert driver.sweep(older_than_s=3600 * 3, running=running) == []
    deleted = driver.sweep(older_than_s=3600, running=running)
    assert [p.name for p in deleted] == [Path(done.claim_data["key"]).name]
    assert (tmp_path / live.claim_data["key"]).exists()
    assert sorted(asked) == ["finished", "running"]
    (other,) = await driver.store(context("finished"), [payload(b"3")])
    other_ns = tmp_path / other.claim_data["key"].replace("ns/default", "ns/elsewhere")
    other_ns.parent.mkdir(parents=True)
    (tmp_path / other.claim_data["key"]).rename(other_ns)
    (tmp_path / "v0" / "README").write_text("not a payload")
    for path in (other_ns, tmp_path / "v0" / "README"):
        os.utime(path, (old, old))
    assert driver.sweep(older_than_s=3600, running=running, namespace="default") == []
    assert other_ns.exists() and (tmp_path / "v0" / "README").exists()


def test_the_store_setting_chooses_the_driver(tmp_path: Path) -> None:
    driver = storage_driver(str(tmp_path))
    assert isinstance(driver, FileStorageDriver) and driver.root == tmp_path / "payloads"
    assert storage_driver("s3://bucket/plans").type() == "aws.s3driver"
    with pytest.raises(ValueError, match="name a bucket"):
        storage_driver("s3://")


# -- the S3 driver over boto3, against moto ----------------------------------------------------


async def test_the_s3_driver_round_trips_under_its_prefix(s3_endpoint: str) -> None:
    s3 = _s3_client(s3_endpoint)
    s3.create_bucket(Bucket="payloads")
    driver = s3_driver("payloads", "plans/payloads", client=s3)
    (claim,) = await driver.store(context(), [payload(b"z" * 1000)])
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket="payloads")["Contents"]]
    assert len(keys) == 1 and keys[0].startswith("plans/payloads/v0/ns/default/")
    (back,) = await driver.retrieve(StorageDriverRetrieveContext(), [claim])
    assert back.data == b"z" * 1000


# -- on the dev server -----------------------------------------------------------------------


async def big_text(kib: int) -> dict[str, Any]:
    return {"text": "secret-marker " + "q" * (kib * 1024)}


async def size_of(doc: dict[str, Any]) -> dict[str, int]:
    return {"chars": len(doc["text"])}


def registry() -> ToolRegistry:
    reg = ToolRegistry()
    reg.add(big_text)
    reg.add(size_of)
    return reg


PLAN = {
    "steps": [
        {"id": "doc", "tool": "big_text", "args": {"kib": 300}},
        {"id": "count", "tool": "size_of", "bind": {"doc": "steps.doc"}},
    ],
}


def stored_references(message: Message) -> int:
    """Payloads in a history that External Storage replaced by a reference."""
    if isinstance(message, Payload):
        return 1 if len(message.external_payloads) else 0
    count = 0
    for field, value in message.ListFields():
        if field.type != field.TYPE_MESSAGE:
            continue
        if field.message_type.GetOptions().map_entry:
            items = list(value.values())
        elif field.is_repeated:
            items = list(value)
        else:
            items = [value]
        count += sum(stored_references(item) for item in items if isinstance(item, Message))
    return count


async def run_with_storage(
    temporal_target: str, task_queue: str, root: Path | StorageDriver, *plugins: Any
) -> tuple[Any, int, int]:
    driver = FileStorageDriver(root) if isinstance(root, Path) else root
    storage = PayloadStoragePlugin(external_storage(driver, threshold=THRESHOLD))
    client = await Client.connect(temporal_target, plugins=[storage, *plugins])
    async with plan_worker(client, task_queue=task_queue, registry=registry()):
        handle = await start_plan(
            client,
            PLAN,
            task_queue=task_queue,
            registry=registry(),
            store_results=False,
            max_result_bytes=1024 * 1024,
        )
        result = await handle.result()
    history = await handle.handle.fetch_history()
    size = sum(e.ByteSize() for e in history.events)
    refs = sum(stored_references(e) for e in history.events)
    return result, size, refs


async def test_a_large_tool_result_leaves_history(
    temporal_target: str, task_queue: str, tmp_path: Path
) -> None:
    result, size, refs = await run_with_storage(temporal_target, task_queue, tmp_path)
    assert result.ok, result.ledger
    assert result.returned["count"] == {"chars": 14 + 300 * 1024}
    assert refs >= 2, "the result and the next step's arguments are references"
    assert size < 64 * 1024, f"history {size} bytes: the 300 KiB stayed out"
    assert list(tmp_path.rglob("*/d/sha256/*"))


async def test_with_encryption_only_ciphertext_is_stored(
    temporal_target: str, task_queue: str, tmp_path: Path
) -> None:
    keys = Keyring((new_key("k1"),))
    result, size, refs = await run_with_storage(
        temporal_target, task_queue, tmp_path, EncryptionPlugin(keys)
    )
    assert result.ok and refs >= 2 and size < 64 * 1024
    files = list(tmp_path.rglob("*/d/sha256/*"))
    assert files
    for file in files:
        assert b"secret-marker" not in file.read_bytes(), f"{file} holds plaintext"


async def test_a_missing_stored_result_fails_naming_it(
    temporal_target: str, task_queue: str, tmp_path: Path
) -> None:
    storage = PayloadStoragePlugin(
        external_storage(FileStorageDriver(tmp_path), threshold=THRESHOLD)
    )
    client = await Client.connect(temporal_target, plugins=[storage])
    plan = {"steps": [{"id": "doc", "tool": "big_text", "args": {"kib": 300}}]}
    async with plan_worker(client, task_queue=task_queue, registry=registry()):
        handle = await start_plan(
            client,
            plan,
            task_queue=task_queue,
            registry=registry(),
            store_results=False,
            max_result_bytes=1024 * 1024,
            max_returned_bytes=2 * 1024 * 1024,
        )
        await handle.handle.result()
    for file in tmp_path.rglob("*/d/sha256/*"):
        file.unlink()
    with pytest.raises(Exception) as caught:
        await handle.result()
    text = "".join(str(e) for e in _chain(caught.value))
    assert "is not in" in text and "d/sha256/" in text, text


def _chain(exc: BaseException | None) -> Iterator[BaseException]:
    while exc is not None:
        yield exc
        exc = exc.__cause__ or exc.__context__


async def test_a_conversations_model_calls_and_its_agent_steps_leave_history(
    temporal_target: str, task_queue: str, tmp_path: Path
) -> None:
    """Model-call inputs and outputs, the plan the model submits, the agent step's own
    conversation: every payload over the threshold (small here) is a reference."""
    from temporalio.strands_agents import StrandsPlugin

    from activities.scripts import DEMO_SCRIPTS, MORALE_PROMPT
    from durable_plan.testing import ScriptedModel
    from worker import build_worker
    from workflows.game_master import GameMasterInput, GameMasterWorkflow

    storage = PayloadStoragePlugin(external_storage(FileStorageDriver(tmp_path), threshold=2048))
    models = {"scripted": lambda: ScriptedModel(scripts=DEMO_SCRIPTS)}
    client = await Client.connect(temporal_target, plugins=[StrandsPlugin(models=models), storage])
    async with build_worker(client, task_queue):
        handle = await client.start_workflow(
            GameMasterWorkflow.run,
            GameMasterInput(prompt=MORALE_PROMPT),
            id=f"gm-storage-{task_queue}",
            task_queue=task_queue,
        )
        output = await handle.result()
        history = await handle.fetch_history()
        plan_id = next(
            e.start_child_workflow_execution_initiated_event_attributes.workflow_id
            for e in history.events
            if e.HasField("start_child_workflow_execution_initiated_event_attributes")
        )
        agent = await client.get_workflow_handle(f"{plan_id}/agent/morale").fetch_history()
    assert output.agent_step_rounds == 3 and "flees" in json.dumps(output.answer)
    start = next(
        e
        for e in history.events
        if e.HasField("start_child_workflow_execution_initiated_event_attributes")
    )
    assert stored_references(start) == 1, "the plan's input (its tool table) is a reference"
    assert sum(stored_references(e) for e in history.events) >= 2, "model calls"
    assert sum(stored_references(e) for e in agent.events) >= 2, "the agent step's rounds"


async def test_a_plan_through_the_s3_driver(
    temporal_target: str, task_queue: str, s3_endpoint: str
) -> None:
    s3 = _s3_client(s3_endpoint)
    # A bucket of its own: test_claim_check's S3 test expects "plans" empty, and the moto
    # server is shared by the tests of one process.
    s3.create_bucket(Bucket="payload-plans")
    result, size, refs = await run_with_storage(
        temporal_target, task_queue, s3_driver("payload-plans", "payloads", client=s3)
    )
    assert result.ok and refs >= 2 and size < 64 * 1024
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket="payload-plans")["Contents"]]
    assert keys and all(k.startswith("payloads/v0/ns/default/") for k in keys)


async def test_a_worker_killed_while_storing_loses_nothing(
    client: Client,
    temporal_target: str,
    task_queue: str,
    workflow_id: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """SIGKILL while a step's 300 KiB result is being stored: the attempt is lost, the step
    runs again on the replacement worker, and nothing half-written sits under a key."""
    from tests.support.crash_tools import SLOW_STORE_ENV, crash_registry
    from tests.support.worker_processes import kill_and_replace, read_log, worker_processes

    store = tmp_path / "payloads"
    monkeypatch.setenv(SLOW_STORE_ENV, str(store))
    log = tmp_path / "side-effects.jsonl"
    plan = {"steps": [{"id": "big", "tool": "crash_big", "args": {"kib": 300}}]}

    async def storing() -> None:
        while not any(e.get("event") == "storing" for e in read_log(log)):
            await asyncio.sleep(0.02)

    reader_storage = PayloadStoragePlugin(
        external_storage(FileStorageDriver(store), threshold=64 * 1024)
    )
    reader = await Client.connect(temporal_target, plugins=[reader_storage])
    async with worker_processes(temporal_target, task_queue, log, tmp_path) as spawn:
        first = await spawn()
        handle = await start_plan(
            reader,
            plan,
            task_queue=task_queue,
            registry=crash_registry(),
            workflow_id=workflow_id,
            store_results=False,
            max_result_bytes=1024 * 1024,
            max_returned_bytes=2 * 1024 * 1024,
            retry_initial_interval_s=0.2,
        )
        _second, result = await kill_and_replace(
            spawn, first, handle, log, asyncio.wait_for(storing(), 20)
        )
    assert result.ok, result.ledger
    assert result.returned["big"] == {"text": "b" * 300 * 1024}
    assert result.outcome("big").attempts == 2, "the kill, not a timeout, lost the first"
    runs = [e for e in read_log(log) if e.get("step") == "big" and e["event"] == "start"]
    assert [e["pid"] for e in runs] == [first.proc.pid, _second.proc.pid]
    assert [p for p in store.rglob(".part-*")], "the killed worker's half-written file"
    for file in store.rglob("*"):
        if file.is_file() and not file.name.startswith(".part-"):
            digest = hashlib.sha256(file.read_bytes()).hexdigest()
            assert file.name == digest, f"{file} is not the payload its name says"


async def page(n: int) -> dict[str, Any]:
    return {"n": n, "text": "p" * (200 * 1024)}


async def test_without_storage_an_agent_step_too_large_to_send_ends_clearly(
    temporal_target: str, task_queue: str, tmp_path: Path
) -> None:
    """Without External Storage, a model call over Temporal's 2 MB per payload would fail
    its workflow task forever (TMPRL1103): the step stops before it, saying why."""
    from temporalio.strands_agents import StrandsPlugin

    from durable_plan.testing import ScriptedModel, call, output

    prompt = "Read twelve big pages."
    script = [call("page", n=i) for i in range(12)] + [output({"pages": 12})]
    models = {"scripted": lambda: ScriptedModel(scripts={prompt: script})}
    client = await Client.connect(temporal_target, plugins=[StrandsPlugin(models=models)])
    reg = ToolRegistry()
    reg.add(page)
    plan = {
        "steps": [
            {
                "id": "read",
                "tool": "agent",
                "args": {
                    "prompt": prompt,
                    "output_schema": {"type": "object"},
                    "tools": ["page"],
                    "max_iterations": 16,
                },
            }
        ]
    }
    async with plan_worker(client, task_queue=task_queue, registry=reg):
        handle = await start_plan(
            client, plan, task_queue=task_queue, registry=reg, model="scripted"
        )
        result = await asyncio.wait_for(handle.result(), 60)
    (outcome,) = result.ledger
    assert outcome.status == "failed"
    assert "over Temporal's 2 MB limit for one payload" in (outcome.error or ""), outcome.error

    # With External Storage the same loop runs to its answer: the calls are references.
    storage = PayloadStoragePlugin(external_storage(FileStorageDriver(tmp_path)))
    stored = await Client.connect(temporal_target, plugins=[StrandsPlugin(models=models), storage])
    async with plan_worker(stored, task_queue=f"{task_queue}-stored", registry=reg):
        handle = await start_plan(
            stored, plan, task_queue=f"{task_queue}-stored", registry=reg, model="scripted"
        )
        result = await asyncio.wait_for(handle.result(), 60)
    assert result.ok, result.ledger
    assert result.returned["read"]["iterations"] == 13


def test_the_round_cap_is_32_and_a_catalog_may_lower_it() -> None:
    """32 rounds; a catalogue's own cap (``max_agent_rounds``) refuses past it."""
    from dataclasses import replace

    from durable_plan.check import ToolCatalog, check_plan
    from durable_plan.language.agent_step import MAX_ITERATIONS
    from durable_plan.language.errors import PlanRejected

    plan = {
        "steps": [
            {
                "id": "read",
                "tool": "agent",
                "args": {
                    "prompt": "p",
                    "output_schema": {"type": "object"},
                    "tools": ["page"],
                    "max_iterations": 24,
                },
            }
        ]
    }
    catalog = replace(ToolCatalog.of(["page"]), default_model="m")
    assert MAX_ITERATIONS == 32
    check_plan(plan, catalog=catalog, durable=True)
    with pytest.raises(PlanRejected, match="from 1 to 16"):
        check_plan(plan, catalog=replace(catalog, max_agent_rounds=16), durable=True)
