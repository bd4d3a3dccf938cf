"""``PlanInput.patch_level``, on the real dev server: a plan started by this version's client
asks none of the workflow's patches and records no marker (770 bytes of every plan's history
before), yet runs under every patched behaviour; an input without the level (a client or a
history from before) asks each, as it always did; and the level, being in the recorded input,
is what replay reads: the same history with it taken out diverges."""

from __future__ import annotations

import contextlib
import json
import uuid
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowFailureError, WorkflowHistory

from activities.game_master import GAME_TOOLS
from activities.scripts import ATTACK_PLAN
from durable_plan.temporal import plan_worker
from durable_plan.temporal.client import _prepare
from durable_plan.temporal.messages import (
    COMPACT_FORMS_LEVEL,
    PLAN_WORKFLOW_NAME,
    SENDER_CHECKED_LEVEL,
    PlanInput,
)
from durable_plan.temporal.patch_level import (
    CURRENT_PATCH_LEVEL,
    OWNER_RULES_PATCH,
    PATCH_NUMBERS,
    STORE_PER_RUN_PATCH,
)
from durable_plan.temporal.replay import replay
from durable_plan.temporal.result_form import plan_result_of

pytestmark = pytest.mark.server

LOOSENED = {"steps": [{**ATTACK_PLAN["steps"][0], "retries": 9}]}
"""Asks for more retries than the tool's owner allows: only the owner-rules patch refuses it."""


def _input(plan: dict[str, Any], *, level: int | None) -> dict[str, Any]:
    """The workflow input this version's client sends for ``ATTACK_PLAN``'s tools, with
    ``plan`` put in unchecked and ``patch_level`` as given (None: left off, as before)."""
    _, request = _prepare(ATTACK_PLAN, GAME_TOOLS, max_steps=32, max_result_bytes=2**18, model=None)
    assert request.patch_level == CURRENT_PATCH_LEVEL
    wire = PlanInput(**{**request.__dict__, "plan": plan}).to_wire()
    if level is None:
        wire["settings"].pop("patch_level")
    else:
        wire["settings"]["patch_level"] = level
    return wire


def _patches(history: WorkflowHistory) -> list[str]:
    found = []
    for event in history.events:
        details = event.marker_recorded_event_attributes.details
        if event.event_type == EventType.EVENT_TYPE_MARKER_RECORDED and "patch-data" in details:
            found.append(json.loads(details["patch-data"].payloads[0].data)["id"])
    return found


def _upserts(history: WorkflowHistory) -> int:
    kind = EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES
    return sum(e.event_type == kind for e in history.events)


def _with_level(history: WorkflowHistory, level: int | None) -> WorkflowHistory:
    """The same history with its recorded input's ``patch_level`` changed (None: off)."""
    copied = WorkflowHistory.from_json(history.workflow_id, history.to_json())
    payload = copied.events[0].workflow_execution_started_event_attributes.input.payloads[0]
    raw = json.loads(payload.data)
    raw["settings"].pop("patch_level", None)
    if level is not None:
        raw["settings"]["patch_level"] = level
    payload.data = json.dumps(raw).encode()
    return copied


async def _run(client: Client, task_queue: str, raw: dict[str, Any]) -> WorkflowHistory:
    handle = await client.start_workflow(
        PLAN_WORKFLOW_NAME, raw, id=f"level-{uuid.uuid4()}", task_queue=task_queue
    )
    with contextlib.suppress(WorkflowFailureError):
        await handle.result()
    return await handle.fetch_history()


def test_every_patch_has_a_number_of_its_own() -> None:
    # Levels 6 and 7 are the compact wire forms' and a plan its sender checked
    # (``COMPACT_FORMS_LEVEL``, ``SENDER_CHECKED_LEVEL``): no patch is asked for them.
    numbers = [*PATCH_NUMBERS.values(), COMPACT_FORMS_LEVEL, SENDER_CHECKED_LEVEL]
    assert sorted(numbers) == list(range(1, len(numbers) + 1))
    assert len(numbers) == CURRENT_PATCH_LEVEL


async def test_a_new_plan_records_no_marker_and_an_old_input_records_them_all(
    client: Client, task_queue: str
) -> None:
    async with plan_worker(client, task_queue=task_queue, registry=GAME_TOOLS):
        new = await _run(client, task_queue, _input(ATTACK_PLAN, level=CURRENT_PATCH_LEVEL))
        old = await _run(client, task_queue, _input(ATTACK_PLAN, level=None))
    assert _patches(new) == [] and _upserts(new) == 0
    assert OWNER_RULES_PATCH in _patches(old) and STORE_PER_RUN_PATCH in _patches(old)
    assert _upserts(old) == len(_patches(old))
    # The same plan, the same ledger either way.
    results = []
    for history in (new, old):
        last = history.events[-1].workflow_execution_completed_event_attributes
        payload = plan_result_of(json.loads(last.result.payloads[0].data))
        results.append([(line.id, line.status) for line in payload.ledger])
    assert results[0] == results[1] == [("lookup", "ok"), ("attack", "ok"), ("damage", "ok")]
    # A worker of the release before ignores the level and records every marker: this
    # release replays that history too (it takes the markers where they were recorded).
    older_worker = _with_level(old, CURRENT_PATCH_LEVEL)
    outcomes = await replay([("new", new), ("old", old), ("older worker", older_worker)])
    assert [o.ok for o in outcomes] == [True, True, True], [o.line() for o in outcomes]


async def test_the_recorded_level_decides_on_replay(client: Client, task_queue: str) -> None:
    """The owner's rules refuse a plan that loosens them, with no marker; replaying that
    history without its level asks the patch, finds no marker, skips the rules, schedules
    the step the history never had, and diverges."""
    async with plan_worker(client, task_queue=task_queue, registry=GAME_TOOLS):
        refused = await _run(client, task_queue, _input(LOOSENED, level=CURRENT_PATCH_LEVEL))
    failed = refused.events[-1].workflow_execution_failed_event_attributes
    assert "more than the 2 that tool 'look_up_monster' allows" in failed.failure.message
    assert _patches(refused) == []
    kinds = {e.event_type for e in refused.events}
    assert EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED not in kinds
    as_recorded, without = await replay(
        [("as recorded", refused), ("without level", _with_level(refused, None))]
    )
    assert as_recorded.ok, as_recorded.line()
    assert not without.ok and "nondeterminism" in without.line().lower(), without.line()
