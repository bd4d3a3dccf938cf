"""An agent step's arguments, checked before the plan runs: each problem named with the field
and the fix (the loop itself is ``run.agent_loop``; its contract ``language.agent_step``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from durable_plan.check.usable_schema import schema_problems
from durable_plan.language.agent_step import (
    AGENT_ARGS,
    LITERAL_ONLY,
    MAX_ITERATIONS,
    RESERVED_TOOL_NAMES,
    TEMPLATED,
)
from durable_plan.language.patterns import matches_patterns

Report = Callable[[str, str, str, str], None]
"""(code, message, fix, field) -> records a problem for the step being checked."""

Closest = Callable[[str, Iterable[str]], str | None]
"""The checker's "did you mean" (``CheckerState._closest``): None once no more problems are
listed."""


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
    max_rounds: int = MAX_ITERATIONS
    """The most max_iterations a step may ask (``ToolCatalog.max_agent_rounds``)."""


def check_agent_args(
    args: Mapping[str, Any],
    bind: Mapping[str, str],
    view: AgentCatalogView,
    report: Report,
    closest: Closest,
    listed_all: Callable[[], bool],
) -> None:
    """Report every problem with an agent step's input (templates are parsed elsewhere).
    ``closest``: the checker's "did you mean"; ``listed_all``: no more problems are listed
    (the plan is refused anyway), where the loops over names and patterns stop."""
    given = set(args) | set(bind)
    for name in sorted(given - set(AGENT_ARGS)):
        if listed_all():
            break
        close = closest(name, AGENT_ARGS)
        hint = f"did you mean '{close}'? " if close else ""
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
    _check_tools(args.get("tools"), "tools" in args, view, report, closest, listed_all)
    _check_iterations(args, report, view.max_rounds)
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


def _check_tools(
    tools: Any,
    given: bool,
    view: AgentCatalogView,
    report: Report,
    closest: Closest,
    listed_all: Callable[[], bool],
) -> None:
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
        if listed_all():
            return  # the plan is refused anyway; no more patterns are matched
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
            close = closest(body, available)
            hint = f"did you mean '{close}'? " if close else ""
            report(
                "bad_argument",
                f"tools pattern '{pattern}' matches no tool an agent step may use",
                f"{hint}available: {', '.join(available) or 'none'}",
                "args.tools",
            )


def _check_iterations(args: Mapping[str, Any], report: Report, cap: int) -> None:
    if "max_iterations" not in args:
        return
    value = args["max_iterations"]
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= cap:
        report(
            "bad_argument",
            f"max_iterations must be a whole number from 1 to {cap}",
            f"use 1..{cap} (each round is one model call)",
            "args.max_iterations",
        )
