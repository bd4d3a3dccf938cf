"""Agent steps: what the plan language says about a step whose ``tool`` is ``agent``.

An agent step is for the one thing a plan cannot express: a task where which
tools to call, and how often, depends on what earlier calls returned. A prompt
goes in, an object conforming to ``output_schema`` comes out (or ``final:
false``, never a made-up result). This module holds the step's contract and
its checks, and the ``{{ JSONata }}`` prompt templates; the loop itself is in
``agent_loop.py`` and runs in-process (a Strands ``Agent``) or durably (a
``TemporalAgent`` in its own child workflow) with one result shape.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from durable_plan.language.patterns import matches_patterns

AGENT_TOOL = "agent"
PLAN_TOOL = "submit_workflow_plan"
RESERVED_TOOL_NAMES = frozenset({AGENT_TOOL, PLAN_TOOL})
"""Names a registered tool may not take: they mean something in the plan language."""

DEFAULT_MAX_ITERATIONS = 8
MAX_ITERATIONS = 32
"""Each round's model call carries the whole conversation: with External Storage (the
default through ``connect``) those calls are references and history grows with the rounds,
not their square (``bench.external_storage``: 16 rounds of 64 KiB results, 16.5 MB of
history without, 1.1 MB with; 32 rounds with, 2.2 MB). Without it, a loop stops clearly
before a model call too large to send or a history near Temporal's limit."""

AGENT_ARGS = ("prompt", "output_schema", "tools", "max_iterations", "model", "system_prompt")
LITERAL_ONLY = ("output_schema", "tools", "max_iterations", "model")
TEMPLATED = ("prompt", "system_prompt")

AGENT_RULES = (
    'How to write an agent step: {"id": "<id>", "tool": "agent", "args": {"prompt": "text '
    "with {{ <JSONata> }} placeholders, e.g. {{ steps.<id>.<field> }}, which read results "
    'as bind does", "output_schema": {"type": "object", "properties": {...}, "required": '
    '[...]}}}. Optional args: "tools" (names or * patterns over the plannable tools; '
    'default: all of them), "max_iterations" (model calls, the answering one included; '
    f'default {DEFAULT_MAX_ITERATIONS}, at most {MAX_ITERATIONS}), "model", '
    '"system_prompt"; output_schema, tools, max_iterations and model are literals in args, '
    'not bind. Its result is {"output", "iterations", "tools_called", "final"}: output '
    "conforms to output_schema, or final is false and output is {}, so gate later steps "
    'on it: "when": "steps.<id>.final ? steps.<id>.output.<field> : false". Each round is '
    "one model call: plan ordinary steps wherever the calls are known in advance."
)
"""Sent with a rejection that found a problem in an agent step (``check.py``): the plan
tool's spec teaches only the step's minimal form, the model reads the rest here."""


def resolve_tools(patterns: Sequence[str] | None, plannable: Sequence[str]) -> list[str]:
    """The tools an agent step may call: ``patterns`` over the plannable, never reserved ones."""
    available = [n for n in plannable if n not in RESERVED_TOOL_NAMES]
    if patterns is None:
        return available
    return [n for n in available if matches_patterns(n, list(patterns))]


@dataclass(frozen=True)
class AgentStepSpec:
    """An agent step's bound arguments, resolved once for both runners: its tools by name,
    its defaults filled in (``model`` None: the runner's default model)."""

    prompt: str
    output_schema: dict[str, Any]
    tools: list[str]
    max_iterations: int
    model: str | None
    system_prompt: str | None


def agent_step_spec(
    args: Mapping[str, Any], plannable: Sequence[str], default_model: str | None = None
) -> AgentStepSpec:
    """The step's arguments (checked before the plan ran) as the loop needs them."""
    model = args.get("model", default_model)
    extra = args.get("system_prompt")
    return AgentStepSpec(
        prompt=str(args["prompt"]),
        output_schema=dict(args["output_schema"]),
        tools=resolve_tools(args.get("tools"), plannable),
        max_iterations=int(args.get("max_iterations", DEFAULT_MAX_ITERATIONS)),
        model=model if isinstance(model, str) else None,
        system_prompt=extra if isinstance(extra, str) else None,
    )
