"""With encryption on, results kept by reference are sealed in the store too: history holds
ciphertext only, so the store must not hold the plaintext (issue 18's two halves together)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from durable_plan import plan_worker, run_plan
from durable_plan.protect.encryption import Keyring, encrypted_client, new_key
from durable_plan.protect.result_keys import OWNER
from durable_plan.protect.result_store import FileResultStore, StoredResultUnreadable
from durable_plan.protect.sealed_store import SEAL_MARKER, SealedResultStore
from durable_plan.tools.registry import ToolRegistry

SECRET = "the dragon sleeps under the mill"


async def report(copies: int) -> dict[str, Any]:
    """A large result holding a secret sentence many times."""
    return {"text": (SECRET + ". ") * copies}


async def digest(doc: dict[str, Any]) -> dict[str, Any]:
    """What a later step computes from the whole document."""
    return {"chars": len(doc["text"]), "sha256": hashlib.sha256(doc["text"].encode()).hexdigest()}


REGISTRY = ToolRegistry()
REGISTRY.add(report)
REGISTRY.add(digest)


def keys(*ids: str) -> Keyring:
    return Keyring(tuple(new_key(key_id) for key_id in ids))


def _stored_files(root: Path) -> list[bytes]:
    """The stored results (not the owner records, which name the workflow only)."""
    return [p.read_bytes() for p in root.rglob("*") if p.is_file() and p.name != OWNER]


def test_objects_are_sealed_and_open_after_rotation(tmp_path: Path) -> None:
    inner = FileResultStore(tmp_path)
    old = keys("k1")
    SealedResultStore(inner, old).put("wf/a/1", SECRET.encode())
    (raw,) = _stored_files(tmp_path)
    assert raw.startswith(SEAL_MARKER) and SECRET.encode() not in raw
    rotated = old.with_key(*new_key("k2"))
    sealed = SealedResultStore(inner, rotated)
    assert sealed.get("wf/a/1") == SECRET.encode()  # the old key still opens it
    sealed.put("wf/b/1", b"new")
    assert b"k2" in inner.get("wf/b/1")  # the newest key seals


def test_a_wrong_key_is_a_clear_error_and_plaintext_objects_still_read(tmp_path: Path) -> None:
    inner = FileResultStore(tmp_path)
    SealedResultStore(inner, keys("k1")).put("wf/a/1", b"sealed")
    with pytest.raises(StoredResultUnreadable, match="key id 'k1'"):
        SealedResultStore(inner, keys("k1")).get("wf/a/1")  # same id, another key
    with pytest.raises(StoredResultUnreadable, match="does not hold"):
        SealedResultStore(inner, keys("k9")).get("wf/a/1")
    inner.put("wf/old/1", b"written before encryption was on")
    assert SealedResultStore(inner, keys("k1")).get("wf/old/1") == inner.get("wf/old/1")


async def test_an_encrypted_plan_passes_a_large_result_sealed_in_the_store(
    client: Client, task_queue: str, tmp_path: Path
) -> None:
    ring = keys("k1")
    store = FileResultStore(tmp_path / "store")
    sealed_client = encrypted_client(client, ring)
    plan = {
        "steps": [
            {"id": "a", "tool": "report", "args": {"copies": 20_000}},  # about 680 KB
            {"id": "b", "tool": "digest", "bind": {"doc": "steps.a"}},
        ],
        "returns": ["b"],
    }
    async with plan_worker(
        sealed_client, task_queue=task_queue, registry=REGISTRY, encryption=ring, result_store=store
    ):
        result = await run_plan(
            sealed_client,
            plan,
            task_queue=task_queue,
            registry=REGISTRY,
            keep_stored_results=True,  # so the test can look at what the store holds
        )
    text = (SECRET + ". ") * 20_000
    assert result.outcome("b").status == "ok", result.outcome("b").error
    assert result.returned["b"]["sha256"] == hashlib.sha256(text.encode()).hexdigest()
    files = _stored_files(tmp_path / "store")
    assert len(files) == 1
    assert files[0].startswith(SEAL_MARKER)
    assert SECRET.encode() not in files[0]
