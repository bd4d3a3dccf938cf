"""What the checks hand to the runners: every step with its dependencies resolved and its
expressions parsed, in plan order, and the plan's levels. Neither runner re-derives the graph."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from durable_plan.expressions import Expression
from durable_plan.expressions.templates import Template
from durable_plan.language.agent_step import AGENT_TOOL, resolve_tools
from durable_plan.language.plan import Plan, Step


@dataclass(frozen=True)
class CheckedBody:
    """A map or reduce step's ``do`` template, with its expressions parsed."""

    tool: str
    args: Mapping[str, Any]
    bind: Mapping[str, Expression]
    when: Expression | None
    templates: Mapping[str, Template] = field(default_factory=dict)
    timeout_s: float | None = None
    retries: int | None = None


@dataclass(frozen=True)
class CheckedStep:
    """A step with its dependencies resolved and its expressions parsed."""

    step: Step
    deps: frozenset[str]
    bind: Mapping[str, Expression]
    when: Expression | None
    level: int
    ordered_deps: tuple[str, ...] = ()
    prior_reads: tuple[str, ...] = ()
    """Step ids of earlier plans it reads as ``prior.<id>`` (its map body's too), sorted."""
    templates: Mapping[str, Template] = field(default_factory=dict)
    """An agent step's ``prompt`` / ``system_prompt`` with their ``{{ }}`` placeholders."""
    body: CheckedBody | None = None
    """A map or reduce step's ``do``, checked."""
    """``deps`` in plan order: a step's ``steps`` scope is built in this order, never
    in a set's, whose order follows the process's hash seed (``$keys(steps)`` and
    ``steps.*[0]`` must answer the same on every worker)."""

    @property
    def id(self) -> str:
        return self.step.id


@dataclass(frozen=True)
class CheckedPlan:
    """A plan that passed every check; the only input the runners accept."""

    plan: Plan
    steps: Mapping[str, CheckedStep]
    levels: list[list[str]]
    durable: bool
    inputs: dict[str, Any] | None = None
    """A plan file's input values, checked against its schema by the caller: expressions
    read them as ``inputs.<name>``. None: the plan has no inputs and ``inputs`` is unknown."""

    @property
    def returns(self) -> list[str]:
        return list(self.plan.returns) if self.plan.returns is not None else list(self.steps)

    def tools_called(self, plannable: Sequence[str]) -> tuple[list[str], list[str]]:
        """The tools this plan may call, in ``plannable``'s order: those its steps and map
        or reduce bodies name, and, second, those its agent steps may call (their ``tools``
        patterns resolved against ``plannable`` as the runners resolve them; none given:
        all). What the plan's tool table must hold, and what its routed queues are."""
        named: set[str] = set()
        agents: set[str] = set()
        for checked_step in self.steps.values():
            calls: list[tuple[str, Mapping[str, Any]]] = [
                (checked_step.step.tool, checked_step.step.args)
            ]
            if checked_step.body is not None:
                calls.append((checked_step.body.tool, checked_step.body.args))
            for tool, args in calls:
                if tool == AGENT_TOOL:
                    patterns = args.get("tools")  # checked: a list of patterns, or absent
                    listed = [str(p) for p in patterns] if isinstance(patterns, list) else None
                    agents.update(resolve_tools(listed, plannable))
                else:
                    named.add(tool)
        return [n for n in plannable if n in named], [n for n in plannable if n in agents]

    @property
    def has_agent_steps(self) -> bool:
        return any(
            cs.step.tool == AGENT_TOOL or (cs.body is not None and cs.body.tool == AGENT_TOOL)
            for cs in self.steps.values()
        )
