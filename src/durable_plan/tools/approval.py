"""Who must approve a tool call, and what a person's approval is bound to.

The one place approval is decided. A tool needs a person's approval when its
owner registered it so (``requires_approval=True``), when the plugin's
``approval_required`` patterns match it, or when an agent's intervention gates
it. In-process nobody can answer while a plan runs, so a gated tool is refused
at check time ("call it directly"); durably the step pauses its workflow until
a person decides, and the decision is for the arguments the person saw.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from durable_plan.check import ToolCatalog, ToolSpec
from durable_plan.language.digest import args_digest as args_digest
from durable_plan.language.errors import APPROVAL_REFUSAL
from durable_plan.language.options import ToolOptions
from durable_plan.language.patterns import matches_patterns


@dataclass(frozen=True)
class ApprovalPolicy:
    """Tool-name patterns behind a person's approval, on top of each tool's own flag."""

    patterns: tuple[str, ...] = ()

    @classmethod
    def of(cls, *pattern_lists: Iterable[str]) -> ApprovalPolicy:
        return cls(tuple(p for patterns in pattern_lists for p in patterns))

    def requires(self, name: str, options: ToolOptions | None = None) -> bool:
        if options is not None and options.requires_approval:
            return True
        return bool(self.patterns) and matches_patterns(name, self.patterns)

    def apply(self, catalog: ToolCatalog, *, durable: bool) -> ToolCatalog:
        """Mark gated tools: refused in-process, allowed (and paused per step) durably."""
        specs: dict[str, ToolSpec] = {}
        for name, spec in catalog.tools.items():
            gated = self.requires(name, spec.options)
            options = spec.options
            if gated and options is not None and not options.requires_approval:
                options = replace(options, requires_approval=True)
            refused = spec.refused
            if gated and not durable:
                refused = APPROVAL_REFUSAL
            specs[name] = replace(spec, refused=refused, options=options)
        return ToolCatalog(specs)

    def options(self, options: Mapping[str, ToolOptions]) -> dict[str, ToolOptions]:
        """The durable tool table with every gated tool's ``requires_approval`` set."""
        return {
            name: replace(opts, requires_approval=self.requires(name, opts))
            for name, opts in options.items()
        }


def gated_patterns(handlers: Sequence[Any]) -> list[str]:
    """Tool patterns behind an approval gate, as far as the interventions reveal them.

    Strands decides approval per call and has no public "which tools are gated"
    API. ``HumanInTheLoop`` keeps an allow-list: everything else is gated. Any
    other handler might gate any tool, so every tool counts as gated unless the
    user's ``plannable`` patterns say otherwise (checked in ``init_agent``).
    """
    patterns: list[str] = []
    for handler in handlers:
        allowed = getattr(handler, "_allowed_tools", None)
        if isinstance(allowed, set | frozenset | list):
            free = sorted(str(a) for a in allowed)
            if "*" in free:
                patterns += [p[1:] for p in free if p.startswith("!")]
            else:
                patterns += ["*", *(f"!{p}" for p in free if not p.startswith("!"))]
    return patterns
