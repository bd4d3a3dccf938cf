"""The plan check in workflow code, with return shapes where the history allows them.

The return-shape check (``no_field``, ``wrong_type``) refuses plans that earlier versions
ran: a plan workflow or a conversation recorded before it must replay its check without
it. So the check runs as it is, and only a plan that the shape problems refuse asks
``workflow.patched(RETURN_SHAPES_PATCH)``: a new workflow records the marker and refuses
it; a history recorded before has no marker, and gets the verdict it had (the check again
without shapes). A plan the shapes do not refuse asks nothing and records nothing new.
Workflow code.
"""

from __future__ import annotations

from collections.abc import Callable

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from durable_plan.check import CheckedPlan, ToolCatalog
    from durable_plan.check.catalog import RETURN_SHAPES_PATCH, SHAPE_PROBLEMS
    from durable_plan.language.errors import PlanRejected
    from durable_plan.temporal.patch_level import in_effect


def check_as_recorded(
    check: Callable[[ToolCatalog], CheckedPlan], catalog: ToolCatalog, patch_level: int = 0
) -> CheckedPlan:
    """``check(catalog)``, or, where the history predates the shape check and only it
    refused the plan, ``check`` without shapes (``patch_level``: the run's input's, which
    may say the shape check is in effect without a marker).

    A conversation asks this patch on its own, not as its one marker
    (``patch_level.conversation_patched``): the shapes come from the tools' code, which
    may declare one after a conversation ran, so the marker is asked only when a shape
    refuses a plan, never at a conversation's start."""
    try:
        return check(catalog)
    except PlanRejected as exc:
        if not any(p.code in SHAPE_PROBLEMS for p in exc.problems):
            raise
        if in_effect(RETURN_SHAPES_PATCH, patch_level):
            raise
    return check(catalog.without_shapes())
