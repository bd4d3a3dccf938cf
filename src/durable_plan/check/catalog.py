"""What a plan's checks know about the tools: their schemas, the owner's rules, which may not
be planned and why, and the models an agent step may name."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from durable_plan.check.shapes.compact import compact_shape
from durable_plan.language.agent_step import MAX_ITERATIONS
from durable_plan.language.options import ToolOptions
from durable_plan.language.routing import routing_problem

SHAPE_PROBLEMS = frozenset({"no_field", "wrong_type"})
"""The problems only the return-shape check finds."""


@dataclass(frozen=True)
class ToolSpec:
    """What the checker knows about one tool: its input schema, or why it may not be planned."""

    name: str
    input_schema: Mapping[str, Any] | None = None
    refused: str | None = None
    options: ToolOptions | None = None
    """The owner's rules; a step's ``retries``, ``timeout_s`` and ``local`` may only
    tighten them. None (a bare catalog of names) checks no bounds."""
    output_schema: Mapping[str, Any] | None = None
    """The tool's return shape (a JSON Schema): paths into its steps' results are walked
    through it (``check/shapes/walk.py``). None: unknown, every path passes."""


@dataclass(frozen=True)
class ToolCatalog:
    """The tools a plan may name. ``refused`` tools exist but may not be planned."""

    tools: Mapping[str, ToolSpec] = field(default_factory=dict)
    default_model: str | None = None
    """The model of an agent step that names none (the runner's default), if any."""
    max_agent_rounds: int = MAX_ITERATIONS
    """The most ``max_iterations`` an agent step may ask (workflow code recorded before the
    cap was raised checks with the old one)."""
    models: Sequence[str] | None = None
    """Model-name patterns an agent step may name in ``model`` (the owner's allow-list;
    the default model needs no name). None: any name (plans checked before the list)."""
    return_shapes: bool = True
    """Check paths and bound values against results' shapes (``no_field``, ``wrong_type``);
    False: as before the return-shape check (workflow code recorded before it)."""
    plan_depth: int = 0
    """Saved plans the checked plan runs inside (0: submitted; a saved plan being
    registered is checked at 1): its own saved-plan calls may nest ``MAX_PLAN_DEPTH`` less
    this (``check/saved_plans.py``)."""
    within_saved_plan: bool = False
    """The plan checked is a saved plan reached from the one a caller submitted: the walk
    that reached it checks its cycles and depth (``check/saved_plans.py``)."""

    @classmethod
    def of(cls, specs: Iterable[ToolSpec | str]) -> ToolCatalog:
        items = [s if isinstance(s, ToolSpec) else ToolSpec(s) for s in specs]
        return cls({s.name: s for s in items})

    @classmethod
    def from_options(cls, options: Mapping[str, ToolOptions]) -> ToolCatalog:
        """Every named tool plannable, with its schema and rules (the durable tool table's view)."""
        return cls(
            {
                name: ToolSpec(
                    name,
                    opts.input_schema,
                    routing_problem(opts),
                    opts,
                    # A tool table may be built by hand (any workflow input is): bounded
                    # here as a server's shape is (a registry's is compact already).
                    compact_shape(opts.output_schema) if opts.output_schema else None,
                )
                for name, opts in options.items()
            }
        )

    @property
    def has_shapes(self) -> bool:
        """Some tool declares its return shape."""
        return any(spec.output_schema is not None for spec in self.tools.values())

    def without_shapes(self) -> ToolCatalog:
        """The same catalogue without return shapes: no tool's shape, no shape of a step
        kind's result, no bound literal's type (a conversation whose history ran a plan the
        shapes its tools declare since would refuse: ``temporal.versions``)."""
        tools = {n: replace(s, output_schema=None) for n, s in self.tools.items()}
        return replace(self, tools=tools, return_shapes=False)

    @property
    def plannable(self) -> list[str]:
        return sorted(name for name, spec in self.tools.items() if spec.refused is None)
