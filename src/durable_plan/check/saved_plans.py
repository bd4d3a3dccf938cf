"""Saved plans called as tools (``plan__<name>``): what a call may reach, checked before
anything runs.

A saved plan is a tool whose options carry the plan itself (``ToolOptions.saved_plan``,
``tools/saved_plans.py``), so the check sees every plan a call can reach: the steps a plan
names, the bodies of its maps and reduces, and the tools its agent steps may call (their
``tools`` patterns over the plannable tools; none given: all of them, ``plan__*``
included). Three things are refused here, for the plan being checked, with the chain of
plans named:

- a cycle: a saved plan that reaches itself (directly, through another saved plan, or
  through an agent step's tools), which would nest until a bound stopped it;
- depth: more than ``MAX_PLAN_DEPTH`` saved plans inside one another;
- a reached saved plan that the caller's catalogue refuses (a tool excluded by the
  caller's plannable patterns, an approval gate, a rule): the caller's bounds hold inside,
  so a saved plan never reaches what its caller may not.

The walk is linear in the saved plans reached and their calls (each plan is visited
once per check, however many chains reach it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from durable_plan.check.catalog import ToolCatalog
from durable_plan.language.agent_step import AGENT_TOOL, resolve_tools
from durable_plan.language.control_steps import LOOPS
from durable_plan.language.errors import PlanRejected
from durable_plan.language.options import ToolOptions
from durable_plan.language.plan import Step

PLAN_TOOL_PREFIX = "plan__"
"""A saved plan's tool name: ``plan__<name>`` (``builtin__*``, ``user__*`` and ``plan__*``
resolve exactly in an agent step's ``tools``)."""

MAX_PLAN_DEPTH = 4
"""Saved plans inside one another, counted from the plan a model or a person submitted (a
call of ``plan__a`` is depth 1; ``plan__a`` calling ``plan__b`` is depth 2). Each level is
a child workflow with its own history; four is deep enough for a plan of plans of plans and
keeps a step path (``language/step_path.py``) short."""

Report = Callable[[str, str, str, str | None, str | None], None]
"""``(code, message, fix, step, field)``: how a problem reaches the checker."""


def is_saved_plan(catalog: ToolCatalog | None, tool: str) -> bool:
    """Whether ``tool`` is a saved plan in ``catalog``."""
    if catalog is None:
        return False
    spec = catalog.tools.get(tool)
    return spec is not None and spec.options is not None and spec.options.kind == "plan"


def saved_plan_of(catalog: ToolCatalog, tool: str) -> Mapping[str, Any]:
    """The saved plan ``tool`` runs (``{"plan": ..., "inputs": ...}``)."""
    spec = catalog.tools[tool]
    assert spec.options is not None and spec.options.saved_plan is not None
    return spec.options.saved_plan


def calls_of(plan: Any, catalog: ToolCatalog) -> list[tuple[str, str]]:
    """``(step id, saved-plan tool)`` for every saved plan ``plan`` (a raw plan's JSON) may
    call: a step's tool, a map's or reduce's body, an agent step's tools."""
    return [(sid, t) for sid, t in tools_of(plan, catalog.plannable) if is_saved_plan(catalog, t)]


def tools_of(plan: Any, plannable: Sequence[str]) -> list[tuple[str, str]]:
    """``(step id, tool)`` for every tool ``plan`` (a raw plan's JSON) may call: a step's
    tool, a map's or reduce's body, an agent step's tools (its patterns over
    ``plannable``; none given: all of them)."""
    steps = plan.get("steps") if isinstance(plan, Mapping) else None
    found: list[tuple[str, str]] = []
    for raw in steps if isinstance(steps, list) else []:
        if not isinstance(raw, Mapping):
            continue
        sid = str(raw.get("id", "?"))
        tool = raw.get("tool")
        args = raw.get("args") if isinstance(raw.get("args"), Mapping) else {}
        assert isinstance(args, Mapping)
        if tool in LOOPS and isinstance(args.get("do"), Mapping):
            tool, args = args["do"].get("tool"), args["do"].get("args") or {}
        if tool == AGENT_TOOL and isinstance(args, Mapping):
            patterns = args.get("tools")
            listed = patterns if isinstance(patterns, list) else None
            names = resolve_tools([str(p) for p in listed] if listed else None, plannable)
            found += [(sid, n) for n in names]
        elif isinstance(tool, str):
            found.append((sid, tool))
    return found


def tools_inside(names: Iterable[str], table: Mapping[str, ToolOptions]) -> list[str]:
    """Every tool of ``table`` the saved plans among ``names`` may call, at any depth: a
    durable plan's tool table carries them, so its children check and run with the very
    rules the caller was checked against. In name order (workflow code builds tables
    from it: never a set's order)."""
    plannable = sorted(table)
    found: set[str] = set()
    todo = [n for n in names if n in table and table[n].kind == "plan"]
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        saved = table[name].saved_plan or {}
        for _sid, tool in tools_of(saved.get("plan"), plannable):
            if tool in table:
                found.add(tool)
                if table[tool].kind == "plan":
                    todo.append(tool)
    return sorted(found)


def check_saved_plan_calls(
    steps: Sequence[Step], catalog: ToolCatalog | None, report: Report, *, durable: bool
) -> None:
    """Refuse a plan whose saved-plan calls form a cycle, nest too deep, or reach a saved
    plan its catalogue refuses (see the module's docstring)."""
    if catalog is None or catalog.within_saved_plan:
        return  # a reached plan is checked by the walk that reached it
    direct = calls_of({"steps": [s.model_dump(mode="json") for s in steps]}, catalog)
    if not direct:
        return
    walk = _Walk(catalog, report, durable)
    for sid, tool in direct:
        walk.visit(sid, tool)


class _Walk:
    """Depth-first over the saved plans a plan reaches, each plan visited once (not once
    per chain of calls reaching it, which is fan-out to the power of the depth): a cycle
    is a call back into a plan still on the walk's path; a plan's height (the longest chain
    of saved plans it starts) is known once every plan it calls is done."""

    def __init__(self, catalog: ToolCatalog, report: Report, durable: bool) -> None:
        self.catalog = catalog
        self.durable = durable
        self.report = report
        self.callees: dict[str, list[str]] = {}
        self.deepest: dict[str, tuple[str, ...]] = {}
        """Each finished plan's longest chain (itself first), cut at what a report needs."""
        self.height: dict[str, int] = {}
        self.reported: set[tuple[str, ...]] = set()

    def visit(self, sid: str, root: str) -> None:
        """The saved plan ``root`` that step ``sid`` calls, and every plan it reaches."""
        self._explore(sid, root)
        depth = self.height[root] + self.catalog.plan_depth
        if depth <= MAX_PLAN_DEPTH:
            return
        # The chain that first passes the bound, as the message names it.
        chain = self.deepest[root][: max(MAX_PLAN_DEPTH - self.catalog.plan_depth + 1, 1)]
        if chain in self.reported:
            return
        self.reported.add(chain)
        inside = f" inside {self.catalog.plan_depth} more" if self.catalog.plan_depth else ""
        self.report(
            "limit",
            f"saved plans nest {len(chain) + self.catalog.plan_depth} deep "
            f"({' -> '.join(chain)}{inside}); the limit is {MAX_PLAN_DEPTH}",
            "flatten one level: run its steps in the plan that calls it",
            sid,
            "tool",
        )

    def _explore(self, sid: str, root: str) -> None:
        """Iterative (a hand-written tool table may chain many plans: no recursion limit)."""
        if root in self.height:
            return
        path = [root]
        on_path = {root: 0}
        todo = [iter(self._calls(sid, root))]
        while todo:
            inner = next(todo[-1], None)
            if inner is None:
                todo.pop()
                done = path.pop()
                del on_path[done]
                self._finish(done)
            elif inner in on_path:
                self._cycle(sid, (*path[on_path[inner] :], inner))
            elif inner not in self.height:
                on_path[inner] = len(path)
                path.append(inner)
                todo.append(iter(self._calls(sid, inner)))

    def _calls(self, sid: str, tool: str) -> list[str]:
        """The saved plans ``tool`` calls; ``tool`` checked against the caller's catalogue
        on the way (once)."""
        if tool not in self.callees:
            saved = saved_plan_of(self.catalog, tool)
            self._check_inside(sid, tool, saved)
            self.callees[tool] = [t for _sid, t in calls_of(saved.get("plan"), self.catalog)]
        return self.callees[tool]

    def _finish(self, tool: str) -> None:
        """Every plan ``tool`` calls is done (or on the path: a cycle, reported)."""
        best: tuple[str, ...] = ()
        height = 0
        for inner in self.callees[tool]:
            if self.height.get(inner, 0) > height:
                height, best = self.height[inner], self.deepest[inner]
        self.height[tool] = height + 1
        self.deepest[tool] = (tool, *best)[: MAX_PLAN_DEPTH + 1]

    def _cycle(self, sid: str, cycle: tuple[str, ...]) -> None:
        if cycle in self.reported:
            return
        self.reported.add(cycle)
        self.report(
            "cycle",
            f"saved plans call each other in a cycle: {' -> '.join(cycle)} (each "
            "calls the next, directly or through an agent step's tools)",
            f"remove the call of {cycle[-1]} from {cycle[-2]}, or name the agent "
            "step's tools without it",
            sid,
            "tool",
        )

    def _check_inside(self, sid: str, tool: str, saved: Mapping[str, Any]) -> None:
        """The saved plan against the caller's catalogue: what the caller may not plan, the
        saved plan may not run either (its own cycles and depth are this walk's)."""
        from durable_plan.check.checker import check_plan  # the checker calls this module

        inputs = saved.get("inputs")
        properties = inputs.get("properties") if isinstance(inputs, Mapping) else None
        try:
            check_plan(
                saved.get("plan") or {},
                catalog=replace(self.catalog, within_saved_plan=True),
                inputs={},
                input_names=list(properties) if isinstance(properties, Mapping) else [],
                durable=self.durable,
            )
        except PlanRejected as exc:
            first = exc.problems[0]
            more = f" (and {len(exc.problems) - 1} more)" if len(exc.problems) > 1 else ""
            where = f"step '{first.step}': " if first.step else ""
            self.report(
                "not_plannable",
                f"saved plan {tool} cannot run under this plan's rules: {where}"
                f"{first.message}{more}",
                f"{first.fix}; or allow what {tool} needs (its owner registered it with "
                "tools this plan's catalogue refuses)",
                sid,
                "tool",
            )
