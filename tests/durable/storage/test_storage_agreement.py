"""Issue 45, item 4: whether External Storage is on is never read from how the server's
address is written, and a payload a worker cannot read fails the plan, naming the payload and
the fix, instead of a workflow task retried forever (``TMPRL1105``, a missing or altered
file). On the dev server, with the processes' real connect."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client, WorkflowExecutionStatus

from durable_plan import plan_worker, start_plan
from durable_plan.protect.payload_file_driver import FileStorageDriver
from durable_plan.protect.payload_storage import (
    STORAGE_ENV,
    PayloadStoragePlugin,
    external_storage,
    storage_setting,
)
from durable_plan.protect.result_store import STORE_ENV
from durable_plan.server.connection import connect
from durable_plan.server.devserver import DevServer
from durable_plan.temporal.client.start import PlanFailed, PlanHandle
from durable_plan.tools.registry import ToolRegistry
from tests.durable.storage.test_payload_storage import stored_references

BIG = 300 * 1024
"""Over External Storage's 256 KiB threshold, well under Temporal's 2 MB."""


async def size_of(doc: dict[str, Any]) -> dict[str, int]:
    return {"chars": len(doc["text"])}


def registry() -> ToolRegistry:
    reg = ToolRegistry()
    reg.add(size_of)
    return reg


def big_plan() -> dict[str, Any]:
    """A plan whose input (the workflow's first payload) is over the threshold."""
    return {"steps": [{"id": "n", "tool": "size_of", "args": {"doc": {"text": "q" * BIG}}}]}


@pytest.fixture
def no_storage_setting(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """Nothing set, as on a fresh machine; the default directory under ``tmp_path``."""
    monkeypatch.delenv(STORE_ENV, raising=False)
    monkeypatch.delenv(STORAGE_ENV, raising=False)
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    yield


def other_spelling(port: int) -> str:
    """The dev server (listening on 127.0.0.1) by this host's name when that resolves to
    it (the issue's case: a worker that reaches the server by the host's name), else by
    ``127.0.0.1``."""
    host = socket.gethostname()
    try:
        resolved = socket.gethostbyname(host)
    except OSError:
        resolved = ""
    return f"{host}:{port}" if resolved == "127.0.0.1" else f"127.0.0.1:{port}"


async def run_big_plan(starter: Client, worker_client: Client, task_queue: str) -> PlanHandle:
    async with plan_worker(worker_client, task_queue=task_queue, registry=registry()):
        handle = await start_plan(
            starter,
            big_plan(),
            task_queue=task_queue,
            registry=registry(),
            max_result_bytes=BIG * 2,
        )
        result = await asyncio.wait_for(handle.result(), 30)
    assert result.ok, result.ledger
    assert result.returned["n"] == {"chars": BIG}
    return handle


async def references_in(handle: PlanHandle) -> int:
    history = await handle.handle.fetch_history()
    return sum(stored_references(e) for e in history.events)


def test_the_address_never_decides(monkeypatch: pytest.MonkeyPatch) -> None:
    """The setting reads the environment and the argument only: the same for every process."""
    env: dict[str, str] = {}
    assert storage_setting(None, env) is None, "nothing said: off, whatever the address"
    assert storage_setting(True, env) == "", "on, at the default directory"
    assert storage_setting("s3://b/p", env) == "s3://b/p"
    assert storage_setting(None, {STORE_ENV: "/srv/store"}) == "/srv/store"
    assert storage_setting(None, {STORAGE_ENV: "on"}) == ""
    assert storage_setting(None, {STORE_ENV: "/srv/store", STORAGE_ENV: "off"}) is None
    assert storage_setting(False, {STORE_ENV: "/srv/store"}) is None


async def test_a_client_on_localhost_and_a_worker_on_the_host_name_agree(
    dev_server: DevServer, task_queue: str, no_storage_setting: None
) -> None:
    """The issue's set-up: the client through ``localhost:P`` (a port-forward), the worker by
    the host's name. Nothing set: both keep payloads in history, and the plan whose input
    is over the threshold runs (it used to be stored on the client's disk, the worker
    could not read it, and the plan stayed RUNNING)."""
    starter = await connect(f"localhost:{dev_server.port}")
    worker_client = await connect(other_spelling(dev_server.port))
    handle = await run_big_plan(starter, worker_client, task_queue)
    assert await references_in(handle) == 0, "storage off in both: the input is in history"


async def test_with_a_store_set_both_spellings_store_there(
    dev_server: DevServer,
    task_queue: str,
    no_storage_setting: None,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    monkeypatch.setenv(STORE_ENV, str(tmp_path / "store"))
    starter = await connect(f"localhost:{dev_server.port}")
    worker_client = await connect(other_spelling(dev_server.port))
    handle = await run_big_plan(starter, worker_client, task_queue)
    assert await references_in(handle) >= 1, "storage on in both: the input is a reference"
    assert list((tmp_path / "store" / "payloads").rglob("*/d/sha256/*"))


# -- a payload the worker cannot read fails the plan ----------------------------------------


async def failed_plan(handle: PlanHandle) -> str:
    """The plan's failure message; the workflow is FAILED, not left RUNNING."""
    with pytest.raises(PlanFailed) as caught:
        await asyncio.wait_for(handle.result(), 30)
    description = await handle.handle.describe()
    assert description.status == WorkflowExecutionStatus.FAILED, description.status
    return str(caught.value)


async def start_big(client: Client, task_queue: str, workflow_id: str) -> PlanHandle:
    return await start_plan(
        client,
        big_plan(),
        task_queue=task_queue,
        registry=registry(),
        workflow_id=workflow_id,
        max_result_bytes=BIG * 2,
        if_no_worker="ignore",
    )


def stored(tmp_path: Path) -> PayloadStoragePlugin:
    return PayloadStoragePlugin(external_storage(FileStorageDriver(tmp_path)))


@pytest.mark.parametrize("worker_kind", ["connect", "plain"])
async def test_a_worker_without_storage_fails_the_plan_naming_the_payload(
    temporal_target: str,
    task_queue: str,
    workflow_id: str,
    tmp_path: Path,
    no_storage_setting: None,
    worker_kind: str,
) -> None:
    """The client stores the input; the worker has storage off (our connect with nothing
    set) or none at all (a plain ``Client.connect``): the plan fails at once, saying which
    payload and what to set, where the SDK alone fails the workflow task forever
    (``TMPRL1105``)."""
    starter = await Client.connect(temporal_target, plugins=[stored(tmp_path)])
    if worker_kind == "connect":
        worker_client = await connect(temporal_target)
    else:
        worker_client = await Client.connect(temporal_target)
    handle = await start_big(starter, task_queue, workflow_id)
    async with plan_worker(worker_client, task_queue=task_queue, registry=registry()):
        message = await failed_plan(handle)
    assert "is stored outside history" in message and "External Storage off" in message, message
    assert f"/wi/{workflow_id}/" in message and "DURABLE_PLAN_STORE" in message, message


@pytest.mark.parametrize("damage", ["deleted", "altered"])
async def test_a_stored_payload_gone_or_altered_fails_the_plan(
    temporal_target: str, task_queue: str, workflow_id: str, tmp_path: Path, damage: str
) -> None:
    client = await Client.connect(temporal_target, plugins=[stored(tmp_path)])
    handle = await start_big(client, task_queue, workflow_id)  # no worker yet
    (file,) = [p for p in tmp_path.rglob("*/d/sha256/*") if f"/wi/{workflow_id}/" in str(p)]
    if damage == "deleted":
        file.unlink()
    else:
        file.write_bytes(file.read_bytes()[:-1] + b"!")
    async with plan_worker(client, task_queue=task_queue, registry=registry()):
        message = await failed_plan(handle)
    expected = "is not in" if damage == "deleted" else "does not match its digest"
    assert expected in message and "d/sha256/" in message, message
    assert "start the plan again" in message, message


async def test_a_step_whose_worker_cannot_read_its_arguments_fails_naming_them(
    temporal_target: str, task_queue: str, tmp_path: Path, no_storage_setting: None
) -> None:
    """A tool routed to a worker without the store: the plan's worker stores the step's
    large arguments, the tool's worker cannot read them; the step fails (bounded retries)
    with the payload's words, not "Failed decoding arguments" alone."""
    from temporalio.worker import Worker

    from durable_plan.temporal.worker.helpers import tool_worker

    async def make(kib: int) -> dict[str, Any]:
        return {"text": "m" * (kib * 1024)}

    reg = ToolRegistry()
    reg.add(make)
    reg.add(size_of, task_queue=f"{task_queue}-tools", retries=1)
    plan = {
        "steps": [
            {"id": "doc", "tool": "make", "args": {"kib": 300}},
            {"id": "n", "tool": "size_of", "bind": {"doc": "steps.doc"}},
        ]
    }
    plans = await Client.connect(temporal_target, plugins=[stored(tmp_path)])
    tools = await Client.connect(temporal_target)
    workers: list[Worker] = [
        plan_worker(plans, task_queue=task_queue, registry=reg),
        tool_worker(tools, task_queue=f"{task_queue}-tools", registry=reg),
    ]
    async with workers[0], workers[1]:
        handle = await start_plan(
            plans,
            plan,
            task_queue=task_queue,
            registry=reg,
            store_results=False,
            max_result_bytes=1024 * 1024,
            retry_initial_interval_s=0.1,
        )
        result = await asyncio.wait_for(handle.result(), 60)
    outcome = result.outcome("n")
    assert outcome.status == "failed", result.ledger
    assert "is stored outside history" in (outcome.error or ""), outcome.error
