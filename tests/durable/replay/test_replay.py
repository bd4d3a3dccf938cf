"""Recorded plan histories replay without non-determinism.

Each plan shape runs through ``PlanWorkflow`` on the dev server, its history is
fetched and replayed by ``temporalio.worker.Replayer``: if the workflow code
made different decisions on replay (another activity, another order, another
timer) the replay fails. A worker with ``max_cached_workflows=0`` replays the
whole history on every workflow task, so a plan that completes there with the
same result as with caching is deterministic task by task. Histories recorded by
other processes, under other hash seeds: ``test_replay_hashseed.py`` and the corpus
(``test_history_corpus.py``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHistory
from temporalio.worker import Replayer

from durable_plan import PlanWorkflow, current_step, plan_worker, start_plan
from durable_plan.language.plan import PlanResult
from durable_plan.tools.registry import ToolRegistry

RESULT_TIMEOUT_S = 30.0


# -- tools (deterministic; failures depend only on the attempt number) -------------------


def inc(value: int, by: int = 1) -> dict[str, Any]:
    """Add ``by`` to ``value``. Returns {"value": int}."""
    return {"value": value + by}


async def total(values: list[int]) -> dict[str, Any]:
    """Sum ``values``. Returns {"value": int}."""
    await asyncio.sleep(0)
    return {"value": sum(values)}


def classify(text: str) -> dict[str, Any]:
    """Score how urgent ``text`` is. Returns {"urgent": bool, "score": float}."""
    urgent = "urgent" in text.lower()
    return {"urgent": urgent, "score": 0.9 if urgent else 0.2}


def flaky(value: int, succeed_on: int = 3) -> dict[str, Any]:
    """Fail until attempt ``succeed_on``, then return {"value": value, "attempt": int}."""
    step = current_step()
    attempt = step.attempt if step is not None else 1
    if attempt < succeed_on:
        raise RuntimeError(f"flaky: attempt {attempt} failed")
    return {"value": value, "attempt": attempt}


def broken(value: int) -> dict[str, Any]:
    """Always fail."""
    raise RuntimeError(f"broken: cannot handle {value}")


TOOLS = [inc, total, classify, flaky, broken]


def registry(*tools: Any) -> ToolRegistry:
    registered = ToolRegistry()
    for tool in tools or TOOLS:
        registered.add(tool, allow_local=True)
    return registered


# -- plans ----------------------------------------------------------------------------------

CHAIN = {
    "steps": [
        {"id": "a", "tool": "inc", "args": {"value": 0}},
        {"id": "b", "tool": "inc", "bind": {"value": "steps.a.value"}},
        {"id": "c", "tool": "inc", "args": {"by": 10}, "bind": {"value": "steps.b.value"}},
        {"id": "d", "tool": "inc", "bind": {"value": "steps.c.value"}},
    ],
    "returns": ["d"],
}

FAN_OUT_IN = {
    "steps": [
        {"id": "src", "tool": "inc", "args": {"value": 1}},
        *(
            {"id": f"x{n}", "tool": "inc", "args": {"by": n}, "bind": {"value": "steps.src.value"}}
            for n in range(1, 5)
        ),
        {
            "id": "sum",
            "tool": "total",
            "bind": {"values": "[steps.x1.value, steps.x2.value, steps.x3.value, steps.x4.value]"},
        },
    ],
    "returns": ["sum"],
}

BRANCH = {
    "steps": [
        {"id": "triage", "tool": "classify", "args": {"text": "URGENT: the site is down"}},
        {
            "id": "page",
            "tool": "inc",
            "args": {"value": 100},
            "when": "steps.triage.score >= 0.8",
        },
        {
            "id": "queue",
            "tool": "inc",
            "args": {"value": 1},
            "when": "$not(steps.triage.urgent)",
        },
        {"id": "after_page", "tool": "inc", "bind": {"value": "steps.page.value"}},
        {"id": "after_queue", "tool": "inc", "bind": {"value": "steps.queue.value"}},
    ],
}

RETRIES = {
    "steps": [
        {"id": "start", "tool": "inc", "args": {"value": 1}},
        {"id": "wobbly", "tool": "flaky", "retries": 2, "bind": {"value": "steps.start.value"}},
        {"id": "dead", "tool": "broken", "retries": 1, "bind": {"value": "steps.start.value"}},
        {"id": "after_dead", "tool": "inc", "bind": {"value": "steps.dead.value"}},
        {"id": "after_wobbly", "tool": "inc", "bind": {"value": "steps.wobbly.value"}},
    ],
    "on_error": "continue",
}

LOCAL = {
    "steps": [
        {"id": "a", "tool": "inc", "args": {"value": 1}},
        {"id": "quick", "tool": "inc", "local": True, "bind": {"value": "steps.a.value"}},
        {"id": "quick2", "tool": "total", "local": True, "bind": {"values": "[steps.quick.value]"}},
        {"id": "c", "tool": "inc", "bind": {"value": "steps.quick2.value"}},
    ],
    "returns": ["c"],
}

JOIN_ANY = {
    "steps": [
        {"id": "triage", "tool": "classify", "args": {"text": "a quiet question"}},
        {"id": "hot", "tool": "inc", "args": {"value": 100}, "when": "steps.triage.urgent"},
        {"id": "cold", "tool": "inc", "args": {"value": 1}, "when": "$not(steps.triage.urgent)"},
        {
            "id": "merge",
            "tool": "total",
            "join": "any",
            "bind": {"values": "[steps.hot.value, steps.cold.value]"},
        },
    ],
    "returns": ["merge"],
}

# Expected (status per step, returned) for each case.
CASES: dict[str, tuple[dict[str, Any], dict[str, str], dict[str, Any]]] = {
    "chain": (CHAIN, dict.fromkeys("abcd", "ok"), {"d": {"value": 13}}),
    "fan_out_in": (
        FAN_OUT_IN,
        dict.fromkeys(["src", "x1", "x2", "x3", "x4", "sum"], "ok"),
        {"sum": {"value": 18}},
    ),
    "branch": (
        BRANCH,
        {
            "triage": "ok",
            "page": "ok",
            "queue": "not_taken",
            "after_page": "ok",
            "after_queue": "not_taken",
        },
        {
            "triage": {"urgent": True, "score": 0.9},
            "page": {"value": 101},
            "after_page": {"value": 102},
        },
    ),
    "retries": (
        RETRIES,
        {
            "start": "ok",
            "wobbly": "ok",
            "dead": "failed",
            "after_dead": "skipped",
            "after_wobbly": "ok",
        },
        {"start": {"value": 2}, "wobbly": {"value": 2, "attempt": 3}, "after_wobbly": {"value": 3}},
    ),
    "local": (LOCAL, dict.fromkeys(["a", "quick", "quick2", "c"], "ok"), {"c": {"value": 4}}),
    "join_any": (
        JOIN_ANY,
        {"triage": "ok", "hot": "not_taken", "cold": "ok", "merge": "ok"},
        {"merge": {"value": 2}},
    ),
}


# -- helpers --------------------------------------------------------------------------------


@pytest.fixture
async def worker(client: Client, task_queue: str) -> AsyncIterator[str]:
    async with plan_worker(client, task_queue=task_queue, registry=registry()):
        yield task_queue


async def run_and_fetch(
    client: Client,
    plan: dict[str, Any],
    *,
    task_queue: str,
    workflow_id: str,
    tools: ToolRegistry | None = None,
) -> tuple[PlanResult, WorkflowHistory]:
    handle = await start_plan(
        client,
        plan,
        task_queue=task_queue,
        registry=tools or registry(),
        workflow_id=workflow_id,
        retry_initial_interval_s=0.05,
    )
    result = await asyncio.wait_for(handle.result(), RESULT_TIMEOUT_S)
    history = await handle.handle.fetch_history()
    assert_clean(history)
    return result, history


def assert_clean(history: WorkflowHistory) -> None:
    """Completed, and no workflow task failed on the way (a live non-determinism error)."""
    types = [e.event_type for e in history.events]
    assert EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED not in types
    assert types[-1] == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED


def statuses(result: PlanResult) -> dict[str, str]:
    return {o.id: o.status for o in result.ledger}


async def _each(histories: Iterable[WorkflowHistory]) -> AsyncIterator[WorkflowHistory]:
    for history in histories:
        yield history


async def replay_failures(*histories: WorkflowHistory) -> dict[str, str]:
    """Run id -> replay error, for every history that does not replay cleanly."""
    replayer = Replayer(workflows=[PlanWorkflow])
    results = await replayer.replay_workflows(_each(histories), raise_on_replay_failure=False)
    return {run_id: repr(err) for run_id, err in results.replay_failures.items()}


async def replay(*histories: WorkflowHistory) -> None:
    failures = await replay_failures(*histories)
    assert not failures, failures


# -- tests ----------------------------------------------------------------------------------


@pytest.mark.parametrize("case", list(CASES))
async def test_recorded_history_replays(
    client: Client, worker: str, workflow_id: str, case: str
) -> None:
    plan, expected_statuses, expected_returned = CASES[case]
    result, history = await run_and_fetch(client, plan, task_queue=worker, workflow_id=workflow_id)
    assert statuses(result) == expected_statuses, result.ledger
    assert result.returned == expected_returned
    if case == "retries":
        assert result.outcome("wobbly").attempts == 3
        assert result.outcome("dead").attempts == 2
        assert "broken: cannot handle 2" in (result.outcome("dead").error or "")
    if case == "local":
        kinds = {e.event_type for e in history.events}
        assert EventType.EVENT_TYPE_MARKER_RECORDED in kinds  # local activities are markers
    await Replayer(workflows=[PlanWorkflow]).replay_workflow(history)  # raises on failure
    await replay(history)


async def test_replayer_detects_a_changed_history(
    client: Client, worker: str, workflow_id: str
) -> None:
    """The check has teeth: a history replayed against a different plan fails."""
    _, history = await run_and_fetch(client, CHAIN, task_queue=worker, workflow_id=workflow_id)
    tampered = history.to_json_dict()
    for event in tampered["events"]:
        if event.get("activityTaskScheduledEventAttributes"):
            event["activityTaskScheduledEventAttributes"]["activityType"]["name"] = "total"
            break
    else:
        pytest.fail("no activity in the chain's history")
    bad = WorkflowHistory.from_json(workflow_id, tampered)
    failures = await replay_failures(bad)
    assert list(failures) == [history.run_id], failures
    assert "nondetermin" in next(iter(failures.values())).lower(), failures


BIG_FAN_OUT = {
    "steps": [
        {"id": "seed", "tool": "inc", "args": {"value": 0}},
        *(
            {"id": f"w{n}", "tool": "inc", "args": {"by": n}, "bind": {"value": "steps.seed.value"}}
            for n in range(1, 5)
        ),
        {
            "id": "gather",
            "tool": "total",
            "bind": {"values": "[steps.w1.value, steps.w2.value, steps.w3.value, steps.w4.value]"},
        },
        {"id": "check", "tool": "classify", "args": {"text": "urgent"}, "after": ["gather"]},
        {
            "id": "finish",
            "tool": "inc",
            "bind": {"value": "steps.gather.value"},
            "when": "steps.check.urgent",
        },
    ],
}


async def test_uncached_worker_replays_every_task(
    client: Client, task_queue: str, workflow_id: str
) -> None:
    """max_cached_workflows=0: every workflow task rebuilds the workflow from its history."""
    results: dict[bool, PlanResult] = {}
    histories: list[WorkflowHistory] = []
    for cached in (True, False):
        mode = "cached" if cached else "uncached"
        queue = f"{task_queue}-{mode}"
        kwargs: dict[str, Any] = {} if cached else {"max_cached_workflows": 0}
        async with plan_worker(client, task_queue=queue, registry=registry(), **kwargs):
            result, history = await run_and_fetch(
                client, BIG_FAN_OUT, task_queue=queue, workflow_id=f"{workflow_id}-{mode}"
            )
        results[cached] = result
        histories.append(history)
        tasks = [
            e
            for e in history.events
            if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED
        ]
        assert len(tasks) >= 4  # seed, the fan-out, gather, check, finish: several tasks

    cached_result, uncached_result = results[True], results[False]
    assert len(uncached_result.ledger) == 8
    assert statuses(uncached_result) == dict.fromkeys(
        ["seed", "w1", "w2", "w3", "w4", "gather", "check", "finish"], "ok"
    )
    assert uncached_result.returned == cached_result.returned
    assert uncached_result.returned["finish"] == {"value": 15}
    assert statuses(uncached_result) == statuses(cached_result)
    assert [o.attempts for o in uncached_result.ledger] == [
        o.attempts for o in cached_result.ledger
    ]
    assert uncached_result.levels == cached_result.levels
    await replay(*histories)
