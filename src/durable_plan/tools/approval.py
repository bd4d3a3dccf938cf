"""Who must approve a tool call, and what a person's approval is bound to.

The one place approval is decided. A tool needs a person's approval when its
owner registered it so (``requires_approval=True``), when the plugin's
``approval_required`` patterns match it, or when an agent's intervention gates
it. In-process nobody can answer while a plan runs, so a gated tool is refused
at check time ("call it directly"); durably the step pauses its workflow until
a person decides, and the decision is for the arguments the person saw.

A call the model makes directly is asked too (``temporal.agent_tools``): durably the
conversation's workflow waits for a decision as a plan step does
(``temporal.direct_calls``); in-process the agent stops with a Strands interrupt
(``ask_in_process``), as ``HumanInTheLoop`` stops it, and the caller resumes it with the
person's answer.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from strands.interventions.actions import default_evaluate
from strands.types.tools import ToolContext, ToolUse

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


APPROVAL_INTERRUPT = "durable-plan:approval"
"""The name of the Strands interrupt a direct call of a gated tool raises in-process."""
NO_AGENT_REFUSAL = (
    "it requires a person's approval, and nobody can be asked here (it was not called by an "
    "agent, which could stop and ask): call it through an agent"
)


def ask_in_process(
    tool_use: ToolUse, invocation_state: Mapping[str, Any], context: ToolContext | None = None
) -> str | None:
    """A person's decision on a gated tool the model called directly, in-process: None when
    approved, else why not (the call must not run).

    Asked through a Strands interrupt, the mechanism Strands' own ``HumanInTheLoop`` uses: the
    first time this raises ``InterruptException`` and the agent stops with
    ``stop_reason == "interrupt"``; its ``reason`` holds the tool, the arguments and their
    digest. Resumed with ``{"interruptResponse": {"interruptId": ..., "response": ...}}``,
    the tool runs again and reads the answer: ``True``, ``"y"``/``"yes"`` (as
    ``HumanInTheLoop`` reads them) or ``{"approved": true}`` approve; anything else rejects
    (``{"approved": false, "reason": "..."}`` says why). ``context``: Strands' own, when it
    passed one; else one is made from ``invocation_state["agent"]``, as Strands does for a
    ``@tool`` that takes a context. Fails closed: with no agent to stop, the call is refused.
    """
    if context is None:
        agent = invocation_state.get("agent")
        if agent is None or not hasattr(agent, "_interrupt_state"):
            return NO_AGENT_REFUSAL
        context = ToolContext(
            tool_use=tool_use, agent=agent, invocation_state=dict(invocation_state)
        )
    name = tool_use["name"]
    args = dict(tool_use.get("input") or {})
    response = context.interrupt(
        APPROVAL_INTERRUPT,
        reason={
            "message": f"Approve {name}?",
            "tool": name,
            "args": args,
            "args_digest": args_digest(args),
        },
    )
    return rejection(response)


def rejection(response: Any) -> str | None:
    """None when ``response`` approves, else the text the model reads (as durably:
    "rejected by a person", with the person's reason when they gave one)."""
    if isinstance(response, Mapping):
        if response.get("approved") is True:
            return None
        reason = response.get("reason")
    else:
        if default_evaluate(response):
            return None
        reason = response if isinstance(response, str) else None
    if isinstance(reason, str) and reason.strip().lower() not in ("", "n", "no"):
        return f"rejected by a person: {reason.strip()}"
    return "rejected by a person"
