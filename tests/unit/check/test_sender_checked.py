"""A plan its sender checked (``PlanInput.checked_by_sender``): the workflow derives the same
``CheckedPlan`` without repeating the checks left to the sender, and keeps every rule of
its own for any input, however it was written."""

from __future__ import annotations

import contextlib
import difflib
import json
import uuid
from dataclasses import replace
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowFailureError, WorkflowHistory

from activities.game_master import GAME_TOOLS
from activities.scripts import ATTACK_PLAN
from durable_plan import plan_worker
from durable_plan.check import CheckedPlan, ToolCatalog, check_plan
from durable_plan.check.base import MAX_PROBLEMS
from durable_plan.language.errors import PlanRejected
from durable_plan.temporal.client.start import _prepare, checked_input, plan_input
from durable_plan.temporal.wire.messages import PLAN_WORKFLOW_NAME
from durable_plan.temporal.wire.result_form import plan_result_of
from durable_plan.temporal.wire.workflow_inputs import PlanInput
from tests.durable.plans.test_parity import PARITY_CASES, _registry

REGISTRY = _registry()


def _input(plan: dict[str, Any], *, checked_by_sender: bool) -> dict[str, Any]:
    """The workflow input this version's client sends for ``ATTACK_PLAN``'s tools, with
    ``plan`` put in unchecked and ``checked_by_sender`` as given."""
    _, request = _prepare(ATTACK_PLAN, GAME_TOOLS, max_steps=32, max_result_bytes=2**18, model=None)
    assert request.checked_by_sender
    return PlanInput(
        **{**request.__dict__, "plan": plan, "checked_by_sender": checked_by_sender}
    ).to_wire()


async def _run(client: Client, task_queue: str, raw: dict[str, Any]) -> WorkflowHistory:
    handle = await client.start_workflow(
        PLAN_WORKFLOW_NAME, raw, id=f"checked-{uuid.uuid4()}", task_queue=task_queue
    )
    with contextlib.suppress(WorkflowFailureError):
        await handle.result()
    return await handle.fetch_history()


def _markers(history: WorkflowHistory) -> int:
    """Patch markers and search-attribute updates: a plan records neither (``versions``)."""
    kinds = (
        EventType.EVENT_TYPE_MARKER_RECORDED,
        EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES,
    )
    return sum(e.event_type in kinds for e in history.events)


def _as_the_workflow_reads_it(plan: dict[str, Any]) -> PlanInput:
    """The input ``start_plan`` sends for ``plan``, through JSON as the workflow gets it."""
    request = plan_input(plan, REGISTRY)
    return PlanInput.from_wire(json.loads(json.dumps(request.to_wire())))


def _workflow_check(request: PlanInput, *, checked_by_sender: bool) -> CheckedPlan:
    """``PlanWorkflow._check``'s call, outside a workflow (the owner's rules in effect)."""
    catalog = replace(
        ToolCatalog.from_options(request.tools),
        default_model=request.models.default_model,
        models=request.models.allowed_models,
    )
    return check_plan(
        request.plan,
        catalog=catalog,
        max_steps=request.bounds.max_steps,
        durable=True,
        inputs=request.inputs,
        checked_by_sender=checked_by_sender,
    )


def _accepted_cases() -> list[Any]:
    accepted = []
    for case in PARITY_CASES:
        try:
            plan_input(case.plan, REGISTRY)
        except PlanRejected:
            continue  # its sender refuses it: never sent
        accepted.append(case)
    return accepted


ACCEPTED = _accepted_cases()


def test_most_parity_cases_are_sent() -> None:
    """The cases below cover maps, reduces, exits, branches, joins and templates."""
    assert len(ACCEPTED) >= 30


@pytest.mark.parametrize("case", ACCEPTED, ids=[c.name for c in ACCEPTED])
def test_a_plan_its_sender_checked_gives_the_same_checked_plan(case: Any) -> None:
    request = _as_the_workflow_reads_it(case.plan)
    assert request.checked_by_sender
    full = _workflow_check(request, checked_by_sender=False)
    assert _workflow_check(request, checked_by_sender=True) == full


def test_checked_input_says_its_sender_checked_it() -> None:
    checked = check_plan(ATTACK_PLAN, catalog=None, durable=True)
    request = checked_input(checked, {})
    assert request.checked_by_sender
    assert PlanInput.from_wire(json.loads(json.dumps(request.to_wire()))).checked_by_sender


def _refusal(plan: dict[str, Any]) -> str:
    """What the sender-checked workflow check says of ``plan`` (sent by hand, unchecked)."""
    request = _as_the_workflow_reads_it(ATTACK_PLAN_FOR_REGISTRY)
    request = replace(request, plan=plan)
    with pytest.raises(PlanRejected) as refused:
        _workflow_check(request, checked_by_sender=True)
    return str(refused.value)


ATTACK_PLAN_FOR_REGISTRY = {
    "steps": [{"id": "lookup", "tool": "look_up_monster", "args": {"name": "goblin"}}]
}


@pytest.mark.parametrize(
    ("step", "expected"),
    [
        ({"tool": "look_up_monstr", "args": {"name": "goblin"}}, "unknown tool 'look_up_monstr'"),
        ({"tool": "look_up_monster", "args": {"name": "goblin"}, "retries": 9}, "retries 9"),
        ({"tool": "look_up_monster", "bind": {"name": "$string($now())"}}, "$now"),
        ({"tool": "look_up_monster", "bind": {"name": "steps.lookup.name"}}, "its own result"),
        ({"tool": "map", "args": {"over": [1], "do": {"tool": "nope"}}}, "unknown tool 'nope'"),
        ({"tool": "look_up_monster", "args": {"nmae": "goblin"}}, "has no argument 'nmae'"),
        ({"tool": "look_up_monster", "args": {"name": 7}}, "argument 'name' is invalid"),
        ({"tool": "exit", "args": {"status": "maybe"}}, "status"),
        (
            {"tool": "agent", "args": {"prompt": "p", "output_schema": {}, "max_iterations": 999}},
            "max_iterations",
        ),
    ],
)
def test_the_rules_the_workflow_keeps_hold_for_any_input(
    step: dict[str, Any], expected: str
) -> None:
    """Unknown tools, the owner's bounds, arguments, functions that would not replay, a
    map's body, an exit's and an agent step's rules, a step reading itself: refused
    whatever the input says."""
    assert expected in _refusal({"steps": [{"id": "lookup", **step}]})


@pytest.mark.server
async def test_a_binding_only_its_sender_checks_fails_its_step_at_run_time(
    client: Client, task_queue: str
) -> None:
    """A binding of a field the tool's result shape lacks, in an input written by hand: at
    a sender-checked input the step that reads it fails at run time, naming the binding,
    and nothing after it runs; in one not said to be checked the workflow refuses the plan.
    Neither records a patch marker."""
    misread = json.loads(json.dumps(ATTACK_PLAN))
    misread["steps"][1]["bind"] = {"armour": "steps.lookup.armor"}
    async with plan_worker(client, task_queue=task_queue, registry=GAME_TOOLS):
        sent = await _run(client, task_queue, _input(misread, checked_by_sender=True))
        older = await _run(client, task_queue, _input(misread, checked_by_sender=False))
    completed = sent.events[-1].workflow_execution_completed_event_attributes
    result = plan_result_of(json.loads(completed.result.payloads[0].data))
    lines = {line.id: line for line in result.ledger}
    assert lines["lookup"].status == "ok"
    assert lines["attack"].status == "failed"
    assert "binding 'armour' matched no value: steps.lookup has keys" in (
        lines["attack"].error or ""
    )
    assert lines["damage"].status != "ok"
    refused = older.events[-1].workflow_execution_failed_event_attributes
    assert "steps.lookup has no field 'armor'" in refused.failure.message
    assert _markers(sent) == _markers(older) == 0


def test_a_cycle_is_refused_whatever_the_input_says() -> None:
    step = {"tool": "look_up_monster"}
    plan = {
        "steps": [
            {"id": "a", **step, "bind": {"name": "steps.b.name"}},
            {"id": "b", **step, "bind": {"name": "steps.a.name"}},
        ]
    }
    assert "dependency cycle" in _refusal(plan)


def test_the_step_count_and_the_size_still_bound_a_sender_checked_input() -> None:
    """Far over ``max_steps``, refused before any step is checked; over the plan's size,
    the walk refuses it naming the bound (anyone may write such an input)."""
    many = {"steps": [{"id": f"s{i}", "tool": "look_up_monstr"} for i in range(3000)]}
    refusal = _refusal(many)
    assert "the plan has 3000 steps; the limit is 32" in refusal and "unknown tool" not in refusal
    big = {"steps": [{"id": "lookup", "tool": "look_up_monster", "args": {"name": "x" * 600_000}}]}
    assert "KiB; the limit is 512 KiB" in _refusal(big)


def test_a_duplicate_id_is_refused_whatever_the_input_says() -> None:
    step = {"id": "lookup", "tool": "look_up_monster", "args": {"name": "goblin"}}
    assert "is used more than once" in _refusal({"steps": [step, step]})


def test_checked_input_refuses_a_plan_not_checked_for_a_durable_run() -> None:
    with pytest.raises(ValueError, match="durable=True"):
        checked_input(check_plan(ATTACK_PLAN, catalog=None), {})


def _dangling_ids() -> list[dict[str, Any]]:
    steps: list[dict[str, Any]] = [
        {"id": f"s{i}", "tool": "look_up_monster", "args": {"name": "goblin"}} for i in range(8)
    ]
    steps[0]["after"] = [f"x{i}" for i in range(5000)]
    return steps


def _unknown_fields() -> list[dict[str, Any]]:
    step = {"id": "s0", "tool": "look_up_monster", "args": {"name": "goblin"}}
    return [{**step, **{f"field{i}": 1 for i in range(3000)}}]


def _unknown_agent_args() -> list[dict[str, Any]]:
    args = {"prompt": "p", "output_schema": {}, **{f"arg{i}": 1 for i in range(3000)}}
    return [{"id": "s0", "tool": "agent", "args": args}]


def _unmatched_tool_patterns() -> list[dict[str, Any]]:
    args = {"prompt": "p", "output_schema": {}, "tools": [f"zz{i}" for i in range(3000)]}
    return [{"id": "s0", "tool": "agent", "args": args}]


@pytest.mark.parametrize(
    "steps", [_dangling_ids, _unknown_fields, _unknown_agent_args, _unmatched_tool_patterns]
)
def test_past_the_listed_problems_no_suggestion_is_searched(
    monkeypatch: pytest.MonkeyPatch, steps: Any
) -> None:
    """Thousands of misspelt names in a plan within its size: each "did you mean" compares
    a name with every candidate, so only the listed problems get one (it took seconds)."""
    searched = []
    real = difflib.get_close_matches

    def counted(*args: Any, **kwargs: Any) -> list[str]:
        searched.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(difflib, "get_close_matches", counted)
    for checked_by_sender in (False, True):
        searched.clear()
        sent = _as_the_workflow_reads_it(ATTACK_PLAN_FOR_REGISTRY)
        request = replace(sent, plan={"steps": steps()})
        with pytest.raises(PlanRejected) as refused:
            _workflow_check(request, checked_by_sender=checked_by_sender)
        assert len(refused.value.problems) == MAX_PROBLEMS
        assert len(searched) <= MAX_PROBLEMS


def test_a_sender_checked_plan_is_walked_where_the_walk_could_refuse_its_size() -> None:
    """Small numbers cost the walk four times their text: 140 KB of ``1,`` is over the
    limit for the full check, and so for a plan its sender is said to have checked."""
    step = {"id": "lookup", "tool": "look_up_monster", "args": {"name": "goblin"}}
    refusal = _refusal({"steps": [{**step, "after": [1] * 70_000}]})
    assert "KiB; the limit is 512 KiB" in refusal
