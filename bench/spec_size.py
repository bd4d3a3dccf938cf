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

The second table is what one model call carries of tool specs, all of them (each spec's
compact JSON, tokens summed), for an agent with 1, 8 or 20 tools given to the plugin as
``registry=``:

  plan-only            ``Agent(tools=[])``: the plan tool's spec alone, its description
                       stating each tool as a typed signature (``signatures=None`` does
                       when the agent does not carry the tools itself)
  plan + direct        ``Agent(tools=tools)``: the plan tool (listing the tools by name)
                       and each tool's own spec, as before signatures

The 1 and 20 are the stand-in tools above; the 8 are task tools of an order desk (a chain
order -> customer -> email, a fan-out of prices and their sum, a conditional refund), with
typed arguments, docstrings and return shapes. Beside each row, Code Mode's ``run_code``
(``temporal-agent-harness`` 0.8.0: its contract and the typed stubs of the same tools, with
their docstrings, as ``code_mode_tool`` writes its description), built in a venv of its own
(Python >= 3.12, ``~/.cache/durable-plan-bench/code-mode-venv``, never a project
dependency) and counted here; without it (``--ours-only``, or no package index), issue 53's
figures, measured on its own eight tools: 500, 920 and 1,305.

*chars* is the length of the spec as compact JSON (``{"name", "description",
"inputSchema"}``, as ``bench.breakeven`` counts what the model is sent); *tokens* are
that text counted with ``o200k_base`` (``bench/_tokens.py``; characters / 4 without the
``bench`` extra). ``tests/unit/language/test_spec_size.py`` pins the figures; never asserts here.
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
AGENT_COUNTS = (1, 8, 20)
CODE_MODE_TOKENS = {1: 500, 8: 920, 20: 1305}
"""``run_code``'s spec alone, o200k (issue 53's table, its 8 tools not these): the target of
a plan-only agent when Code Mode is not measured here."""
CODE_MODE = "temporal-agent-harness==0.8.0"
CODE_MODE_VENV = Path.home() / ".cache" / "durable-plan-bench" / "code-mode-venv"
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


class Order(TypedDict):
    """An order as ``fetch_order`` returns it."""

    order_id: str
    customer_id: str
    items: list[str]
    total: float
    status: str


class Customer(TypedDict):
    """A customer as ``get_customer`` returns it."""

    customer_id: str
    name: str
    email: str
    tier: str


class Sent(TypedDict):
    """What ``send_email`` and ``escalate_to_human`` report."""

    id: str
    ok: bool


class Policy(TypedDict):
    """``check_refund_policy``'s verdict."""

    eligible: bool
    max_amount: float
    reason: str


class Refund(TypedDict):
    """A refund as ``refund_payment`` records it."""

    refund_id: str
    amount: float
    status: str


def fetch_order(order_id: str) -> Order:
    """Fetch an order by its id.

    Args:
        order_id: the order's id, e.g. "A-1042"
    """
    return Order(order_id=order_id, customer_id="c1", items=[], total=0.0, status="open")


def get_customer(customer_id: str) -> Customer:
    """Look up a customer.

    Args:
        customer_id: the customer's id, as on their orders
    """
    return Customer(customer_id=customer_id, name="", email="", tier="basic")


def send_email(to: str, subject: str, body: str) -> Sent:
    """Send an email to a customer.

    Args:
        to: the recipient's address
        subject: the subject line
        body: the message, plain text
    """
    return Sent(id="m1", ok=True)


def get_price(item: str, currency: str = "EUR") -> float:
    """The current price of one item.

    Args:
        item: the item's SKU
        currency: ISO currency code
    """
    return 0.0


def sum_prices(prices: list[float]) -> float:
    """Add prices up.

    Args:
        prices: the prices to add
    """
    return sum(prices)


def check_refund_policy(order_id: str, reason: str) -> Policy:
    """Whether an order may be refunded, and up to how much.

    Args:
        order_id: the order's id
        reason: why the customer asks for a refund
    """
    return Policy(eligible=True, max_amount=0.0, reason="")


def refund_payment(order_id: str, amount: float, note: str = "") -> Refund:
    """Refund part or all of an order's payment.

    Args:
        order_id: the order's id
        amount: how much to refund, at most the policy's max_amount
        note: a note for the customer's statement
    """
    return Refund(refund_id="r1", amount=amount, status="done")


def escalate_to_human(summary: str, priority: str = "normal") -> Sent:
    """Hand the case to a person.

    Args:
        summary: what the person needs to know
        priority: "low", "normal" or "urgent"
    """
    return Sent(id="t1", ok=True)


TASK_TOOLS = (
    fetch_order,
    get_customer,
    send_email,
    get_price,
    sum_prices,
    check_refund_policy,
    refund_payment,
    escalate_to_human,
)
"""The 8 task tools: typed, documented, with return shapes (what a real agent's look like)."""


def agent_tools(count: int) -> list[Any]:
    """The tools of an agent row: the 8 task tools, else ``count`` stand-ins."""
    from strands import tool

    return [tool(f) for f in TASK_TOOLS] if count == len(TASK_TOOLS) else _tools(count)


def agent_specs(count: int, *, direct: bool) -> list[dict[str, Any]]:
    """Every tool spec one model call carries, for an agent whose plugin has the ``count``
    tools as ``registry=`` and (``direct``) whose own tools they are too."""
    from strands import Agent

    from durable_plan.strands.plugin import WorkflowPlanPlugin
    from durable_plan.testing import ScriptedModel
    from durable_plan.tools.registry import ToolRegistry

    tools = agent_tools(count)
    # Plan-only: the plugin's direct tools off too (it would give the agent the registry's).
    plugin = WorkflowPlanPlugin(registry=ToolRegistry(tools), direct_tools=direct)
    agent = Agent(
        model=ScriptedModel([]),
        tools=tools if direct else [],
        plugins=[plugin],
        callback_handler=None,
    )
    return [dict(spec) for spec in agent.tool_registry.get_all_tool_specs()]


@dataclass(frozen=True)
class CallRow:
    """What one model call carries of tool specs."""

    agent: str
    tools: int
    specs: int
    plan_tool_tokens: int
    tokens: int


PLAN_ONLY = "plan-only"
PLAN_AND_DIRECT = "plan + direct"


def call_rows(counter: TokenCounter) -> list[CallRow]:
    """Plan-only and plan-plus-direct agents at 1, 8 and 20 tools."""
    out = []
    for label, direct in ((PLAN_ONLY, False), (PLAN_AND_DIRECT, True)):
        for n in AGENT_COUNTS:
            specs = agent_specs(n, direct=direct)
            counts = {s["name"]: counter.count(spec_text(s)) for s in specs}
            out.append(CallRow(label, n, len(specs), counts[PLAN_TOOL], sum(counts.values())))
    return out


def call_report(table_rows: Sequence[CallRow], code_mode: dict[int, int] | None = None) -> str:
    """The per-call table, each row beside Code Mode's ``run_code`` (``code_mode``: measured on
    the same tools; None: issue 53's figures)."""
    measured = code_mode is not None
    code_mode = code_mode if code_mode is not None else CODE_MODE_TOKENS
    body = []
    for r in table_rows:
        code = code_mode.get(r.tools)
        vs = "" if code is None else f"{(r.tokens - code) / code:+.0%}"
        body.append([r.agent, r.tools, r.specs, r.plan_tool_tokens, r.tokens, code or "", vs])
    header = ["agent", "tools", "specs sent", "plan tool tokens", "tokens per call"]
    which = "same tools, measured here" if measured else "issue 53's figures"
    lines = [
        "### Tool specs per model call: plan-only and plan + direct",
        "",
        markdown_table([*header, f"Code Mode run_code ({which})", "vs Code Mode"], body),
    ]
    plan_only = [r for r in table_rows if r.agent == PLAN_ONLY and r.tools in code_mode]
    if plan_only:
        over = [r for r in plan_only if r.tokens > code_mode[r.tools]]
        verdict = "met" if not over else "NOT met at " + ", ".join(f"{r.tools}" for r in over)
        lines += ["", f"target plan-only <= Code Mode's run_code: {verdict} (tools)"]
    return "\n".join(lines)


def emit_code_mode() -> dict[int, str]:
    """Inside Code Mode's venv: ``run_code``'s spec text on each row's tools, as
    ``code_mode_tool`` writes its description (its contract and ``render_host_interface``;
    the tool itself needs the sandbox's binary, which the description does not)."""
    import inspect
    import typing

    from pydantic import create_model
    from temporal_agent_harness.harness.agent_workflow import (  # type: ignore[import-not-found]
        tool_defn,
    )
    from temporal_agent_harness.harness.code_mode.stubs import (  # type: ignore[import-not-found]
        render_host_interface,
    )
    from temporal_agent_harness.harness.code_mode.tool import (  # type: ignore[import-not-found]
        _CONTRACT,
        _NO_FILESYSTEM,
    )

    models: dict[Any, Any] = {}

    def host(f: Any, name: str | None = None) -> Any:
        """``f`` as a harness tool: async, a TypedDict result as the pydantic model it takes."""
        hints = typing.get_type_hints(f)
        ret = hints.get("return")
        if isinstance(ret, type) and hasattr(ret, "__total__"):
            if ret not in models:
                fields = {k: (v, ...) for k, v in typing.get_type_hints(ret).items()}
                models[ret] = create_model(ret.__name__, **fields)  # type: ignore[call-overload]
                models[ret].__doc__ = ret.__doc__
            ret = models[ret]
        elif ret is dict or ret is None:
            ret = dict[str, str]  # the stand-ins: Code Mode refuses a bare dict

        async def body(*args: Any, **kwargs: Any) -> Any:
            return f(*args, **kwargs)

        body.__name__ = body.__qualname__ = name or f.__name__
        body.__doc__ = f.__doc__
        body.__signature__ = inspect.signature(f).replace(  # type: ignore[attr-defined]
            return_annotation=ret
        )
        body.__annotations__ = {**hints, "return": ret}
        return tool_defn()(body)

    def stand_in(value: str) -> dict[str, str]:
        """Stand-in tool.

        Args:
            value: any text
        """
        return {"value": value}

    def text(tools: list[Any]) -> str:
        description = _CONTRACT.format(
            sandbox=_NO_FILESYSTEM, interface=render_host_interface(tools), filesystem="", guide=""
        )
        schema = {"type": "object", "properties": {"script": {"type": "string"}}}
        spec = {"name": "run_code", "description": description, "inputSchema": {"json": schema}}
        return spec_text({**spec, "inputSchema": {"json": {**schema, "required": ["script"]}}})

    out = {n: text([host(stand_in, name) for name in TOOL_NAMES[:n]]) for n in (1, 20)}
    out[len(TASK_TOOLS)] = text([host(f) for f in TASK_TOOLS])
    return out


def code_mode_tokens(venv: Path, python: str | None, counter: TokenCounter) -> dict[int, int]:
    """Code Mode's ``run_code`` tokens per row, from its venv (built once; raises NoReference)."""
    from bench.compare import NoReference, find_python

    venv_python = venv / "bin" / "python"
    if not venv_python.exists():
        base = find_python(python)
        print(f"building Code Mode's venv at {venv} with {base} ...", file=sys.stderr)
        for step in (
            [base, "-m", "venv", str(venv)],
            [str(venv_python), "-m", "pip", "install", "-q", CODE_MODE],
        ):
            done = subprocess.run(step, capture_output=True, text=True)
            if done.returncode != 0:
                tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
                raise NoReference(f"Code Mode's venv could not be built: {' / '.join(tail)}")
    done = subprocess.run(
        [str(venv_python), "-m", "bench.spec_size", "--emit-code-mode"],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise NoReference(f"Code Mode's spec could not be built: {' / '.join(tail)}")
    return {int(k): counter.count(v) for k, v in json.loads(done.stdout).items()}


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
    parser.add_argument("--code-mode-venv", type=Path, default=CODE_MODE_VENV)
    parser.add_argument("--emit-seed", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--emit-code-mode", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.emit_seed:  # inside the seed's venv: print its specs as JSON
        print(json.dumps({n: seed(n) for n in TOOL_COUNTS}))
        return 0
    if args.emit_code_mode:  # inside Code Mode's venv: print run_code's spec texts as JSON
        print(json.dumps(emit_code_mode()))
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
    code_mode = None
    if not args.ours_only:
        try:
            code_mode = code_mode_tokens(args.code_mode_venv.expanduser(), args.python, counter)
        except NoReference as exc:
            print(f"\nCode Mode was not measured: {exc}")
    print()
    print(call_report(call_rows(counter), code_mode))
    return 0


if __name__ == "__main__":
    sys.exit(main())
