"""Every ``workflow.patched`` id workflow code asks, and the one way it asks: as recorded.

A worker replays a workflow's history whenever it takes the workflow over, so workflow code
must issue, for every history a published release recorded, the same commands in the same
order. Where it must not (a fact the history does not hold, read from the process), the
first ask of a run records a marker and every replay reads the marker, never the process.
This module owns every such id; lower layers (``check``, ``language``, ``run``) take plain
values (a flag, a rounds cap) and never name a patch. A change to what workflow code does
with a published release's history gets its id here, asked through ``recorded_fact``.

No release has been published: 0.1.0's histories, and every branch kept for them (its hook
relay, the patch levels in the plan's input, the raised rounds cap, the shape patch of the
plan workflow, the old wire forms), are retired (issue 47). Two ids remain, neither for an
old release: each marks a fact of the worker's process (its tools' code, its storage) that
the history does not carry.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from durable_plan.check import CheckedPlan, ToolCatalog
    from durable_plan.check.catalog import SHAPE_PROBLEMS
    from durable_plan.language.errors import PlanRejected

__all__ = ["RETURN_SHAPES", "STORAGE_RECORDED", "check_as_recorded", "recorded_fact"]

RETURN_SHAPES = "return-shapes"
"""Recorded when a tool's return shape refused a plan in a conversation: a conversation's
plan tool checks with the shapes the tools' code declares now, not with shapes from its
history, so a tool that declares a shape after a conversation ran a plan would otherwise
refuse that plan on replay (no child workflow where the history has one)."""
STORAGE_RECORDED = "payloads-stored"
"""Recorded when a conversation first needed to know that its workers store payloads
(External Storage) and they did: a model call over 2 MB then goes as a reference."""


def recorded_fact(marker_id: str, fact: bool) -> bool:
    """A fact about this process, as the run that first asked it found it.

    Workflow code must not decide a command from process state (another worker, or
    `durable-plan replay`, may see another answer): the first ask of a run records a marker
    when ``fact`` is true, and every replay reads the marker, never the process. Asked only
    where the answer matters (so a run that never needs it records nothing)."""
    answers = _FIRST_ANSWERS.setdefault(workflow.instance(), {})
    if marker_id not in answers:
        # The first answer holds for the run: a first False records nothing, and a later
        # True would record a marker that a replay, whose first ask (replaying) already
        # answered False, never takes (the SDK keeps a patch's first answer per run).
        if workflow.unsafe.is_replaying() or fact:
            answers[marker_id] = workflow.patched(marker_id)
        else:
            answers[marker_id] = False
    return answers[marker_id]


_FIRST_ANSWERS: weakref.WeakKeyDictionary[Any, dict[str, bool]] = weakref.WeakKeyDictionary()
"""Per workflow instance (one per run; a replay makes its own): each fact's first answer."""


def check_as_recorded(
    check: Callable[[ToolCatalog], CheckedPlan], catalog: ToolCatalog
) -> CheckedPlan:
    """``check(catalog)``: the plan tool's check in a conversation's workflow, whose verdict
    a replay gets again. The shapes come from the tools' code, not from history: a plan that
    only the shapes refuse records ``RETURN_SHAPES``; a replay without that marker ran the
    plan, and gets the verdict it had: ``check`` without shapes. A plan the shapes do not
    refuse asks nothing and records nothing. (A plan workflow needs none of this: its input
    carries its tool table, shapes and all, so ``plan_request.recorded_check`` is the
    recorded verdict as it is.)"""
    try:
        return check(catalog)
    except PlanRejected as exc:
        if not any(p.code in SHAPE_PROBLEMS for p in exc.problems):
            raise
        if recorded_fact(RETURN_SHAPES, True):
            raise
    return check(catalog.without_shapes())
