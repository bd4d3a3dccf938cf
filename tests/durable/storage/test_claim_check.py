"""Large results by reference (claim check) on a real dev server: a 20 MiB result passes
between two steps while the history stays small, the store is cleaned when the plan ends,
a missing object fails its step clearly, expressions cannot read inside a stored result,
histories replay; the S3 store against moto's S3 server through the real boto3 client."""

from __future__ import annotations

import asyncio
import hashlib
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from temporalio import activity
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowFailureError, WorkflowHistory
from temporalio.worker import Replayer

from durable_plan import PlanWorkflow, plan_worker, run_plan, start_plan
from durable_plan.language.plan import PlanResult
from durable_plan.protect.result_keys import plan_prefix, result_key
from durable_plan.protect.result_store import (
    FileResultStore,
    ResultStore,
    S3ResultStore,
    StoredResultMissing,
    store_from_env,
)
from durable_plan.run.references import is_reference
from durable_plan.tools.registry import ToolRegistry
from tests.support.helpers import s3_client as _s3_client
from tests.support.helpers import until_phase

MIB = 1024 * 1024
WIPE: list[ResultStore] = []  # the store the `wipe` tool empties (set by a test)


def _text(size: int) -> str:
    """Deterministic, not one repeated character: a truncation or mix-up would show."""
    unit = "".join(chr(97 + (n * 7) % 26) for n in range(997))
    return (unit * (size // len(unit) + 1))[:size]


async def document(mib: float) -> dict[str, Any]:
    """A large result: {"title", "text"}."""
    return {"title": "big", "text": _text(int(mib * MIB))}


async def measure(doc: dict[str, Any]) -> dict[str, Any]:
    """What a later step computes from the whole document."""
    text = doc["text"]
    return {"chars": len(text), "sha256": hashlib.sha256(text.encode()).hexdigest()}


async def measure_all(docs: list[Any]) -> list[int]:
    return [len(d["text"]) for d in docs]


async def echo_text(text: str) -> str:
    return text


async def wipe() -> str:
    """Deletes everything in the test's store: the next step's reference dangles."""
    store = WIPE[0]
    assert isinstance(store, FileResultStore)
    for path in store.root.rglob("*"):
        if path.is_file():
            path.unlink()
    return "wiped"


async def hold(seconds: float) -> str:
    """Waits, heartbeating, so a cancelled plan's cancellation reaches it."""
    for _ in range(int(seconds * 10)):
        activity.heartbeat()
        await asyncio.sleep(0.1)
    return "held"


@activity.defn
async def raw_measure(doc: dict[str, Any]) -> int:
    """An existing Temporal activity, called as it is (no wrapper to read references)."""
    return len(doc)


def _registry() -> ToolRegistry:
    registry = ToolRegistry()
    for fn in (document, measure, measure_all, echo_text, wipe):
        registry.add(fn, timeout_s=60, retries=0)
    registry.add(hold, timeout_s=60, retries=0, heartbeat_timeout_s=2)
    registry.add(raw_measure, timeout_s=60, retries=0)
    return registry


REGISTRY = _registry()


async def _run_stored(
    client: Client,
    task_queue: str,
    plan: dict[str, Any],
    store: ResultStore,
    registry: ToolRegistry = REGISTRY,
    **options: Any,
) -> PlanResult:
    """One plan on a worker whose result store is ``store``."""
    async with plan_worker(client, task_queue=task_queue, registry=registry, result_store=store):
        return await run_plan(client, plan, task_queue=task_queue, registry=registry, **options)


def _files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()] if root.exists() else []


async def _history_bytes(client: Client, workflow_id: str) -> int:
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    return sum(event.ByteSize() for event in history.events)


# -- durable plans with the filesystem store -----------------------------------------------


async def test_20_mib_result_passes_by_reference_history_small_store_cleaned(
    client: Client, task_queue: str, workflow_id: str, tmp_path: Path
) -> None:
    store = FileResultStore(tmp_path / "store")
    plan = {
        "steps": [
            {"id": "a", "tool": "document", "args": {"mib": 20}},
            {"id": "b", "tool": "measure", "bind": {"doc": "steps.a"}},
        ]
    }
    async with plan_worker(client, task_queue=task_queue, registry=REGISTRY, result_store=store):
        handle = await start_plan(
            client, plan, task_queue=task_queue, registry=REGISTRY, workflow_id=workflow_id
        )
        result = await handle.result()
    expected = _text(20 * MIB)
    assert result.outcome("b").status == "ok", result.outcome("b").error
    assert result.returned["b"] == {
        "chars": 20 * MIB,
        "sha256": hashlib.sha256(expected.encode()).hexdigest(),
    }
    # What the model sees of a: the reference, its size and a preview (20 MiB > the cap).
    ref = result.returned["a"]
    assert is_reference(ref)
    assert ref["bytes"] > 20 * MIB and ref["preview"].startswith('{"title":"big","text":"ahov')
    assert len(ref["preview"]) == 1000
    size = await _history_bytes(client, workflow_id)
    print(f"history of a plan passing 20 MiB by reference: {size} bytes")
    assert size < 64 * 1024
    assert _files(tmp_path / "store") == []  # cleaned when the plan ended
    history = await handle.handle.fetch_history()
    await Replayer(workflows=[PlanWorkflow]).replay_workflow(history)
    activities = [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]
    assert activities == ["document", "measure", "durable_plan_drop_stored_results"]


async def test_small_results_stay_inline_and_cost_no_extra_activity(
    client: Client, task_queue: str, workflow_id: str, tmp_path: Path
) -> None:
    store = FileResultStore(tmp_path / "store")
    plan = {"steps": [{"id": "a", "tool": "echo_text", "args": {"text": "hi"}}]}
    async with plan_worker(client, task_queue=task_queue, registry=REGISTRY, result_store=store):
        handle = await start_plan(
            client, plan, task_queue=task_queue, registry=REGISTRY, workflow_id=workflow_id
        )
        result = await handle.result()
    assert result.returned == {"a": "hi"}
    history = await handle.handle.fetch_history()
    scheduled = [
        e for e in history.events if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]
    assert len(scheduled) == 1


async def test_missing_stored_object_fails_the_step_clearly(
    client: Client, task_queue: str, workflow_id: str, tmp_path: Path
) -> None:
    store = FileResultStore(tmp_path / "store")
    WIPE[:] = [store]
    plan = {
        "steps": [
            {"id": "a", "tool": "document", "args": {"mib": 0.5}},
            {"id": "gone", "tool": "wipe", "after": ["a"]},
            {"id": "b", "tool": "measure", "bind": {"doc": "steps.a"}, "after": ["gone"]},
        ],
        "on_error": "continue",
    }
    result = await _run_stored(client, task_queue, plan, store, workflow_id=workflow_id)
    b = result.outcome("b")
    assert b.status == "failed" and b.attempts == 1
    error = b.error or ""
    assert "step 'b': argument 'doc' holds the result of step 'a' stored by reference" in error
    assert "the result store has no object for it" in error and "run step 'a' again" in error


async def test_expressions_cannot_read_inside_a_stored_result(
    client: Client, task_queue: str, tmp_path: Path
) -> None:
    store = FileResultStore(tmp_path / "store")
    plan = {
        "steps": [
            {"id": "a", "tool": "document", "args": {"mib": 0.5}},
            {"id": "field", "tool": "echo_text", "bind": {"text": "steps.a.title"}},
            {"id": "func", "tool": "echo_text", "bind": {"text": "$string($length(steps.a.text))"}},
            {"id": "cond", "tool": "measure", "bind": {"doc": "steps.a"}, "when": "steps.a.title"},
            {"id": "whole", "tool": "measure", "bind": {"doc": "steps.a"}},
            {"id": "raw", "tool": "raw_measure", "bind": {"doc": "steps.a"}},
        ],
        "on_error": "continue",
        "returns": ["whole"],
    }
    result = await _run_stored(client, task_queue, plan, store)
    assert result.outcome("whole").status == "ok"
    assert result.returned["whole"]["chars"] == int(0.5 * MIB)
    assert result.outcome("raw").status == "failed"
    assert "cannot read a result stored by reference" in (result.outcome("raw").error or "")
    for sid, field in (("field", "binding 'text'"), ("func", "binding 'text'"), ("cond", "when")):
        outcome = result.outcome(sid)
        assert outcome.status == "failed", sid
        error = outcome.error or ""
        assert error.startswith(f"{field} reads inside a stored result: the result of step 'a'")
        assert (
            'bind the whole result ("steps.a")' in error
            or 'pass the whole result ("steps.a")' in error
        )


async def test_map_results_by_reference_pass_whole_and_reduce_refuses(
    client: Client, task_queue: str, tmp_path: Path
) -> None:
    store = FileResultStore(tmp_path / "store")
    plan = {
        "steps": [
            {
                "id": "docs",
                "tool": "map",
                "args": {"over": [0.3, 0.4], "do": {"tool": "document", "bind": {"mib": "item"}}},
            },
            {"id": "sizes", "tool": "measure_all", "bind": {"docs": "steps.docs.results"}},
            {"id": "all", "tool": "measure_all", "bind": {"docs": "[steps.docs]"}},
            {
                "id": "fold",
                "tool": "reduce",
                "args": {"over": [0.3], "do": {"tool": "document", "bind": {"mib": "item"}}},
            },
        ],
        "on_error": "continue",
        "returns": ["sizes"],
    }
    result = await _run_stored(client, task_queue, plan, store)
    # steps.docs.results reads inside the map's result, which lists references: refused.
    assert result.outcome("sizes").status == "failed"
    assert "items are stored by reference" in (result.outcome("sizes").error or "")
    assert result.outcome("all").status == "failed"
    assert result.outcome("fold").status == "failed"
    assert "reduce's accumulator" in (result.outcome("fold").error or "")
    assert _files(tmp_path / "store") == []


async def test_map_passed_whole_reads_every_item(
    client: Client, task_queue: str, tmp_path: Path
) -> None:
    store = FileResultStore(tmp_path / "store")

    plan = {
        "steps": [
            {
                "id": "docs",
                "tool": "map",
                "args": {"over": [0.3, 0.4], "do": {"tool": "document", "bind": {"mib": "item"}}},
            },
            {"id": "sizes", "tool": "measure_map", "bind": {"fan": "steps.docs"}},
        ],
    }
    registry = _registry()

    async def measure_map(fan: dict[str, Any]) -> list[int]:
        return [len(d["text"]) for d in fan["results"]]

    registry.add(measure_map)
    result = await _run_stored(client, task_queue, plan, store, registry)
    assert result.returned["sizes"] == [int(0.3 * MIB), int(0.4 * MIB)]


async def test_returns_value_when_it_fits_the_cap_else_preview(
    client: Client, task_queue: str, tmp_path: Path
) -> None:
    store = FileResultStore(tmp_path / "store")
    plan = {"steps": [{"id": "a", "tool": "document", "args": {"mib": 0.01}}]}
    async with plan_worker(client, task_queue=task_queue, registry=REGISTRY, result_store=store):
        value = await run_plan(
            client, plan, task_queue=task_queue, registry=REGISTRY, store_over_bytes=4096
        )
        preview = await run_plan(
            client,
            plan,
            task_queue=task_queue,
            registry=REGISTRY,
            store_over_bytes=4096,
            return_stored="preview",
        )
        off = await run_plan(
            client,
            plan,
            task_queue=task_queue,
            registry=REGISTRY,
            store_over_bytes=4096,
            store_results=False,
            max_result_bytes=4096,
        )
    assert value.returned["a"] == {"title": "big", "text": _text(int(0.01 * MIB))}
    assert is_reference(preview.returned["a"]) and preview.returned["a"]["bytes"] > 10_000
    assert off.outcome("a").status == "failed"
    assert "over the 4 KiB limit for results kept in history" in (off.outcome("a").error or "")
    assert _files(tmp_path / "store") == []


async def test_values_read_back_stay_within_the_plans_result_limit(
    client: Client, task_queue: str, tmp_path: Path
) -> None:
    store = FileResultStore(tmp_path / "store")
    ids = ["a", "b", "c"]
    plan = {"steps": [{"id": i, "tool": "document", "args": {"mib": 0.01}} for i in ids]}
    result = await _run_stored(
        client,
        task_queue,
        plan,
        store,
        store_over_bytes=4096,
        max_returned_bytes=65536 + 30_000,  # room for two 10 KiB values, not three
    )
    kinds = ["reference" if is_reference(result.returned[i]) else "value" for i in ids]
    assert kinds == ["value", "value", "reference"]


async def test_cancelled_plan_still_cleans_its_store(
    client: Client, task_queue: str, tmp_path: Path
) -> None:
    store = FileResultStore(tmp_path / "store")
    plan = {
        "steps": [
            {"id": "a", "tool": "document", "args": {"mib": 0.5}},
            {"id": "wait", "tool": "hold", "args": {"seconds": 30}, "after": ["a"]},
        ]
    }
    async with plan_worker(client, task_queue=task_queue, registry=REGISTRY, result_store=store):
        handle = await start_plan(client, plan, task_queue=task_queue, registry=REGISTRY)
        while not _files(tmp_path / "store"):
            await asyncio.sleep(0.05)
        await until_phase(handle, "wait", "running")
        await handle.handle.cancel()
        with pytest.raises(WorkflowFailureError):
            await handle.handle.result()
    assert _files(tmp_path / "store") == []


async def test_keep_stored_results_leaves_them_for_a_retention_sweep(
    client: Client, task_queue: str, workflow_id: str, tmp_path: Path
) -> None:
    store = FileResultStore(tmp_path / "store")
    plan = {"steps": [{"id": "a", "tool": "document", "args": {"mib": 0.5}}]}
    result = await _run_stored(
        client, task_queue, plan, store, workflow_id=workflow_id, keep_stored_results=True
    )
    ref = result.returned["a"]
    key = result_key(workflow_id, "a", 1, await _chain(client, workflow_id))
    assert ref["$ref"] == f"durable-plan-store:{key}"
    assert store.get(key).decode().startswith('{"title":"big"')
    assert store.sweep(older_than_s=3600) == 0
    assert store.sweep(older_than_s=0) == 1
    assert _files(tmp_path / "store") == []


async def _chain(client: Client, workflow_id: str) -> str:
    """The plan run's chain (its first run id): its stored results are keyed by it."""
    description = await client.get_workflow_handle(workflow_id).describe()
    return str(description.raw_description.workflow_execution_info.first_run_id)


async def test_forged_references_are_refused(tmp_path: Path) -> None:
    """A plan can write a reference-shaped literal; only its own plan's keys resolve."""
    from durable_plan.run.references import reference
    from durable_plan.temporal.activities.claim_check import ClaimCheckError, resolve_args

    store = FileResultStore(tmp_path)
    store.put(result_key("other", "a", 1), b'"secret"')
    own = plan_prefix("mine")
    for key in (result_key("other", "a", 1), f"{own}/../x/1", f"{own}/a/b/1", f"{own}/a/x"):
        with pytest.raises(ClaimCheckError, match="did not store") as info:
            await resolve_args(
                store,
                workflow_id="mine",
                step_id="b",
                args={"doc": [reference(key, '"secret"')]},
                max_bytes=MIB,
            )
        assert info.value.kind == "ForeignReference"
    key = result_key("mine", "a", 1)
    store.put(key, b'{"x":1}')
    resolved = await resolve_args(
        store,
        workflow_id="mine",
        step_id="b",
        args={"doc": {"nested": [reference(key, '{"x":1}')]}, "n": 1},
        max_bytes=MIB,
    )
    assert resolved == {"doc": {"nested": [{"x": 1}]}, "n": 1}
    with pytest.raises(ClaimCheckError, match="sha256 differs"):
        await resolve_args(
            store,
            workflow_id="mine",
            step_id="b",
            args={"doc": reference(key, '{"x":2}')},
            max_bytes=MIB,
        )


# -- the stores themselves --------------------------------------------------------------


def test_file_store_keys_are_safe_and_missing_is_clear(tmp_path: Path) -> None:
    store = FileResultStore(tmp_path)
    store.put("p/s/1", b"abc")
    assert store.get("p/s/1") == b"abc"
    for bad in ("../x", "/etc/passwd", "p//1", "p/./1"):
        with pytest.raises(ValueError):
            store.put(bad, b"")
    with pytest.raises(StoredResultMissing, match="no file"):
        store.get("p/s/2")
    assert store.delete_prefix("p") == 1 and store.delete_prefix("p") == 0
    assert result_key("wf/with/../slashes", "rolls[2]", 3) == (
        f"{plan_prefix('wf/with/../slashes')}/rolls%5B2%5D/3"
    )


def test_store_from_env(tmp_path: Path) -> None:
    assert isinstance(store_from_env(str(tmp_path)), FileResultStore)
    s3 = store_from_env("s3://bucket/some/prefix")
    assert isinstance(s3, S3ResultStore) and (s3.bucket, s3.prefix) == ("bucket", "some/prefix")
    with pytest.raises(ValueError, match="name a bucket"):
        store_from_env("s3://")


def test_s3_store_put_get_delete_and_sweep(s3_endpoint: str) -> None:
    s3 = _s3_client(s3_endpoint)
    s3.create_bucket(Bucket="unit")
    store = S3ResultStore("unit", "plans/", client=s3)
    p, q = plan_prefix("wf-p"), plan_prefix("wf-q")  # keys as result_key makes them
    store.put(f"{p}/s/1", b"one")
    store.put(f"{p}/t/1", b"two")
    store.put(f"{q}/s/1", b"other plan")
    s3.put_object(Bucket="unit", Key="plans/README", Body=b"not a stored result")
    assert store.get(f"{p}/s/1") == b"one"
    assert store.where(f"{p}/s/1") == f"s3://unit/plans/{p}/s/1"
    with pytest.raises(StoredResultMissing, match=f"s3://unit/plans/{p}/s/9"):
        store.get(f"{p}/s/9")
    assert store.delete_prefix(p) == 2
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket="unit").get("Contents", [])]
    assert keys == ["plans/README", f"plans/{q}/s/1"]
    assert store.sweep(older_than_s=3600) == 0 and store.sweep(older_than_s=-60) == 1
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket="unit").get("Contents", [])]
    assert keys == ["plans/README"]  # a sweep deletes stored results only


async def test_s3_store_passes_a_result_by_reference_durably(
    client: Client, task_queue: str, workflow_id: str, s3_endpoint: str
) -> None:
    s3 = _s3_client(s3_endpoint)
    s3.create_bucket(Bucket="plans")
    store = S3ResultStore("plans", "results", client=s3)
    seen: list[list[str]] = []

    async def watch_bucket() -> None:
        while True:
            page = await asyncio.to_thread(s3.list_objects_v2, Bucket="plans")
            seen.append([o["Key"] for o in page.get("Contents", [])])
            await asyncio.sleep(0.05)

    plan = {
        "steps": [
            {"id": "a", "tool": "document", "args": {"mib": 3}},
            {"id": "b", "tool": "measure", "bind": {"doc": "steps.a"}},
        ],
        "returns": ["b"],
    }
    async with plan_worker(client, task_queue=task_queue, registry=REGISTRY, result_store=store):
        watcher = asyncio.create_task(watch_bucket())
        try:
            result = await run_plan(
                client, plan, task_queue=task_queue, registry=REGISTRY, workflow_id=workflow_id
            )
        finally:
            watcher.cancel()
    assert result.returned["b"]["chars"] == 3 * MIB
    key = f"results/{result_key(workflow_id, 'a', 1, await _chain(client, workflow_id))}"
    assert any(key in keys for keys in seen)  # it was in the bucket
    assert s3.list_objects_v2(Bucket="plans").get("KeyCount") == 0  # and is gone
    assert await _history_bytes(client, workflow_id) < 64 * 1024


# -- a recorded history replays (here, and in a process with another hash seed) -----------

FIXTURE_ID = "claim-check-fixture"
FIXTURE_PLAN = {
    "steps": [
        {"id": "a", "tool": "document", "args": {"mib": 0.01}},
        {"id": "b", "tool": "measure", "bind": {"doc": "steps.a"}},
        {"id": "c", "tool": "echo_text", "bind": {"text": "steps.a.title"}},
    ],
    "on_error": "continue",
}


async def _record_claim_check_history(client: Client, task_queue: str, tmp_path: Path) -> Path:
    """The plan above run by this version, its history written to a file."""
    store = FileResultStore(tmp_path / "store")
    async with plan_worker(client, task_queue=task_queue, registry=REGISTRY, result_store=store):
        handle = await start_plan(
            client,
            FIXTURE_PLAN,
            task_queue=task_queue,
            registry=REGISTRY,
            workflow_id=f"{FIXTURE_ID}-{uuid.uuid4().hex[:8]}",
            store_over_bytes=4096,
        )
        await handle.result()
        history = await handle.handle.fetch_history()
    path = tmp_path / "claim_check.json"
    path.write_text(history.to_json() + "\n")
    return path


def _fixture_activities(history: WorkflowHistory) -> list[str]:
    return [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]


async def test_recorded_claim_check_history_replays(
    client: Client, task_queue: str, tmp_path: Path
) -> None:
    """Stored, passed whole, refused inside, read back for returns, deleted: as recorded,
    here and in a process with another hash seed."""
    fixture = await _record_claim_check_history(client, task_queue, tmp_path)
    history = WorkflowHistory.from_json(FIXTURE_ID, fixture.read_text())
    assert _fixture_activities(history) == [
        "document",
        "measure",
        "durable_plan_read_stored_results",
        "durable_plan_drop_stored_results",
    ]
    await Replayer(workflows=[PlanWorkflow]).replay_workflow(history)
    script = (
        "import sys\n"
        "from temporalio.client import WorkflowHistory\n"
        "from temporalio.worker import Replayer\n"
        "from durable_plan.server.connection import run_script\n"
        "from durable_plan.temporal.workflows.plan_workflow import PlanWorkflow\n"
        "h = WorkflowHistory.from_json('x', open(sys.argv[1]).read())\n"
        # run_script: no interpreter finalization, which the SDK's native threads can abort
        "async def main() -> None:\n"
        "    await Replayer(workflows=[PlanWorkflow]).replay_workflow(h)\n"
        "run_script(main())\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(fixture)],
        env={**os.environ, "PYTHONHASHSEED": "12345"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr


def test_sweep_store_command_deletes_what_outlived_its_plan(
    tmp_path: Path, temporal_target: str
) -> None:
    store = FileResultStore(tmp_path / "store")
    store.put(result_key("wf-old", "a", 1), b"old")
    store.put(result_key("wf-new", "a", 1), b"new")
    old = Path(store.where(result_key("wf-old", "a", 1)))
    os.utime(old, (old.stat().st_atime - 3 * 86400, old.stat().st_mtime - 3 * 86400))

    def sweep(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "durable_plan", "sweep-store", *args],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "DURABLE_PLAN_STORE": str(tmp_path / "store")},
        )

    done = sweep("--older-than", "2d", "--address", temporal_target)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("deleted 1 stored result(s) older than 2d")
    assert not old.exists() and store.get(result_key("wf-new", "a", 1)) == b"new"
    bad = sweep("--older-than", "soon")
    assert bad.returncode == 2 and "is not a duration" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1


def test_a_sweep_deletes_only_stored_results(tmp_path: Path) -> None:
    """Pointed at the wrong directory, a retention sweep loses nothing but stored results."""
    store = FileResultStore(tmp_path)
    store.put(result_key("wf", "a", 1), b"stored")
    (tmp_path / "notes.txt").write_text("mine")
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "main.py").write_text("mine too")
    assert store.sweep(older_than_s=-1) == 1
    assert (tmp_path / "notes.txt").exists() and (tmp_path / "project" / "main.py").exists()
