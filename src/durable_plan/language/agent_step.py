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

import difflib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from durable_plan import expressions
from durable_plan.check.json_schema import schema_problems
from durable_plan.expressions import Expression, ExpressionSyntaxError
from durable_plan.language.patterns import matches_patterns

AGENT_TOOL = "agent"
PLAN_TOOL = "submit_workflow_plan"
RESERVED_TOOL_NAMES = frozenset({AGENT_TOOL, PLAN_TOOL})
"""Names a registered tool may not take: they mean something in the plan language."""

DEFAULT_MAX_ITERATIONS = 8
MAX_ITERATIONS = 16
"""Each round's model call carries the whole conversation, so a loop's history grows
with the square of its rounds; 16 rounds of 64 KiB tool results stay well under
Temporal's 50 MiB history limit (a loop that still gets there fails clearly)."""

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

_PLACEHOLDER = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)

Template = tuple[str | Expression, ...]
"""A prompt: literal text and ``{{ expression }}`` placeholders, in order."""

Report = Callable[[str, str, str, str], None]
"""(code, message, fix, field) -> records a problem for the step being checked."""


def parse_template(text: str) -> Template:
    """Split ``text`` at its ``{{ }}`` placeholders; raises ExpressionSyntaxError."""
    parts: list[str | Expression] = []
    position = 0
    for match in _PLACEHOLDER.finditer(text):
        if match.start() > position:
            parts.append(text[position : match.start()])
        source = match.group(1).strip()
        if not source:
            raise ExpressionSyntaxError("an empty {{ }} placeholder")
        parts.append(expressions.parse(source))
        position = match.end()
    if position < len(text):
        parts.append(text[position:])
    return tuple(parts)


def template_expressions(template: Template) -> list[Expression]:
    return [part for part in template if isinstance(part, Expression)]


@dataclass(frozen=True)
class AgentCatalogView:
    """What the agent-step checks need from the catalogue."""

    plannable: Sequence[str] | None
    """Tools an agent step may use (None: unknown, any name is accepted)."""
    default_model: str | None
    """The model a step without ``model`` uses (None: such a step is an error)."""
    model_required: bool = True
    models: Sequence[str] | None = None
    """Model-name patterns a step may name (None: any name)."""
    refused: Mapping[str, str] | None = None
    """Tools that exist but may not be planned, and why (a person's approval, say)."""


def check_agent_args(
    args: Mapping[str, Any], bind: Mapping[str, str], view: AgentCatalogView, report: Report
) -> None:
    """Report every problem with an agent step's input (templates are parsed elsewhere)."""
    given = set(args) | set(bind)
    for name in sorted(given - set(AGENT_ARGS)):
        close = difflib.get_close_matches(name, AGENT_ARGS, n=1)
        hint = f"did you mean '{close[0]}'? " if close else ""
        where = "bind" if name in bind else "args"
        report(
            "bad_argument",
            f"an agent step has no argument '{name}'",
            f"{hint}its arguments are: {', '.join(AGENT_ARGS)}",
            f"{where}.{name}",
        )
    for name in LITERAL_ONLY:
        if name in bind:
            report(
                "bad_argument",
                f"'{name}' of an agent step must be a literal in args (it is checked before "
                "the plan runs)",
                f'move it to args: "args": {{"{name}": ...}}',
                f"bind.{name}",
            )
    if "prompt" not in given:
        report(
            "bad_argument",
            "an agent step needs a prompt",
            'add "prompt" to args (it may hold {{ steps.<id>.<field> }} placeholders)',
            "args",
        )
    for name in TEMPLATED:
        if name in args and not isinstance(args[name], str):
            report("bad_argument", f"'{name}' must be a string", "write it as text", f"args.{name}")
    _check_schema(args, report)
    _check_tools(args.get("tools"), "tools" in args, view, report)
    _check_iterations(args, report)
    model = args.get("model")
    if "model" in args and not (isinstance(model, str) and model):
        report("bad_argument", "'model' must be a model name", "name a model", "args.model")
    elif (
        isinstance(model, str)
        and view.models is not None
        and not (view.models and matches_patterns(model, list(view.models)))
    ):
        allowed = ", ".join(view.models) or "none but the default"
        report(
            "owner_rule",
            f"an agent step may not name model '{model}': the tools' owner allows {allowed}",
            "leave model out to use the default model"
            + (f", or name one of: {allowed}" if view.models else ""),
            "args.model",
        )
    if "model" not in given and view.model_required and view.default_model is None:
        report(
            "bad_argument",
            "an agent step needs a model, and this plan has no default one",
            'name one in args ("model": "<name>"), or give the runner a default model',
            "args.model",
        )


def _check_schema(args: Mapping[str, Any], report: Report) -> None:
    if "output_schema" not in args:
        report(
            "bad_argument",
            "an agent step needs an output_schema",
            'add "output_schema": {"type": "object", "properties": {...}, "required": [...]}',
            "args.output_schema",
        )
        return
    schema = args["output_schema"]
    if not isinstance(schema, Mapping) or schema.get("type") != "object":
        report(
            "bad_argument",
            "output_schema must be a JSON Schema of type object",
            'write {"type": "object", "properties": {...}}',
            "args.output_schema",
        )
        return
    for problem in schema_problems(dict(schema))[:3]:
        report(
            "bad_argument",
            f"output_schema is not a valid JSON Schema here: {problem}",
            "fix the schema",
            "args.output_schema",
        )


def _check_tools(tools: Any, given: bool, view: AgentCatalogView, report: Report) -> None:
    if not given:
        return
    if not isinstance(tools, list) or not all(isinstance(t, str) for t in tools):
        report("bad_argument", "tools must be a list of names or patterns", '["*"]', "args.tools")
        return
    if not tools:
        report(
            "bad_argument",
            "tools is empty: an agent step needs at least one tool (leave tools out for all)",
            'leave tools out, or name tools or patterns such as ["look_up_*"]',
            "args.tools",
        )
        return
    if view.plannable is None:
        return
    available = [n for n in view.plannable if n not in RESERVED_TOOL_NAMES]
    for pattern in tools:
        body = pattern.removeprefix("!")
        if not any(matches_patterns(n, [body]) for n in available):
            refused = [
                (name, why)
                for name, why in sorted((view.refused or {}).items())
                if matches_patterns(name, [body])
            ]
            if refused:
                name, why = refused[0]
                report(
                    "not_plannable",
                    f"tools pattern '{pattern}' names tool '{name}', which exists but an agent "
                    f"step may not call: {why}",
                    f"call '{name}' directly, outside the plan; available: "
                    f"{', '.join(available) or 'none'}",
                    "args.tools",
                )
                continue
            close = difflib.get_close_matches(body, available, n=1)
            hint = f"did you mean '{close[0]}'? " if close else ""
            report(
                "bad_argument",
                f"tools pattern '{pattern}' matches no tool an agent step may use",
                f"{hint}available: {', '.join(available) or 'none'}",
                "args.tools",
            )


def _check_iterations(args: Mapping[str, Any], report: Report) -> None:
    if "max_iterations" not in args:
        return
    value = args["max_iterations"]
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_ITERATIONS:
        report(
            "bad_argument",
            f"max_iterations must be a whole number from 1 to {MAX_ITERATIONS}",
            f"use 1..{MAX_ITERATIONS} (each round is one model call)",
            "args.max_iterations",
        )


def resolve_tools(patterns: Sequence[str] | None, plannable: Sequence[str]) -> list[str]:
    """The tools an agent step may call: ``patterns`` over the plannable, never reserved ones."""
    available = [n for n in plannable if n not in RESERVED_TOOL_NAMES]
    if patterns is None:
        return available
    return [n for n in available if matches_patterns(n, list(patterns))]
