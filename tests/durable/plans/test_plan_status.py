"""What the Temporal web UI shows of a plan that is not simply running (issue 46, items 1-2).

A plan whose step failed returns its ``PlanResult`` normally (COMPLETED in Temporal's
eyes): its ``PlanStatus`` search attribute says ``failed`` and the list filters on it; a
plan waiting for a person names the call, its tool, digest and the approving command in
its current details (the built-in ``__temporal_workflow_metadata`` query, what the UI
reads), and they give way to the outcome when the wait ends. On a server without the
attribute registered nothing is upserted (an upsert would fail the task forever).
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle
from temporalio.strands_agents import StrandsPlugin

from durable_plan import plan_worker, start_plan
from durable_plan.language.digest import args_digest
from durable_plan.server import devserver
from durable_plan.server.devserver import DevServer
from durable_plan.temporal.client.status_attribute import (
    client_sees_plan_status,
    namespace_has_plan_status,
)
from durable_plan.temporal.workflows import plan_status
from durable_plan.temporal.workflows.plan_status import (
    MAX_REJECTION_BYTES,
    PLAN_STATUS,
    REJECTED_MEMO_KEY,
    note_rejection,
)
from durable_plan.temporal.workflows.versions import RETURN_SHAPES
from durable_plan.testing import ScriptedModel, TurnLike, call, say
from tests.durable.agents.test_plugin_temporal import BAD_PLAN
from tests.durable.plans.test_durable import REGISTRY, durable_worker
from tests.support.helpers import until_phase
from tests.support.plan_cases import DRAGON_PLAN
from worker import build_worker
from workflows.game_master import GameMasterInput, GameMasterWorkflow

FAILING = {
    "steps": [
        {"id": "first", "tool": "echo", "args": {"value": 1}},
        {"id": "boom", "tool": "fail", "args": {"message": "the disk is full"}, "after": ["first"]},
    ]
}
GATED = {"steps": [{"id": "rm", "tool": "delete_files", "args": {"path": "/tmp/x"}}]}


async def status_of(handle: WorkflowHandle[Any, Any]) -> str | None:
    return (await handle.describe()).typed_search_attributes.get(PLAN_STATUS)


async def details_of(handle: WorkflowHandle[Any, Any]) -> str:
    metadata = await handle.query("__temporal_workflow_metadata")
    return str(metadata.current_details)


async def listed(client: Client, query: str, workflow_id: str) -> list[str]:
    """The ids the list returns for ``query`` (visibility lags a little: asked until seen)."""
    for _ in range(50):
        ids = [w.id async for w in client.list_workflows(f'{query} AND WorkflowId="{workflow_id}"')]
        if ids:
            return ids
        await asyncio.sleep(0.1)
    return []


async def test_a_failed_step_makes_the_plan_failed_in_the_list(
    client: Client, task_queue: str
) -> None:
    assert await client_sees_plan_status(client), "our dev servers register PlanStatus"
    async with durable_worker(client, task_queue):
        handle = await start_plan(
            client, FAILING, task_queue=task_queue, registry=REGISTRY, retry_initial_interval_s=0.1
        )
        result = await handle.result()
        assert not result.ok
        assert await status_of(handle.handle) == "failed"
        assert await listed(client, 'PlanStatus="failed"', handle.id) == [handle.id]
        details = await details_of(handle.handle)
    assert "**Plan failed**" in details
    assert "`boom`" in details and "`fail`" in details and "the disk is full" in details


async def test_a_plan_that_ran_ok_says_ok(client: Client, task_queue: str) -> None:
    plan = {"steps": [{"id": "only", "tool": "echo", "args": {"value": 1}}]}
    async with durable_worker(client, task_queue):
        handle = await start_plan(client, plan, task_queue=task_queue, registry=REGISTRY)
        assert (await handle.result()).ok
        assert await status_of(handle.handle) == "ok"
        assert "**Plan ok**" in await details_of(handle.handle)


async def test_a_wait_for_a_person_names_the_call_and_the_command(
    client: Client, task_queue: str
) -> None:
    digest = args_digest({"path": "/tmp/x"})
    async with durable_worker(client, task_queue):
        handle = await start_plan(client, GATED, task_queue=task_queue, registry=REGISTRY)
        await until_phase(handle, "rm", "awaiting_approval")
        waiting = await details_of(handle.handle)
        assert "**Awaiting approval**" in waiting
        assert "`rm`" in waiting and "`delete_files`" in waiting and digest in waiting
        assert f"durable-plan approve {handle.id} rm --digest {digest}" in waiting
        assert await status_of(handle.handle) == "awaiting_approval"
        assert await listed(client, 'PlanStatus="awaiting_approval"', handle.id) == [handle.id]
        await handle.decide("rm", approved=True, args_digest=digest)
        assert (await handle.result()).ok
        after = await details_of(handle.handle)
        assert await status_of(handle.handle) == "ok"
    assert "Awaiting approval" not in after and "**Plan ok**" in after


async def test_a_rejected_step_ends_the_wait_with_the_failure(
    client: Client, task_queue: str
) -> None:
    async with durable_worker(client, task_queue):
        handle = await start_plan(client, GATED, task_queue=task_queue, registry=REGISTRY)
        await until_phase(handle, "rm", "awaiting_approval")
        await handle.decide("rm", approved=False, reason="not today")
        assert not (await handle.result()).ok
        details = await details_of(handle.handle)
        assert await status_of(handle.handle) == "failed"
    assert "Awaiting approval" not in details
    assert "rejected by a person: not today" in details


async def test_a_server_without_the_attribute_gets_no_upsert(
    monkeypatch: pytest.MonkeyPatch, task_queue: str
) -> None:
    """An upsert there would fail the workflow task forever: the plan records that it may
    not, ends normally, and shows its outcome in its details all the same."""
    monkeypatch.setattr(devserver, "SEARCH_ATTRIBUTES", {})
    async with DevServer(headless=True) as server:
        client = await server.connect()
        assert not await namespace_has_plan_status(client)
        async with plan_worker(client, task_queue=task_queue, registry=REGISTRY):
            handle = await start_plan(
                client,
                FAILING,
                task_queue=task_queue,
                registry=REGISTRY,
                retry_initial_interval_s=0.1,
            )
            result = await asyncio.wait_for(handle.result(), 30)
            details = await details_of(handle.handle)
            description = await handle.handle.describe()
    assert not result.ok
    assert "PlanStatus" not in {k.name for k, _ in description.typed_search_attributes}
    assert "**Plan failed**" in details


# -- a conversation's plans (issue 46, items 1 and 3) ---------------------------------------


@pytest.fixture(scope="module")
async def agent_client(temporal_target: str) -> AsyncIterator[Client]:
    scripts: dict[str, list[TurnLike]] = {
        "bad plan": [call("submit_workflow_plan", **BAD_PLAN), say("Let me fix that plan.")],
        "attack the dragon": [
            call("submit_workflow_plan", **DRAGON_PLAN),
            say("There is no dragon in the bestiary."),
        ],
    }
    model = {"scripted": lambda: ScriptedModel(scripts=scripts)}
    yield await Client.connect(temporal_target, plugins=[StrandsPlugin(models=model)])


async def converse(client: Client, task_queue: str, prompt: str) -> WorkflowHandle[Any, Any]:
    async with build_worker(client, task_queue):
        handle = await client.start_workflow(
            GameMasterWorkflow.run,
            GameMasterInput(prompt=prompt),
            id=f"gm-{uuid.uuid4().hex[:8]}",
            task_queue=task_queue,
        )
        await handle.result()
    return handle


def patch_markers(history: Any) -> list[str]:
    """The ids of the ``core_patch`` rows the web UI lists in a history."""
    return [
        json.loads(e.marker_recorded_event_attributes.details["patch-data"].payloads[0].data)["id"]
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED
        and e.marker_recorded_event_attributes.marker_name == "core_patch"
    ]


async def test_a_rejected_plan_leaves_a_row_in_the_conversation(
    agent_client: Client, task_queue: str
) -> None:
    handle = await converse(agent_client, task_queue, "bad plan")
    history = await handle.fetch_history()
    # The only marker: the plan's shape problems (a tool's shape comes from code, not from
    # the conversation's history: ``versions.RETURN_SHAPES``).
    assert patch_markers(history) == [RETURN_SHAPES]
    rows = [
        e.workflow_properties_modified_event_attributes.upserted_memo.fields[REJECTED_MEMO_KEY]
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED
    ]
    assert len(rows) == 1
    assert len(rows[0].data) <= MAX_REJECTION_BYTES
    record = json.loads(rows[0].data)
    assert record["tool_call"] == "tooluse_0_0"
    text = "\n".join(record["problems"])
    assert "unknown tool 'cast_spell'" in text and "loop_a -> loop_b -> loop_a" in text
    memo = await (await handle.describe()).memo_value(REJECTED_MEMO_KEY)
    assert memo == record


def test_a_rejection_record_is_bounded() -> None:
    """Many long problems: the first few, cut, and how many more there were."""
    recorded: list[dict[str, Any]] = []

    class Recorder:
        @staticmethod
        def upsert_memo(memo: dict[str, Any]) -> None:
            recorded.append(memo[REJECTED_MEMO_KEY])

    problems = [f"problem {i}: " + "x" * 1000 for i in range(50)]
    original = plan_status.workflow
    plan_status.workflow = Recorder  # type: ignore[assignment]
    try:
        note_rejection("tooluse_9", problems)
    finally:
        plan_status.workflow = original
    [record] = recorded
    assert len(json.dumps(record)) <= MAX_REJECTION_BYTES
    assert record["problems"][0].startswith("problem 0: xxx")
    assert record["more_problems"] == 50 - len(record["problems"])


async def test_a_conversations_failed_plan_is_failed_in_the_list(
    agent_client: Client, task_queue: str
) -> None:
    """The plan tool records what the plan worker found at start in the child's input."""
    handle = await converse(agent_client, task_queue, "attack the dragon")
    child = agent_client.get_workflow_handle(f"{handle.id}/plan/tooluse_0_0")
    assert await status_of(child) == "failed"
    assert patch_markers(await handle.fetch_history()) == []
    assert patch_markers(await child.fetch_history()) == []
    assert await listed(agent_client, 'PlanStatus="failed"', child.id) == [child.id]


def test_a_long_tool_call_id_keeps_the_rejection_record_bounded() -> None:
    """The toolUseId is the model's: stored whole, it alone passed ``MAX_REJECTION_BYTES``."""
    recorded: list[dict[str, Any]] = []

    class Recorder:
        @staticmethod
        def upsert_memo(memo: dict[str, Any]) -> None:
            recorded.append(memo[REJECTED_MEMO_KEY])

    original = plan_status.workflow
    plan_status.workflow = Recorder  # type: ignore[assignment]
    try:
        note_rejection("t" * 5000, ["one problem"])
    finally:
        plan_status.workflow = original
    [record] = recorded
    assert len(json.dumps(record)) <= MAX_REJECTION_BYTES
    assert record["tool_call"].startswith("tttt") and record["problems"] == ["one problem"]


class _Details:
    """What ``ApprovalDesk`` reads and sets of its workflow (its current details, its ids),
    recorded: the desk's bookkeeping, without a worker."""

    def __init__(self) -> None:
        self.shown: list[str] = []

    def get_current_details(self) -> str:
        return self.shown[-1] if self.shown else ""

    def set_current_details(self, text: str) -> None:
        self.shown.append(text)

    @staticmethod
    def info() -> Any:
        return type("Info", (), {"workflow_id": "w" * 300, "namespace": "default"})()


def _desk(monkeypatch: pytest.MonkeyPatch) -> tuple[Any, _Details, list[int]]:
    from durable_plan.temporal.workflows import approvals
    from durable_plan.temporal.workflows.approvals import ApprovalDesk

    details = _Details()
    digests: list[int] = []

    def counted(args: dict[str, Any]) -> str:
        digests.append(1)
        return args_digest(args)

    monkeypatch.setattr(approvals, "workflow", details)
    monkeypatch.setattr(plan_status, "workflow", details)
    monkeypatch.setattr(approvals, "args_digest", counted)
    return ApprovalDesk(None), details, digests


def test_a_waits_details_are_bounded_and_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    """Twelve direct calls with ids of the model's length on a conversation with a long id:
    the details passed ``MAX_DETAILS_CHARS`` (only the outcome was bounded). Now whole calls
    as many as fit (a cut command could not be pasted), the rest counted."""
    desk, details, _ = _desk(monkeypatch)
    for n in range(12):
        desk.open(f"direct/{'x' * 130}{n}", {"n": n}, "charge")
    text = details.shown[-1]
    assert len(text) <= plan_status.MAX_DETAILS_CHARS
    commands = [line for line in text.splitlines() if line.startswith("  approve: ")]
    assert commands and all(line.endswith("`") and "--digest" in line for line in commands)
    assert f"- … and {12 - len(commands)} more" in text
    assert text.endswith("`durable-plan show` lists the arguments.")


def test_a_calls_digest_is_made_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every open and close redrew the details by hashing every waiting call's arguments
    again (n² digests of arguments that may be large). Now once per call, in ``open``, and
    reused by the details, ``progress`` and the check of a decision's digest."""
    from durable_plan.temporal.wire.messages import ApprovalDecision

    desk, details, digests = _desk(monkeypatch)
    calls = [(f"c{n}", {"n": n, "blob": "y" * 1000}) for n in range(30)]
    for call_id, args in calls:
        desk.open(call_id, args, "charge")
    assert desk.details("c3")["args_digest"] == args_digest(calls[3][1])
    wrong = ApprovalDecision("c3", True, "", "0" * 16)
    assert "have digest" in str(desk.refusal(wrong))
    desk.validate(ApprovalDecision("c3", True, "", args_digest(calls[3][1])))
    assert desk.decide(ApprovalDecision("c3", False, "no")) == "rejected"
    for call_id, _args in calls:
        desk.close(call_id)
    assert len(digests) == len(calls)
    assert details.shown[-1] == ""  # the wait is over: the details are what they were


async def test_an_unanswered_attribute_question_counts_as_not_registered(
    client: Client, caplog: pytest.LogCaptureFixture
) -> None:
    """A worker asks before it polls: a server that does not answer stalled its start (the
    request had no deadline). Now it is asked with one, and silence is "not registered",
    with a log line saying so (the plan then shows its status in its details only)."""
    from datetime import timedelta

    with caplog.at_level("WARNING"):
        assert not await namespace_has_plan_status(client, timedelta(microseconds=1))
    assert "did not say within" in caplog.text
    assert await namespace_has_plan_status(client)  # the same server, given time


def test_two_desks_draw_one_details_and_give_back_what_was_there(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Review finding 6: each desk kept the details it found when its first call opened and
    put them back when its last closed, so one desk's close wiped the other's open calls
    (or brought back a stale text). Now one drawing of every desk's open calls; what the
    details were before any wait (a conversation's own) comes back when the last closes."""
    desk, details, _ = _desk(monkeypatch)
    details.set_current_details("the conversation's own details")
    paused: list[str] = []
    desk.waits.add(lambda: bool(paused), lambda limit: f"**Paused at** `{paused[0]}`")
    paused.append("x")
    desk.waits.redraw()
    desk.open("r", {"cents": 3}, "refund")
    both = details.shown[-1]
    assert "**Paused at** `x`" in both and "**Awaiting approval**" in both
    assert len(both) <= plan_status.MAX_DETAILS_CHARS
    paused.clear()
    desk.waits.redraw()
    assert "Paused at" not in details.shown[-1] and "`r`" in details.shown[-1]
    desk.close("r")
    assert details.shown[-1] == "the conversation's own details"
