"""The plan tool's spec, as the model receives it on every call: ours beside the seed's.

    python -m bench.spec_size              # a few seconds (the first run builds the seed's venv)
    python -m bench.spec_size --ours-only  # without the seed (no venv, no package index)

Every model call of an agent that has the plan tool carries the tool's spec (its name,
description and input schema), whether or not the model submits a plan, so its size is
paid on every call of every conversation. This builds the spec the way Strands sends
it: ``agent.tool_registry.get_all_tool_specs()`` of a plain ``strands.Agent`` with the
plugin attached and 1 or 20 registered tools, the ``submit_workflow_plan`` entry.

Rows:

  seed                 ``strands-plan-tool==0.4.0`` (the seed plan tool), built in its
                       own Python >= 3.12 venv, the one ``bench/compare.py`` builds and
                       reuses (never a project dependency); its spec lists no tools
  ours                 ``WorkflowPlanPlugin()`` on a plain agent: no tool list either
  ours, registry=      ``WorkflowPlanPlugin(registry=...)``, as inside a ``TemporalAgent``
                       (and on a plain agent given a registry): the description lists
                       the plannable tools, so it grows with them
  ..., return shapes   the same, each tool annotated with a three-field ``TypedDict``: the
                       description states each plannable tool's return shape (a shape the
                       model reads nowhere else), so it grows with them too; not held to
                       the seed's size, whose spec carries no shapes at all

*chars* is the length of the spec as compact JSON (``{"name", "description",
"inputSchema"}``, as ``bench.breakeven`` counts what the model is sent); *tokens* are
that text counted with ``o200k_base`` (``bench/_tokens.py``; characters / 4 without the
``bench`` extra). ``tests/test_spec_size.py`` pins the figures; never asserts here.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

from bench._report import command_line, machine_line, markdown_table
from bench._tokens import TokenCounter, token_counter

REPO = Path(__file__).resolve().parent.parent
PLAN_TOOL = "submit_workflow_plan"
TOOL_COUNTS = (1, 20)
TOOL_NAMES = (
    "look_up_monster",
    "roll_attack",
    "apply_damage",
    "read_ticket",
    "triage_ticket",
    "refund_payment",
    "escalate_to_human",
    "notify",
    "read_notice_board",
    "ask_around",
    "search_place",
    "identify_clue",
    "find_hideout",
    "scout_hideout",
    "get_character",
    "read_action_log",
    "strike",
    "fetch_order",
    "charge_card",
    "send_email",
)
"""Twenty tool names from this project's examples, tests and benches: the description
lists plannable names, so realistic ones give a realistic length."""


class StandInResult(TypedDict):
    """What a stand-in tool with a declared shape returns."""

    value: str
    count: int
    ok: bool


def _tools(count: int, *, shapes: bool = False) -> list[Any]:
    """``count`` Strands tools with one string argument each (their own specs do not matter:
    only the plan tool's is measured); ``shapes``: each annotated ``-> StandInResult``."""
    from strands import tool

    def make(name: str) -> Any:
        def body(value: str) -> dict[str, Any]:
            """Stand-in tool.

            Args:
                value: any text
            """
            return {"value": value}

        body.__name__ = name
        if shapes:
            body.__annotations__["return"] = StandInResult
        return tool(name=name)(body)

    return [make(name) for name in TOOL_NAMES[:count]]


def sent_spec(agent: Any) -> dict[str, Any]:
    """The plan tool's entry of what Strands sends the model (normalized, validated)."""
    for spec in agent.tool_registry.get_all_tool_specs():
        if spec["name"] == PLAN_TOOL:
            return dict(spec)
    raise LookupError(f"the agent sends no {PLAN_TOOL} spec")


def ours(count: int, *, registry: bool, shapes: bool = False) -> dict[str, Any]:
    """Our plan tool's spec on a plain agent with ``count`` tools (``registry``: given one;
    ``shapes``: the tools declare their return shapes)."""
    from strands import Agent

    from durable_plan.strands.plugin import WorkflowPlanPlugin
    from durable_plan.testing import ScriptedModel
    from durable_plan.tools.registry import ToolRegistry

    tools = _tools(count, shapes=shapes)
    plugin = WorkflowPlanPlugin(registry=ToolRegistry(tools) if registry else None)
    agent = Agent(model=ScriptedModel([]), tools=tools, plugins=[plugin], callback_handler=None)
    return sent_spec(agent)


def seed(count: int) -> dict[str, Any]:
    """The seed's spec (run inside the seed's venv, where ``strands_plan_tool`` imports)."""
    from strands import Agent
    from strands_plan_tool.strands_adapter import (  # type: ignore[import-not-found]
        WorkflowPlanPlugin,
    )

    from durable_plan.testing import ScriptedModel

    tools = _tools(count)
    agent = Agent(
        model=ScriptedModel([]), tools=tools, plugins=[WorkflowPlanPlugin()], callback_handler=None
    )
    return sent_spec(agent)


def spec_text(spec: dict[str, Any]) -> str:
    """The spec as compact JSON: what is counted."""
    sent = {k: spec[k] for k in ("name", "description", "inputSchema") if k in spec}
    return json.dumps(sent, ensure_ascii=False, separators=(",", ":"))


@dataclass(frozen=True)
class Row:
    """One measured spec."""

    plan_tool: str
    tools: int
    description_chars: int
    schema_chars: int
    chars: int
    tokens: int


def measure(label: str, count: int, spec: dict[str, Any], counter: TokenCounter) -> Row:
    """Characters (description, schema, whole spec) and tokens of one spec."""
    text = spec_text(spec)
    schema = json.dumps(spec["inputSchema"], ensure_ascii=False, separators=(",", ":"))
    return Row(label, count, len(spec["description"]), len(schema), len(text), counter.count(text))


def seed_specs(venv: Path, python: str | None) -> dict[int, dict[str, Any]]:
    """The seed's specs for each tool count, from its venv (raises NoReference)."""
    from bench.compare import NoReference, ensure_venv

    venv_python = ensure_venv(venv, python)
    done = subprocess.run(
        [str(venv_python), "-m", "bench.spec_size", "--emit-seed"],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise NoReference(f"the seed's spec could not be built: {' / '.join(tail)}")
    return {int(k): v for k, v in json.loads(done.stdout).items()}


def rows(seeds: dict[int, dict[str, Any]], counter: TokenCounter) -> list[Row]:
    """Every row: the seed (when given), ours on a plain agent, ours with a registry."""
    out = [measure("strands-plan-tool 0.4.0 (seed)", n, seeds[n], counter) for n in sorted(seeds)]
    out += [measure("durable-plan", n, ours(n, registry=False), counter) for n in TOOL_COUNTS]
    out += [measure(REGISTRY, n, ours(n, registry=True), counter) for n in TOOL_COUNTS]
    for label, registry in ((SHAPED, False), (SHAPED_REGISTRY, True)):
        out += [
            measure(label, n, ours(n, registry=registry, shapes=True), counter) for n in TOOL_COUNTS
        ]
    return out


REGISTRY = "durable-plan, registry= (TemporalAgent)"
SHAPED = "durable-plan, return shapes"
SHAPED_REGISTRY = "durable-plan, registry=, return shapes"


def report(table_rows: Sequence[Row], *, command: str, machine: str, counter: str) -> str:
    """The printed report: heading, command, machine, table, and the largest of ours vs seed."""
    seeds = {r.tools: r for r in table_rows if "seed" in r.plan_tool}
    body = []
    for r in table_rows:
        base = seeds.get(r.tools)
        vs = "" if base is None or r is base else f"{(r.tokens - base.tokens) / base.tokens:+.0%}"
        body.append(
            [r.plan_tool, r.tools, r.description_chars, r.schema_chars, r.chars, r.tokens, vs]
        )
    header = ["plan tool", "tools", "description chars", "schema chars", "spec chars", "tokens"]
    lines = [
        "### The plan tool's spec, as sent on every model call",
        "",
        f"`{command}`",
        "",
        machine,
        "",
        f"spec = compact JSON of name, description and inputSchema as Strands sends them; "
        f"tokens: {counter}.",
        "",
        markdown_table([*header, "tokens vs seed"], body),
    ]
    per_tool = [
        (shaped.chars - plain.chars) / shaped.tools
        for shaped in table_rows
        if shaped.plan_tool == SHAPED_REGISTRY
        for plain in table_rows
        if plain.plan_tool == "durable-plan, registry= (TemporalAgent)"
        and plain.tools == shaped.tools
    ]
    if per_tool:
        lines += ["", f"return shapes: +{max(per_tool):.0f} chars per shaped tool at most"]
    if seeds:
        ours = [r for r in table_rows if "seed" not in r.plan_tool and "shapes" not in r.plan_tool]
        worst = max(ours, key=lambda r: r.tokens)
        limit = min(s.tokens for s in seeds.values())
        verdict = "met" if worst.tokens <= limit else "NOT met"
        lines += [
            "",
            f"target ours <= seed: {verdict} (largest of ours {worst.tokens} tokens, "
            f"{worst.chars} chars: {worst.plan_tool}, {worst.tools} tools)",
        ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    from bench.compare import DEFAULT_VENV, NoReference

    parser = argparse.ArgumentParser(
        prog="python -m bench.spec_size", description=(__doc__ or "").splitlines()[0]
    )
    parser.add_argument("--ours-only", action="store_true", help="measure durable-plan alone")
    parser.add_argument("--ref-venv", type=Path, default=DEFAULT_VENV, help="the seed's venv")
    parser.add_argument("--python", help="a Python >= 3.12 to build the seed's venv with")
    parser.add_argument("--tokens", choices=["auto", "o200k", "chars"], default="auto")
    parser.add_argument("--emit-seed", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.emit_seed:  # inside the seed's venv: print its specs as JSON
        print(json.dumps({n: seed(n) for n in TOOL_COUNTS}))
        return 0
    load = os.getloadavg()[0]
    counter = token_counter(args.tokens)
    seeds: dict[int, dict[str, Any]] = {}
    note = ""
    if not args.ours_only:
        try:
            seeds = seed_specs(args.ref_venv.expanduser(), args.python)
        except NoReference as exc:
            note = f"the seed was not measured: {exc}"
    table_rows = rows(seeds, counter)
    machine = machine_line(load, extra=note)
    print(
        report(
            table_rows,
            command=command_line("bench.spec_size", argv),
            machine=machine,
            counter=counter.name,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
