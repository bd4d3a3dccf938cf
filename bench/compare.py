"""durable-plan's in-process runner beside strands-plan-tool, its reference, in one process.

    python -m bench.compare            # about 1 minute (the first run also builds a venv)
    python -m bench.compare --quick    # fewer repeats, about 20 s

The reference (``strands-plan-tool==0.4.0`` on PyPI) needs Python >= 3.12 and is not
a dependency of this project: the benchmark makes its own virtualenv (by default
``~/.cache/durable-plan-bench/ref-venv``; ``--ref-venv``), installs the reference and
this checkout (editable) into it, and runs itself again there, so both engines run
under one interpreter, in one process, interleaved. The interpreter comes from
``--python``, else ``$DURABLE_PLAN_BENCH_PYTHON``, else the first Python >= 3.12 found
on PATH or under pyenv. Without one (or without the package index) it says why and
measures ours alone.

(a) Engine per step: a plan given as a dict, checked and run to its result, with
    instant tools (an async function that returns at once), so all that is measured is
    the engine: validation, dependency analysis, bindings, scheduling, the ledger.
    ``chain-8`` and ``chain-32`` bind each step to the one before
    (``steps.s3.v``); ``fan-32+join`` is a source, 32 steps reading it and a join
    reading all 32 in one array expression. Ours: ``durable_plan.local.runner.execute_plan``;
    the reference: ``WorkflowPlan.model_validate`` then its ``execute_plan`` (what its
    plugin does). Both must return the same values ("same results").
(b) The Strands integrations: a plain ``strands.Agent`` driven by the scripted model
    (``durable_plan.testing.ScriptedModel``, no latency), which submits one plan; the
    reference's ``WorkflowPlanPlugin`` against ours. Tools are async and take 250 ms.
    ``fan-out x3``: three independent tool calls (critical path 250 ms);
    ``chain-3``: three dependent calls (750 ms). Wall clock of ``invoke_async``, the
    model turn included; the target for ours is within 10 % of the critical path.

Samples: best and median over the repeats, after a warm-up, the two engines
alternating which goes first; a full garbage collection before each engine sample.
Prints a Markdown table with the machine and the exact command; never asserts.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import glob
import importlib
import importlib.metadata
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REFERENCE = "strands-plan-tool==0.4.0"
REPO = Path(__file__).resolve().parent.parent
DEFAULT_VENV = Path.home() / ".cache" / "durable-plan-bench" / "ref-venv"
TOOL_S = 0.25
FAN_OUT = 32
TARGET_OVER_CRITICAL = 1.10

Plan = dict[str, Any]
Runner = Callable[[Plan], Awaitable[Mapping[str, Any]]]
"""Runs a plan dict to completion; returns the values of the steps it returns."""


# -- the plans -----------------------------------------------------------------


def chain(n: int) -> Plan:
    """n steps, each bound to the previous one's result."""
    steps: list[dict[str, Any]] = [{"id": "s0", "tool": "calc", "args": {"seed": 0}}]
    for i in range(1, n):
        steps.append(
            {"id": f"s{i}", "tool": "calc", "args": {"k": i}, "bind": {"x": f"steps.s{i - 1}.v"}}
        )
    return {"steps": steps, "returns": [f"s{n - 1}"], "final": True}


def fan_join(n: int) -> Plan:
    """A source, n steps reading it, and a join reading all n in one array expression."""
    steps: list[dict[str, Any]] = [{"id": "src", "tool": "calc", "args": {"seed": 0}}]
    for i in range(n):
        steps.append(
            {"id": f"f{i}", "tool": "calc", "args": {"k": i}, "bind": {"x": "steps.src.v"}}
        )
    values = "[" + ", ".join(f"steps.f{i}.v" for i in range(n)) + "]"
    steps.append({"id": "join", "tool": "calc", "bind": {"values": values}})
    return {"steps": steps, "returns": ["join"], "final": True}


ENGINE_PLANS: dict[str, Plan] = {
    "chain-8": chain(8),
    "chain-32": chain(32),
    f"fan-{FAN_OUT}+join": fan_join(FAN_OUT),
}
MAX_STEPS = 64


async def instant(name: str, args: Mapping[str, Any]) -> dict[str, Any]:
    """The instant tool: ``v`` is one more than the bound ``x`` (so results can be checked)."""
    x = args.get("x")
    values = args.get("values")
    total = sum(values) if isinstance(values, list) else 0
    return {"v": (x if isinstance(x, int) else 0) + 1, "total": total, "label": "ok"}


def expected(plan: Plan) -> dict[str, Any]:
    """What the plan must return, computed directly (both engines are checked against it)."""
    results: dict[str, Any] = {}
    for step in plan["steps"]:
        bind = step.get("bind", {})
        if "x" in bind:
            source = bind["x"].split(".")[1]
            args = {"x": results[source]["v"]}
        elif "values" in bind:
            args = {"values": [results[sid]["v"] for sid in results if sid.startswith("f")]}
        else:
            args = {}
        results[step["id"]] = {
            "v": args.get("x", 0) + 1,
            "total": sum(args.get("values", [])),
            "label": "ok",
        }
    return {sid: results[sid] for sid in plan["returns"]}


# -- the engines -----------------------------------------------------------------


async def run_ours(plan: Plan) -> Mapping[str, Any]:
    from durable_plan.local.runner import execute_plan

    result = await execute_plan(plan, instant, max_steps=MAX_STEPS)
    return result.returned if result.ok else {"failed": result.failures}


def reference_runner() -> Runner | None:
    """The reference's engine, or None where it is not installed."""
    try:
        ref: Any = importlib.import_module("strands_plan_tool")
    except ImportError:
        return None

    async def run_reference(plan: Plan) -> Mapping[str, Any]:
        result = await ref.execute_plan(
            ref.WorkflowPlan.model_validate(plan), instant, max_steps=MAX_STEPS
        )
        failed = [o.id for o in result.ledger if o.status != "ok"]
        return dict(result.returned) if not failed else {"failed": failed}

    return run_reference


@dataclass
class Timing:
    best: float
    median: float

    @classmethod
    def of(cls, samples: list[float]) -> Timing:
        return cls(min(samples), statistics.median(samples))


@dataclass
class EngineRow:
    plan: str
    steps: int
    per_step_ms: dict[str, Timing]
    correct: dict[str, bool]


async def bench_engines(runners: Mapping[str, Runner], repeats: int) -> list[EngineRow]:
    """Per-step cost of each runner on each plan, the runners interleaved."""
    rows = []
    for name, plan in ENGINE_PLANS.items():
        steps = len(plan["steps"])
        want = expected(plan)
        correct = {}
        for key, run in runners.items():  # warm-up, and the check of the results
            got = [await run(plan) for _ in range(3)]
            correct[key] = all(g == want for g in got)
        samples: dict[str, list[float]] = {key: [] for key in runners}
        order = list(runners)
        for n in range(repeats):
            for key in order if n % 2 == 0 else order[::-1]:
                gc.collect()
                started = time.perf_counter()
                await runners[key](plan)
                samples[key].append((time.perf_counter() - started) * 1000 / steps)
        rows.append(EngineRow(name, steps, {k: Timing.of(v) for k, v in samples.items()}, correct))
    return rows


# -- the Strands integrations ----------------------------------------------------------

TOOL_CALLS: list[str] = []


def strands_tools(tool_s: float) -> list[Any]:
    """Two async Strands tools that take ``tool_s`` seconds each."""
    from strands import tool

    @tool
    async def fetch(source: str) -> dict[str, Any]:
        """Fetch one source.

        Args:
            source: the source's name
        """
        TOOL_CALLS.append(f"fetch {source}")
        await asyncio.sleep(tool_s)
        return {"source": source, "size": len(source)}

    @tool
    async def hop(value: int) -> dict[str, Any]:
        """One step further.

        Args:
            value: where to start
        """
        TOOL_CALLS.append(f"hop {value}")
        await asyncio.sleep(tool_s)
        return {"value": value + 1}

    return [fetch, hop]


AGENT_PLANS: dict[str, tuple[Plan, int, dict[str, Any]]] = {
    "fan-out x3": (
        {
            "steps": [
                {"id": name, "tool": "fetch", "args": {"source": name}} for name in ("a", "b", "c")
            ],
            "returns": ["a", "b", "c"],
            "final": True,
        },
        1,
        {name: {"source": name, "size": 1} for name in ("a", "b", "c")},
    ),
    "chain-3": (
        {
            "steps": [
                {"id": "h1", "tool": "hop", "args": {"value": 0}},
                {"id": "h2", "tool": "hop", "bind": {"value": "steps.h1.value"}},
                {"id": "h3", "tool": "hop", "bind": {"value": "steps.h2.value"}},
            ],
            "returns": ["h3"],
            "final": True,
        },
        3,
        {"h3": {"value": 3}},
    ),
}
"""name: (plan, depth in tools, what the final answer must hold)."""

AgentRunner = Callable[[Plan, list[Any]], Awaitable[Any]]
"""Builds a fresh agent with the plan tool, runs one turn that submits ``plan``, returns
the final answer parsed as JSON (or the text, if it is not JSON)."""


def _answer(agent: Any) -> Any:
    text = "".join(b.get("text", "") for b in agent.messages[-1]["content"])
    try:
        return json.loads(text)
    except ValueError:
        return text


async def agent_ours(plan: Plan, tools: list[Any]) -> Any:
    from strands import Agent

    from durable_plan.strands.plugin import WorkflowPlanPlugin
    from durable_plan.testing import ScriptedModel, call, say

    model = ScriptedModel([call("submit_workflow_plan", **plan), say("done")])
    agent = Agent(model=model, tools=tools, plugins=[WorkflowPlanPlugin()], callback_handler=None)
    await agent.invoke_async("run the plan")
    return _answer(agent)


def agent_reference() -> AgentRunner | None:
    try:
        adapter: Any = importlib.import_module("strands_plan_tool.strands_adapter")
    except ImportError:
        return None

    async def run(plan: Plan, tools: list[Any]) -> Any:
        from strands import Agent

        from durable_plan.testing import ScriptedModel, call, say

        model = ScriptedModel([call("submit_workflow_plan", plan=plan), say("done")])
        plugin = adapter.WorkflowPlanPlugin()
        agent = Agent(model=model, tools=tools, plugins=[plugin], callback_handler=None)
        await agent.invoke_async("run the plan")
        return _answer(agent)

    return run


@dataclass
class AgentRow:
    plan: str
    critical_ms: float
    wall_ms: dict[str, Timing]
    correct: dict[str, bool]


async def bench_agents(
    runners: Mapping[str, AgentRunner], repeats: int, tool_s: float = TOOL_S
) -> list[AgentRow]:
    """Wall clock of one agent turn that submits each plan, per integration."""
    tools = strands_tools(tool_s)
    rows = []
    for name, (plan, depth, want) in AGENT_PLANS.items():
        correct: dict[str, bool] = {}
        for key, run in runners.items():  # warm-up, and the check of the answer and calls
            before = len(TOOL_CALLS)
            answer = await run(plan, tools)
            correct[key] = answer == want and len(TOOL_CALLS) - before == len(plan["steps"])
        samples: dict[str, list[float]] = {key: [] for key in runners}
        order = list(runners)
        for n in range(repeats):
            for key in order if n % 2 == 0 else order[::-1]:
                started = time.perf_counter()
                await runners[key](plan, tools)
                samples[key].append((time.perf_counter() - started) * 1000)
        rows.append(
            AgentRow(
                name,
                depth * tool_s * 1000,
                {k: Timing.of(v) for k, v in samples.items()},
                correct,
            )
        )
    return rows


# -- the report ---------------------------------------------------------------------


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _commit() -> str:
    try:
        out = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        )
        dirty = subprocess.run(
            ["git", "-C", str(REPO), "status", "--porcelain", "--", "src"],
            capture_output=True,
            text=True,
            check=True,
        )
        return out.stdout.strip() + (" + uncommitted changes in src" if dirty.stdout else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def _pair(t: Timing | None, digits: int) -> str:
    return "n/a" if t is None else f"{t.best:.{digits}f} / {t.median:.{digits}f}"


def _ratio(a: Timing | None, b: Timing | None) -> str:
    if a is None or b is None:
        return "n/a"
    return f"{a.median / b.median:.2f} (best {a.best / b.best:.2f})"


def _yes(flags: Mapping[str, bool]) -> str:
    return ", ".join(f"{k}: {'yes' if v else 'NO'}" for k, v in flags.items())


def report(
    engines: list[EngineRow],
    agents: list[AgentRow],
    *,
    command: str,
    load: tuple[float, float],
    repeats: tuple[int, int],
    note: str | None,
) -> None:
    print("## In-process engine: durable-plan vs strands-plan-tool")
    print()
    print(
        f"machine: {os.cpu_count()} cores, 1-min load average {load[0]:.2f} at start / "
        f"{load[1]:.2f} at end; Python {platform.python_version()}; durable-plan "
        f"{_version('durable-plan')} ({_commit()}); strands-plan-tool "
        f"{_version('strands-plan-tool')}; strands-agents {_version('strands-agents')}; "
        f"jsonata-python {_version('jsonata-python')}"
    )
    print()
    print(f"command: `{command}`")
    if note:
        print()
        print(f"note: {note}")
    print()
    print(
        f"(a) engine per step, instant tools, check + run from a plan dict "
        f"({repeats[0]} interleaved repeats; ms per step, best / median)"
    )
    print()
    print("| plan | steps | ours | reference | ours / reference (median) | results right |")
    print("| --- | ---: | ---: | ---: | ---: | --- |")
    for e in engines:
        ours, ref = e.per_step_ms.get("ours"), e.per_step_ms.get("reference")
        print(
            f"| {e.plan} | {e.steps} | {_pair(ours, 3)} | {_pair(ref, 3)} | "
            f"{_ratio(ours, ref)} | {_yes(e.correct)} |"
        )
    print()
    print(
        f"(b) one agent turn submitting the plan (plain strands.Agent, scripted model, async "
        f"tools of {TOOL_S * 1000:g} ms; {repeats[1]} interleaved repeats; ms, best / median)"
    )
    print()
    print(
        "| plan | critical path | ours | reference | ours / critical path (median) | "
        "reference / ours (median) | results right |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | --- |")
    for a in agents:
        ours, ref = a.wall_ms.get("ours"), a.wall_ms.get("reference")
        over = "n/a" if ours is None else f"{ours.median / a.critical_ms:.3f}"
        print(
            f"| {a.plan} | {a.critical_ms:.0f} | {_pair(ours, 1)} | {_pair(ref, 1)} | "
            f"{over} | {_ratio(ref, ours)} | {_yes(a.correct)} |"
        )
    print()
    worst_engine = max(
        (
            e.per_step_ms["ours"].median / e.per_step_ms["reference"].median
            for e in engines
            if "reference" in e.per_step_ms
        ),
        default=None,
    )
    if worst_engine is not None:
        verdict = "met" if worst_engine <= 1.0 else "NOT met"
        print(
            f"target ours <= reference per step: {verdict} (worst median ratio {worst_engine:.2f})"
        )
    worst_agent = max((a.wall_ms["ours"].median / a.critical_ms for a in agents), default=None)
    if worst_agent is not None:
        verdict = "met" if worst_agent <= TARGET_OVER_CRITICAL else "NOT met"
        print(
            f"target ours within {TARGET_OVER_CRITICAL - 1:.0%} of the critical path: {verdict} "
            f"(worst median {worst_agent:.3f}x)"
        )


async def measure(args: argparse.Namespace, command: str, note: str | None) -> None:
    engine_runners: dict[str, Runner] = {"ours": run_ours}
    agent_runners: dict[str, AgentRunner] = {"ours": agent_ours}
    ref_engine, ref_agent = reference_runner(), agent_reference()
    if ref_engine is not None and ref_agent is not None:
        engine_runners["reference"] = ref_engine
        agent_runners["reference"] = ref_agent
    engine_repeats = args.repeats or (15 if args.quick else 60)
    agent_repeats = args.agent_repeats or (3 if args.quick else 9)
    load_start = os.getloadavg()[0]
    engines = await bench_engines(engine_runners, engine_repeats)
    agents = await bench_agents(agent_runners, agent_repeats)
    load_end = os.getloadavg()[0]
    report(
        engines,
        agents,
        command=command,
        load=(load_start, load_end),
        repeats=(engine_repeats, agent_repeats),
        note=note,
    )


# -- the reference's virtualenv --------------------------------------------------------


class NoReference(Exception):
    """The reference cannot be installed here; the message says why."""


def _is_312(python: str) -> bool:
    try:
        probe = subprocess.run(
            [python, "-c", "import sys; sys.exit(0 if sys.version_info >= (3, 12) else 1)"],
            capture_output=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == 0


def find_python(explicit: str | None) -> str:
    """A Python >= 3.12 for the reference's venv."""
    if explicit:
        if not _is_312(explicit):
            raise NoReference(f"--python {explicit} is not a working Python >= 3.12")
        return explicit
    candidates = [os.environ.get("DURABLE_PLAN_BENCH_PYTHON", "")]
    candidates += [shutil.which(n) or "" for n in ("python3.13", "python3.12", "python3")]
    for root in (os.environ.get("PYENV_ROOT", ""), str(Path.home() / ".pyenv")):
        if root:
            found = glob.glob(os.path.join(root, "versions", "3.1[2-9]*", "bin", "python3"))
            candidates += sorted(found)  # the oldest first: 3.12, as the reference asks
    for candidate in candidates:
        if candidate and _is_312(candidate):
            return candidate
    raise NoReference(
        "no Python >= 3.12 found (strands-plan-tool needs one): pass --python PATH or set "
        "DURABLE_PLAN_BENCH_PYTHON"
    )


_PROBE = (
    "import importlib.metadata as m, durable_plan, strands_plan_tool; "
    "print(m.version('strands-plan-tool')); print(durable_plan.__file__)"
)


def _venv_ready(venv_python: Path) -> bool:
    if not venv_python.exists():
        return False
    probe = subprocess.run([str(venv_python), "-c", _PROBE], capture_output=True, text=True)
    lines = probe.stdout.split()
    return (
        probe.returncode == 0
        and len(lines) == 2
        and lines[0] == REFERENCE.split("==")[1]
        and Path(lines[1]).resolve().is_relative_to(REPO / "src")
    )


def ensure_venv(venv: Path, python: str | None) -> Path:
    """The venv's interpreter, with the reference and this checkout installed in it."""
    venv_python = venv / "bin" / "python"
    if _venv_ready(venv_python):
        return venv_python
    base = find_python(python)
    print(f"building the reference's venv at {venv} with {base} ...", file=sys.stderr)
    steps = [
        [base, "-m", "venv", str(venv)],
        [str(venv_python), "-m", "pip", "install", "-q", REFERENCE, "-e", str(REPO)],
    ]
    for step in steps:
        done = subprocess.run(step, capture_output=True, text=True)
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
            raise NoReference(f"`{shlex.join(step)}` failed: {' / '.join(tail)}")
    if not _venv_ready(venv_python):
        raise NoReference(f"{venv} was built but cannot import strands_plan_tool and durable_plan")
    return venv_python


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats (about 20 s)")
    parser.add_argument("--repeats", type=int, default=0, help="engine repeats (default 60)")
    parser.add_argument(
        "--agent-repeats", type=int, default=0, help="agent-turn repeats (default 9)"
    )
    parser.add_argument("--ref-venv", type=Path, default=DEFAULT_VENV, help="the reference's venv")
    parser.add_argument("--python", help="a Python >= 3.12 to build the reference's venv with")
    parser.add_argument("--ours-only", action="store_true", help="measure durable-plan alone")
    parser.add_argument("--command", help=argparse.SUPPRESS)  # the command as typed, when re-run
    args = parser.parse_args(argv)
    given = sys.argv[1:] if argv is None else argv
    command = args.command or shlex.join(["python", "-m", "bench.compare", *given])
    note: str | None = None
    have_reference = reference_runner() is not None
    if not have_reference and not args.ours_only:
        try:
            venv_python = ensure_venv(args.ref_venv.expanduser(), args.python)
        except NoReference as exc:
            note = f"the reference was not measured: {exc}"
        else:
            rerun = [str(venv_python), "-m", "bench.compare", *given, "--command", command]
            sys.exit(subprocess.run(rerun, cwd=REPO).returncode)
    asyncio.run(measure(args, command, note))


if __name__ == "__main__":
    from durable_plan.server.connection import exit_now

    exit_now(main())  # no interpreter finalization: temporalio/sdk-python#300
