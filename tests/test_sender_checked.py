"""A plan its sender checked (``SENDER_CHECKED_LEVEL``): the workflow derives the same
``CheckedPlan`` without repeating the checks left to the sender, and keeps every rule of
its own for any input, however it was written."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
from temporalio.client import Client

from activities.game_master import GAME_TOOLS
from activities.scripts import ATTACK_PLAN
from durable_plan.check import CheckedPlan, ToolCatalog, check_plan
from durable_plan.language.errors import PlanRejected
from durable_plan.temporal import plan_worker
from durable_plan.temporal.client import checked_input, plan_input
from durable_plan.temporal.messages import SENDER_CHECKED_LEVEL, PlanInput
from durable_plan.temporal.result_form import plan_result_of
from tests.test_parity import PARITY_CASES, _registry
from tests.test_patch_level import _input, _run

REGISTRY = _registry()


def _as_the_workflow_reads_it(plan: dict[str, Any]) -> PlanInput:
    """The input ``start_plan`` sends for ``plan``, through JSON as the workflow gets it."""
    request = plan_input(plan, REGISTRY)
    return PlanInput.from_wire(json.loads(json.dumps(request.to_wire())))


def _workflow_check(request: PlanInput, *, checked_by_sender: bool) -> CheckedPlan:
    """``PlanWorkflow._check``'s call, outside a workflow (the owner's rules in effect)."""
    catalog = replace(
        ToolCatalog.from_options(request.tools, owner_rules=True),
        default_model=request.default_model,
        models=request.allowed_models,
    )
    return check_plan(
        request.plan,
        catalog=catalog,
        max_steps=request.max_steps,
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
    assert request.patch_level >= SENDER_CHECKED_LEVEL
    full = _workflow_check(request, checked_by_sender=False)
    assert _workflow_check(request, checked_by_sender=True) == full


def test_checked_input_writes_the_sender_checked_level() -> None:
    checked = check_plan(ATTACK_PLAN, catalog=None, durable=True)
    assert checked_input(checked, {}).patch_level >= SENDER_CHECKED_LEVEL


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
    ],
)
def test_the_rules_the_workflow_keeps_hold_for_any_input(
    step: dict[str, Any], expected: str
) -> None:
    """Unknown tools, the owner's bounds, functions that would not replay, cycles, a map's
    body, a step reading itself: refused whatever the input's level says."""
    assert expected in _refusal({"steps": [{"id": "lookup", **step}]})


@pytest.mark.server
async def test_an_argument_only_its_sender_checks_fails_its_step_at_run_time(
    client: Client, task_queue: str
) -> None:
    """A misspelt argument in an input written by hand: at the sender-checked level the
    step fails before the tool runs, naming the argument; below it the workflow refuses
    the plan, as before."""
    misspelt = {"steps": [{**ATTACK_PLAN["steps"][0], "args": {"nmae": "goblin"}}]}
    first = ATTACK_PLAN["steps"][0]["id"]
    async with plan_worker(client, task_queue=task_queue, registry=GAME_TOOLS):
        sent = await _run(client, task_queue, _input(misspelt, level=SENDER_CHECKED_LEVEL))
        older = await _run(client, task_queue, _input(misspelt, level=SENDER_CHECKED_LEVEL - 1))
    completed = sent.events[-1].workflow_execution_completed_event_attributes
    result = plan_result_of(json.loads(completed.result.payloads[0].data))
    [line] = [line for line in result.ledger if line.id == first]
    assert line.status == "failed" and line.error is not None and "nmae" in line.error
    refused = older.events[-1].workflow_execution_failed_event_attributes
    assert "has no argument 'nmae'" in refused.failure.message


def test_a_cycle_is_refused_whatever_the_input_level() -> None:
    step = {"tool": "look_up_monster"}
    plan = {
        "steps": [
            {"id": "a", **step, "bind": {"name": "steps.b.name"}},
            {"id": "b", **step, "bind": {"name": "steps.a.name"}},
        ]
    }
    assert "dependency cycle" in _refusal(plan)
