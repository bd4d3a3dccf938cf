"""Saved plans in-process: a call of ``plan__<name>`` is a nested run of the same engine.

``agent_steps`` wraps every in-process invoker with this, so each way a plan runs here (a
plain agent's plan, ``execute_plan``, ``durable-plan run --local``) calls saved plans alike:
top-level, as a map's or reduce's body (a whole plan per item) and from an agent step's
tools. The nested plan's calls go through the caller's whole invoker (the owner's hooks,
timeouts, queue limits, agent steps and saved plans), under the caller's catalogue, so a
saved plan can do nothing its caller could not. The rules shared with the durable runner
(inputs, the check, the result) are ``run/nested.py``.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from durable_plan.check import ToolCatalog
from durable_plan.check.saved_plans import saved_plan_of
from durable_plan.run.calls import Invoker
from durable_plan.run.engine import PlanRun
from durable_plan.run.events import current_step
from durable_plan.run.nested import (
    Nesting,
    calls_from_agent,
    check_saved_call,
    is_saved_plan,
    learned_within,
    recall_within,
    saved_plan_inputs,
    saved_plan_outcome,
)
from durable_plan.tools.registry import ToolRegistry

_NESTING: contextvars.ContextVar[Nesting | None] = contextvars.ContextVar(
    "durable_plan_nesting", default=None
)
"""The nesting of the in-process plan running in this task: each step's task is started in
a copy of its plan's context (``run.events.step_context``), so a nested run's calls see it."""


_CALLER: contextvars.ContextVar[PlanRun | None] = contextvars.ContextVar(
    "durable_plan_caller", default=None
)
"""The in-process plan run whose step runs in this task: a saved plan it calls reuses the
steps its memory holds of that call and hands back what it learned (``run/nested.py``)."""


def enter_caller(run: PlanRun) -> contextvars.Token[PlanRun | None]:
    """``run`` is the caller of the saved plans its steps call (``run_checked``)."""
    return _CALLER.set(run)


def leave_caller(token: contextvars.Token[PlanRun | None]) -> None:
    _CALLER.reset(token)


def current_nesting() -> Nesting:
    """Where the in-process plan running in this task sits (``Nesting()``: at the top)."""
    return _NESTING.get() or Nesting()


def saved_plans(
    invoke: Invoker,
    catalog: ToolCatalog,
    whole: Callable[[], Invoker],
    timeouts: Mapping[str, float],
) -> Invoker:
    """``invoke``, plus saved plans run as nested plans; ``whole()`` is the invoker the
    nested plan's own calls go through (the caller's, agent steps included)."""

    async def invoke_with_plans(tool: str, args: dict[str, Any]) -> Any:
        if not is_saved_plan(catalog, tool):
            return await invoke(tool, args)
        from durable_plan.local.runner import run_checked  # the runner imports agents

        outer = current_nesting()
        _events, step_path = current_step()
        nesting = outer.inner(step_path or tool)
        values = saved_plan_inputs(tool, saved_plan_of(catalog, tool), args)
        checked = check_saved_call(tool, catalog, values, nesting, durable=False)
        caller = _CALLER.get()
        memory = caller.recall if caller is not None else None
        if caller is not None and calls_from_agent(caller, step_path):
            memory = None  # as durably: an agent step's calls are never reused
        recall = recall_within(memory, step_path or tool)
        token = _NESTING.set(nesting)
        try:
            # Its calls pause where the caller's breakpoints name them (``path_prefix``).
            result = await run_checked(
                checked,
                whole(),
                tool_timeouts=timeouts,
                recall=recall,
                path_prefix=nesting.path_prefix,
            )
        finally:
            _NESTING.reset(token)
        if memory is not None and recall is not None:  # even when it failed after them
            memory.nested += learned_within(step_path or tool, recall.learned)
        return saved_plan_outcome(tool, nesting, result)

    return invoke_with_plans


def nested_catalog(
    registry: ToolRegistry,
    plannable: list[str],
    *,
    default_model: bool,
    models: list[str] | None,
) -> ToolCatalog:
    """The catalogue a nested plan is checked against: the caller's plannable tools (exact
    names: a saved plan reaches no tool its caller may not plan), the models it may name."""
    catalog = registry.catalog(plannable)
    return replace(
        catalog,
        default_model="the default model" if default_model else None,
        models=models,
    )
