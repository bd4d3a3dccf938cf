"""Results kept by reference belong to one plan run, and a sweep spares running plans
(issue 22, item 10), on the real dev server.

Before: keys were per workflow id, so a second run with the same id deleted (or read) the
first run's kept results; and ``sweep-store`` deleted by age alone, so a plan waiting more
than the retention period for an approval lost its stored results.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

from temporalio.client import Client

from durable_plan import plan_worker, start_plan
from durable_plan.protect.result_keys import OWNER
from durable_plan.protect.result_store import FileResultStore
from durable_plan.tools.registry import ToolRegistry


async def report(kib: int) -> str:
    """A report of ``kib`` KiB (stored by reference past the threshold)."""
    return "r" * (kib * 1024)


async def size_of(text: str) -> int:
    """How long the text is."""
    return len(text)


REGISTRY = ToolRegistry([report, size_of])
REGISTRY.add(lambda text: len(text), name="approve_size", requires_approval=True)

STORED = {"steps": [{"id": "doc", "tool": "report", "args": {"kib": 8}}], "returns": []}


def objects(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and p.name != OWNER)


def age(root: Path, days: float) -> None:
    for path in root.rglob("*"):
        if path.is_file():
            stat = path.stat()
            os.utime(path, (stat.st_atime - days * 86400, stat.st_mtime - days * 86400))


async def test_a_second_run_with_the_same_id_leaves_the_first_runs_kept_results(
    client: Client, task_queue: str, tmp_path: Path
) -> None:
    store = FileResultStore(tmp_path / "store")
    workflow_id = f"same-id-{uuid.uuid4().hex[:8]}"
    async with plan_worker(client, task_queue=task_queue, registry=REGISTRY, result_store=store):
        first = await start_plan(
            client,
            STORED,
            task_queue=task_queue,
            registry=REGISTRY,
            workflow_id=workflow_id,
            store_over_bytes=1024,
            keep_stored_results=True,
        )
        await first.result()
        kept = objects(tmp_path / "store")
        assert len(kept) == 1
        second = await start_plan(
            client,
            STORED,
            task_queue=task_queue,
            registry=REGISTRY,
            workflow_id=workflow_id,
            store_over_bytes=1024,
        )
        await second.result()
    # The second run stored and deleted its own; the first run's kept result is intact.
    assert objects(tmp_path / "store") == kept


def sweep(store: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "durable_plan", "sweep-store", "--store", str(store), *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


async def test_a_sweep_keeps_the_results_of_a_plan_still_waiting_for_a_person(
    client: Client, task_queue: str, tmp_path: Path, temporal_target: str
) -> None:
    root = tmp_path / "store"
    store = FileResultStore(root)
    plan: dict[str, Any] = {
        "steps": [
            {"id": "doc", "tool": "report", "args": {"kib": 8}},
            {"id": "ok", "tool": "approve_size", "bind": {"text": "steps.doc"}},
        ]
    }
    async with plan_worker(client, task_queue=task_queue, registry=REGISTRY, result_store=store):
        handle = await start_plan(
            client, plan, task_queue=task_queue, registry=REGISTRY, store_over_bytes=1024
        )
        for _ in range(200):
            lines = await handle.progress()
            if any(line["phase"] == "awaiting_approval" for line in lines):
                break
            await asyncio.sleep(0.05)
        age(root, 8)  # the person has been away for 8 days
        done = await asyncio.to_thread(
            sweep, root, "--older-than", "7d", "--address", temporal_target
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("deleted 0 stored result(s)"), done.stdout
        await handle.decide("ok", approved=True)
        result = await asyncio.wait_for(handle.result(), 30)
    assert result.returned["ok"] == 8 * 1024, "the result was still there when approved"


async def test_a_sweep_deletes_what_a_closed_plan_kept_and_says_when_it_cannot_check(
    client: Client, task_queue: str, tmp_path: Path, temporal_target: str
) -> None:
    root = tmp_path / "store"
    store = FileResultStore(root)
    async with plan_worker(client, task_queue=task_queue, registry=REGISTRY, result_store=store):
        handle = await start_plan(
            client,
            STORED,
            task_queue=task_queue,
            registry=REGISTRY,
            store_over_bytes=1024,
            keep_stored_results=True,
        )
        await handle.result()
    age(root, 8)
    refused = await asyncio.to_thread(sweep, root, "--older-than", "7d", "--address", "127.0.0.1:1")
    assert refused.returncode == 3 and len(refused.stderr.strip().splitlines()) == 1
    assert objects(root), "nothing is deleted when the server cannot say what still runs"
    done = await asyncio.to_thread(sweep, root, "--older-than", "7d", "--address", temporal_target)
    assert done.returncode == 0 and done.stdout.startswith("deleted 1 stored result(s)")
    assert not any(root.iterdir()), "the owner record went with the last result"
    blind = await asyncio.to_thread(sweep, root, "--older-than", "7d", "--no-running-check")
    assert blind.returncode == 0, blind.stderr
