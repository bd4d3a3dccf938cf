"""PlanWorkflow on a real Temporal dev server: same results as in-process, plus durability."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from datetime import timedelta
from typing import Any

import pytest
from temporalio import activity
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError
from temporalio.exceptions import ApplicationError

from durable_plan import PlanInput, PlanWorkflow, current_step, plan_worker, run_plan, start_plan
from durable_plan.language.errors import PlanRejected
from durable_plan.tools.registry import ToolRegistry
from tests.support.case_tools import CASE_TOOLS
from tests.support.helpers import phase_is, until_phase, until_progress


async def flaky(key: str, succeed_on: int) -> dict[str, Any]:
    """Fails until attempt ``succeed_on`` (attempt numbers come from Temporal)."""
    step = current_step()
    assert step is not None
    if step.attempt < succeed_on:
        raise ConnectionError(f"transient failure on attempt {step.attempt}")
    return {"key": key, "attempt": step.attempt}


async def refuse(reason: str) -> None:
    raise ApplicationError(reason, non_retryable=True)


async def whoami() -> dict[str, Any]:
    step = current_step()
    assert step is not None
    return {"key": step.idempotency_key, "step": step.step_id}


async def big(kib: int) -> str:
    return "x" * (kib * 1024)


async def slow(seconds: float, value: Any = None) -> Any:
    await asyncio.sleep(seconds)
    return value


async def hang(seconds: float) -> None:
    while True:
        activity.heartbeat()
        await asyncio.sleep(min(seconds, 0.1))


async def delete_files(path: str) -> dict[str, Any]:
    return {"deleted": path}


def make_registry() -> ToolRegistry:
    registry = ToolRegistry()
    for name, fn in CASE_TOOLS.items():
        registry.add(fn, name=name, retries=0 if name == "fail" else None, allow_local=True)
    registry.add(flaky, retries=3)
    registry.add(refuse, retries=5)
    registry.add(whoami)
    registry.add(big)
    registry.add(slow)
    registry.add(hang, retries=0, heartbeat_timeout_s=2)
    registry.add(delete_files, requires_approval=True)
    return registry


REGISTRY = make_registry()


def durable_worker(client: Client, task_queue: str, **kwargs: Any) -> Any:
    return plan_worker(client, task_queue=task_queue, registry=REGISTRY, **kwargs)


async def run(client: Client, task_queue: str, plan: dict[str, Any], **kw: Any) -> Any:
    return await run_plan(
        client, plan, task_queue=task_queue, registry=REGISTRY, retry_initial_interval_s=0.1, **kw
    )


# -- concurrency and retries -----------------------------------------------------------------


async def test_independent_steps_overlap(client: Client, task_queue: str) -> None:
    plan = {
        "steps": [
            {"id": "a", "tool": "slow", "args": {"seconds": 1, "value": 1}},
            {"id": "b", "tool": "slow", "args": {"seconds": 1, "value": 2}},
            {"id": "c", "tool": "add", "bind": {"a": "steps.a", "b": "steps.b"}},
        ]
    }
    async with durable_worker(client, task_queue):
        started = time.monotonic()
        result = await run(client, task_queue, plan)
        elapsed = time.monotonic() - started
    assert result.returned == {"a": 1, "b": 2, "c": 3}
    assert elapsed < 1.9, f"two 1 s steps took {elapsed:.2f} s: they did not overlap"


async def test_transient_failures_are_retried(client: Client, task_queue: str) -> None:
    plan = {"steps": [{"id": "f", "tool": "flaky", "args": {"key": "k", "succeed_on": 3}}]}
    async with durable_worker(client, task_queue):
        result = await run(client, task_queue, plan)
    outcome = result.outcome("f")
    assert outcome.status == "ok"
    assert outcome.attempts == 3
    assert result.returned["f"] == {"key": "k", "attempt": 3}


async def test_retries_are_bounded_by_the_step(client: Client, task_queue: str) -> None:
    plan = {
        "steps": [{"id": "f", "tool": "flaky", "args": {"key": "k", "succeed_on": 5}, "retries": 1}]
    }
    async with durable_worker(client, task_queue):
        result = await run(client, task_queue, plan)
    outcome = result.outcome("f")
    assert outcome.status == "failed"
    assert outcome.attempts == 2
    assert "transient failure on attempt 2" in (outcome.error or "")


async def test_non_retryable_error_fails_at_once(client: Client, task_queue: str) -> None:
    plan = {"steps": [{"id": "r", "tool": "refuse", "args": {"reason": "account closed"}}]}
    async with durable_worker(client, task_queue):
        result = await run(client, task_queue, plan)
    outcome = result.outcome("r")
    assert (outcome.status, outcome.attempts, outcome.error) == ("failed", 1, "account closed")


async def test_bad_argument_is_not_retried_and_names_the_parameter(
    client: Client, task_queue: str
) -> None:
    plan = {
        "steps": [
            {"id": "t", "tool": "echo", "args": {"value": "seven"}},
            {"id": "a", "tool": "add", "args": {"a": 1}, "bind": {"b": "steps.t"}},
        ]
    }
    async with durable_worker(client, task_queue):
        result = await run(client, task_queue, plan)
    outcome = result.outcome("a")
    assert outcome.status == "failed"
    assert outcome.attempts == 1
    assert "argument 'b'" in (outcome.error or "")


# -- failure is always an ending -------------------------------------------------------------


async def test_hung_tool_times_out(client: Client, task_queue: str) -> None:
    plan = {"steps": [{"id": "h", "tool": "hang", "args": {"seconds": 30}, "timeout_s": 0.5}]}
    async with durable_worker(client, task_queue):
        result = await run(client, task_queue, plan)
    outcome = result.outcome("h")
    assert outcome.status == "failed"
    assert "timed out after 0.5 s" in (outcome.error or "")


async def test_oversized_result_fails_the_step_with_its_size(
    client: Client, task_queue: str
) -> None:
    plan = {"steps": [{"id": "huge", "tool": "big", "args": {"kib": 300}}]}
    async with durable_worker(client, task_queue):
        # Without the result store (tests/durable/storage/test_claim_check.py has the default, by
        # reference).
        result = await run(client, task_queue, plan, store_results=False)
    outcome = result.outcome("huge")
    assert outcome.status == "failed"
    assert outcome.attempts == 1
    error = outcome.error or ""
    assert "step 'huge'" in error and "300 KiB" in error and "256 KiB" in error


async def test_result_limit_is_configurable(client: Client, task_queue: str) -> None:
    plan = {"steps": [{"id": "b", "tool": "big", "args": {"kib": 8}}]}
    async with durable_worker(client, task_queue):
        result = await run(client, task_queue, plan, max_result_bytes=4 * 1024, store_results=False)
    assert result.outcome("b").status == "failed"
    assert "over the 4 KiB limit" in (result.outcome("b").error or "")


async def test_bad_plan_is_rejected_before_a_workflow_starts(
    client: Client, task_queue: str, workflow_id: str
) -> None:
    plan = {
        "steps": [
            {"id": "a", "tool": "nope"},
            {"id": "b", "tool": "echo", "bind": {"value": "steps.zz"}},
        ]
    }
    with pytest.raises(PlanRejected) as info:
        await start_plan(
            client, plan, task_queue=task_queue, registry=REGISTRY, workflow_id=workflow_id
        )
    assert set(info.value.codes) == {"unknown_tool", "dangling_reference"}
    listed = [wf async for wf in client.list_workflows(f"WorkflowId = '{workflow_id}'")]
    assert listed == []


async def test_workflow_given_a_bad_plan_fails_instead_of_retrying(
    client: Client, task_queue: str, workflow_id: str
) -> None:
    request = PlanInput(plan={"steps": [{"id": "a", "tool": "echo", "when": "steps.a = "}]})
    async with durable_worker(client, task_queue):
        with pytest.raises(WorkflowFailureError) as info:
            await client.execute_workflow(
                PlanWorkflow.run, request, id=workflow_id, task_queue=task_queue
            )
    assert isinstance(info.value.cause, ApplicationError)
    assert info.value.cause.type == "PlanRejected"
    assert "Plan rejected, nothing was executed" in info.value.cause.message


async def test_returned_results_over_the_limit_come_back_as_previews(
    client: Client, task_queue: str
) -> None:
    """Issue 22 (4): the plan did its work, so it never fails for the size of its answer
    (a model told "list fewer steps in returns" resubmitted the steps and repeated their
    effects): results are kept in returns order while they fit, the rest are previews."""
    plan = {
        "steps": [{"id": f"b{n}", "tool": "big", "args": {"kib": 200}} for n in range(3)],
        "final": True,
    }
    async with durable_worker(client, task_queue):
        result = await run(client, task_queue, plan, max_returned_bytes=512 * 1024)
    assert [o.status for o in result.ledger] == ["ok", "ok", "ok"]
    assert result.returned["b0"] == "x" * 200 * 1024 and result.returned["b1"] == "x" * 200 * 1024
    preview = result.returned["b2"]
    assert isinstance(preview, dict) and preview["$preview"] == '"' + "x" * 199
    assert preview["bytes"] == 200 * 1024 + 2 and "step ran ok" in preview["omitted"]
    assert result.final is False, "an answer with previews is not the complete answer"


async def test_cancelled_plan_ends_cancelled(client: Client, task_queue: str) -> None:
    plan = {"steps": [{"id": "h", "tool": "hang", "args": {"seconds": 30}}]}
    async with durable_worker(client, task_queue):
        handle = await start_plan(client, plan, task_queue=task_queue, registry=REGISTRY)
        await until_phase(handle, "h", "running")
        await handle.handle.cancel()
        with pytest.raises(WorkflowFailureError):
            await handle.handle.result()
        description = await handle.handle.describe()
    assert description.status == WorkflowExecutionStatus.CANCELED


# -- progress, idempotency, local activities -------------------------------------------------


async def test_progress_query_reports_the_ledger_so_far(client: Client, task_queue: str) -> None:
    plan = {
        "steps": [
            {"id": "fast", "tool": "echo", "args": {"value": 1}},
            {"id": "wait", "tool": "slow", "args": {"seconds": 1.5}, "after": ["fast"]},
            {"id": "last", "tool": "echo", "bind": {"value": "steps.fast"}, "after": ["wait"]},
        ]
    }
    async with durable_worker(client, task_queue):
        handle = await start_plan(client, plan, task_queue=task_queue, registry=REGISTRY)
        lines = await until_progress(handle, phase_is("wait", "running"))
        phases = {line["id"]: line["phase"] for line in lines}
        assert phases == {"fast": "ok", "wait": "running", "last": "pending"}
        assert lines[0]["attempts"] == 1
        assert lines[1]["attempts"] == 1  # live, from the server's pending activities
        result = await handle.result()
        final = await handle.progress()
    assert result.ok
    assert [line["phase"] for line in final] == ["ok", "ok", "ok"]
    assert final[1]["duration_ms"] >= 1400


async def test_progress_shows_live_attempts_of_a_retrying_step(
    client: Client, task_queue: str
) -> None:
    plan = {"steps": [{"id": "f", "tool": "flaky", "args": {"key": "k", "succeed_on": 3}}]}
    async with durable_worker(client, task_queue):
        handle = await start_plan(
            client, plan, task_queue=task_queue, registry=REGISTRY, retry_initial_interval_s=1.0
        )
        [line] = await until_progress(
            handle, lambda lines: lines[0]["attempts"] >= 2, what="a second attempt", timeout_s=15
        )
        assert line["phase"] == "running" and line["attempts"] >= 2
        assert "transient failure on attempt" in (line["error"] or "")
        result = await handle.result()
    assert result.outcome("f").attempts == 3


async def test_each_step_gets_an_idempotency_key(client: Client, task_queue: str) -> None:
    plan = {"steps": [{"id": "me", "tool": "whoami"}]}
    workflow_id = f"plan-{uuid.uuid4().hex[:8]}"
    async with durable_worker(client, task_queue):
        result = await run(client, task_queue, plan, workflow_id=workflow_id)
    assert result.returned["me"] == {"key": f"{workflow_id}/me", "step": "me"}


async def test_local_activity_steps(client: Client, task_queue: str) -> None:
    plan = {
        "steps": [
            {"id": "a", "tool": "add", "args": {"a": 1, "b": 2}, "local": True},
            {"id": "b", "tool": "add", "args": {"a": 10}, "bind": {"b": "steps.a"}},
        ]
    }
    async with durable_worker(client, task_queue):
        handle = await start_plan(client, plan, task_queue=task_queue, registry=REGISTRY)
        result = await handle.result()
        history = await handle.handle.fetch_history()
    assert result.returned == {"a": 3, "b": 13}
    scheduled = [
        e for e in history.events if e.HasField("activity_task_scheduled_event_attributes")
    ]
    markers = [
        e
        for e in history.events
        if e.HasField("marker_recorded_event_attributes")
        and e.marker_recorded_event_attributes.marker_name == "core_local_activity"
    ]
    assert len(scheduled) == 1 and len(markers) == 1


async def test_activity_ids_and_summaries_name_the_steps(client: Client, task_queue: str) -> None:
    plan = {"steps": [{"id": "lookup", "tool": "look_up_monster", "args": {"name": "goblin"}}]}
    summaries = []
    async with durable_worker(client, task_queue):
        for ui in ("summary", "full"):
            handle = await start_plan(
                client, plan, task_queue=task_queue, registry=REGISTRY, ui_metadata=ui
            )
            await handle.result()
            history = await handle.handle.fetch_history()
            scheduled = [
                e for e in history.events if e.HasField("activity_task_scheduled_event_attributes")
            ]
            attrs = scheduled[0].activity_task_scheduled_event_attributes
            assert attrs.activity_id == "lookup"
            assert attrs.activity_type.name == "look_up_monster"
            summaries.append(scheduled[0].user_metadata.summary.data)
    # The UI shows the activity type (the tool) and id (the step) already; asked for, the
    # summary adds the step's level.
    assert summaries[0] == b""
    assert json.loads(summaries[1]) == "lookup · level 0"


# -- approval gates --------------------------------------------------------------------------


async def test_gated_step_waits_for_approval(client: Client, task_queue: str) -> None:
    plan = {"steps": [{"id": "rm", "tool": "delete_files", "args": {"path": "/tmp/x"}}]}
    async with durable_worker(client, task_queue):
        handle = await start_plan(client, plan, task_queue=task_queue, registry=REGISTRY)
        await until_phase(handle, "rm", "awaiting_approval")
        assert await handle.decide("rm", approved=True) == "approved"
        result = await handle.result()
    assert result.returned == {"rm": {"deleted": "/tmp/x"}}


async def test_rejected_step_fails_cleanly(client: Client, task_queue: str) -> None:
    plan = {
        "steps": [
            {"id": "rm", "tool": "delete_files", "args": {"path": "/"}},
            {"id": "after", "tool": "echo", "bind": {"value": "steps.rm"}},
        ]
    }
    async with durable_worker(client, task_queue):
        handle = await start_plan(client, plan, task_queue=task_queue, registry=REGISTRY)
        await until_phase(handle, "rm", "awaiting_approval")
        with pytest.raises(Exception, match="not awaiting approval"):
            await handle.decide("after", approved=True)
        await handle.decide("rm", approved=False, reason="never delete /")
        result = await handle.result()
    assert result.outcome("rm").status == "failed"
    assert result.outcome("rm").error == "rejected by a person: never delete /"
    assert result.outcome("after").status == "skipped"


async def test_tool_can_default_to_local_activities(client: Client, task_queue: str) -> None:
    registry = ToolRegistry()
    registry.add(CASE_TOOLS["add"], name="add", local=True)
    plan = {"steps": [{"id": "a", "tool": "add", "args": {"a": 1, "b": 2}}]}
    async with plan_worker(client, task_queue=task_queue, registry=registry):
        handle = await start_plan(
            client,
            plan,
            task_queue=task_queue,
            registry=registry,
            start_options={"execution_timeout": timedelta(minutes=1)},
        )
        result = await handle.result()
        history = await handle.handle.fetch_history()
    assert result.returned == {"a": 3}
    assert not any(e.HasField("activity_task_scheduled_event_attributes") for e in history.events)
    assert any(e.HasField("marker_recorded_event_attributes") for e in history.events)


@activity.defn(name="legacy_lookup")
async def legacy_lookup(key: str, default: str = "none") -> dict[str, str]:
    """An activity a worker already had, planned as it is (positional arguments)."""
    return {"key": key, "value": default}


async def test_existing_activity_runs_as_a_step(client: Client, task_queue: str) -> None:
    registry = ToolRegistry([legacy_lookup])
    registry.add(CASE_TOOLS["echo"], name="echo")
    plan = {
        "steps": [
            {"id": "k", "tool": "echo", "args": {"value": "colour"}},
            {
                "id": "l",
                "tool": "legacy_lookup",
                "bind": {"key": "steps.k"},
                "args": {"default": "red"},
            },
        ]
    }
    async with plan_worker(client, task_queue=task_queue, registry=registry):
        result = await run_plan(client, plan, task_queue=task_queue, registry=registry)
    assert result.returned["l"] == {"key": "colour", "value": "red"}


FAILURES: list[int] = []


async def always_fails(n: int) -> None:
    """Fail every time (counting the calls)."""
    FAILURES.append(n)
    raise RuntimeError(f"failure {len(FAILURES)}")


async def test_the_tools_own_failures_spend_exactly_its_retries(
    client: Client, task_queue: str
) -> None:
    registry = ToolRegistry()
    registry.add(always_fails, retries=2)
    FAILURES.clear()
    plan = {"steps": [{"id": "f", "tool": "always_fails", "args": {"n": 1}}]}
    async with plan_worker(client, task_queue=task_queue, registry=registry):
        result = await run_plan(
            client, plan, task_queue=task_queue, registry=registry, retry_initial_interval_s=0.05
        )
    outcome = result.outcome("f")
    assert outcome.status == "failed" and outcome.attempts == 3
    assert len(FAILURES) == 3, "interruption allowance is not spent by the tool's own failures"
    assert outcome.error == "RuntimeError: failure 3"
