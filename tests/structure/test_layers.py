"""The direction of imports between the subpackages, walked from the source.

Every ``import`` and ``from ... import`` in ``src/durable_plan`` (at any depth: inside
functions and ``TYPE_CHECKING`` blocks too, since a lazy import is still a dependency) is
mapped to the layer it comes from and the layer it reaches. The rules (README, Layout):

- ``language`` imports nothing of ours; ``expressions`` only the language;
- ``check`` the language and expressions; ``tools`` those and the checks;
- ``run`` (the core both runners drive) only language, expressions, check and tools;
- ``local`` and ``temporal`` import ``run`` and never each other;
- ``temporal`` is five rooms by where code runs: ``wire`` (a leaf), ``workflows`` (only the
  wire), ``activities`` and ``client`` (the wire and workflow definitions), ``worker`` (all);
- nothing imports ``cli`` (but ``cli`` itself, its browser console ``console``, which is
  part of its layer, and the ``__main__`` entry point);
- ``protect`` (encryption, result stores) stands alone; ``server`` may add encryption;
- ``temporal``'s activities, client and worker may use ``protect`` (its client ``server``);
  ``strands`` (the plugin, run in a conversation's workflow) reaches the in-process runner
  and, for its durable path, the wire and workflow code, never the client or activities;
- ``testing`` (the scripted model) is imported by nothing of ours but the command line.

A plain in-process agent does not load workflow code: checked in a fresh interpreter.
"""

from __future__ import annotations

import ast
import gc
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "durable_plan"

# What each layer may import (besides itself). The top-level modules are the package root
# (the public API, one lazy table) and the ``python -m durable_plan`` entry point.
ALLOWED: dict[str, set[str]] = {
    "language": set(),
    "expressions": {"language"},
    "check": {"language", "expressions"},
    "tools": {"language", "expressions", "check"},
    "run": {"language", "expressions", "check", "tools"},
    "local": {"language", "expressions", "check", "tools", "run"},
    "protect": {"language"},
    "server": {"language", "protect"},
    # Temporal's rooms, by where the code runs: the wire is a leaf; workflow code never
    # reaches activity, client or worker code (tests/structure/test_determinism_boundary.py loads
    # it).
    "temporal.wire": {"language"},
    "temporal.workflows": {"language", "expressions", "check", "tools", "run", "temporal.wire"},
    "temporal.activities": {
        "language",
        "tools",
        "run",
        "protect",
        "temporal.wire",
        "temporal.workflows",
    },
    "temporal.client": {
        "language",
        "check",
        "tools",
        "run",
        "protect",
        "server",
        "temporal.wire",
        "temporal.workflows",
    },
    "temporal.worker": {
        "language",
        "tools",
        "protect",
        "temporal.wire",
        "temporal.workflows",
        "temporal.activities",
        "temporal.client",
    },
    # The plan tool runs inside a conversation's workflow: workflow code and the wire only.
    "strands": {
        "language",
        "expressions",
        "check",
        "tools",
        "run",
        "local",
        "temporal.wire",
        "temporal.workflows",
    },
    "testing": {"language", "tools"},
    "cli": {
        "language",
        "expressions",
        "check",
        "tools",
        "run",
        "local",
        "temporal.wire",
        "temporal.workflows",
        "temporal.activities",
        "temporal.client",
        "temporal.worker",
        "protect",
        "server",
        "strands",
        "testing",
    },
}


def layer_of(module: str) -> str | None:
    """``durable_plan.run.engine`` -> ``run``; top-level modules -> ``<top>``."""
    parts = module.split(".")
    if parts[0] != "durable_plan":
        return None
    if len(parts) == 1:
        return "<top>"
    candidate = SRC / parts[1]
    if not candidate.is_dir():
        return "<top>"
    if parts[1] == "console":  # the command line's browser face (`durable-plan ui`): its layer
        return "cli"
    if parts[1] == "temporal":  # its rooms are layers of their own
        if len(parts) > 2 and (candidate / parts[2]).is_dir():
            return f"temporal.{parts[2]}"
        return "<top>" if len(parts) == 2 else "temporal"  # a module outside the rooms: no rule
    return parts[1]


def module_name(path: Path) -> str:
    rel = path.relative_to(SRC.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path) -> list[tuple[int, str]]:
    """(line, absolute module) of every import in the file, relative ones resolved."""
    # The collector paused: on CPython 3.11 a finalizer running inside a parse (async
    # generators other tests' agents left) can fail it with "AST constructor recursion
    # depth mismatch" (seen once under the full suite).
    gc.disable()
    try:
        tree = ast.parse(path.read_text(), filename=str(path))
    finally:
        gc.enable()
    package = module_name(path)
    if path.name != "__init__.py":
        package = package.rsplit(".", 1)[0]
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.append((node.lineno, target))
            # `from durable_plan import run` names a subpackage too.
            for alias in node.names:
                found.append((node.lineno, f"{target}.{alias.name}"))
    return found


def violations() -> list[str]:
    bad: list[str] = []
    for path in sorted(SRC.rglob("*.py")):
        here = layer_of(module_name(path))
        for line, target in imports_of(path):
            there = layer_of(target)
            if here == "<top>" or there in (None, here, "<top>"):
                continue  # a public shim or the package root re-exports a layer
            if there not in ALLOWED[str(here)]:
                rel = path.relative_to(SRC.parent)
                bad.append(f"{rel}:{line}: {here} imports {there} ({target})")
    return sorted(set(bad))


def test_imports_point_one_way() -> None:
    assert violations() == []


def test_nothing_imports_the_command_line() -> None:
    """Only the command line itself (with its browser console, ``durable-plan ui``, which
    makes the same calls) and ``python -m durable_plan`` reach ``cli``."""
    reach = sorted(
        str(path.relative_to(SRC.parent))
        for path in SRC.rglob("*.py")
        if layer_of(module_name(path)) != "cli"
        and any(layer_of(t) == "cli" and ".cli" in t for _, t in imports_of(path))
    )
    assert reach == ["durable_plan/__main__.py"]


def test_temporal_code_lives_in_a_room() -> None:
    """Every module of ``temporal`` is in one of its rooms, so each has a rule."""
    loose = sorted(p.name for p in (SRC / "temporal").glob("*.py") if p.name != "__init__.py")
    assert loose == []
    rooms = {p.name for p in (SRC / "temporal").iterdir() if p.is_dir()} - {"__pycache__"}
    assert rooms == {
        "wire",
        "workflows",
        "activities",
        "client",
        "worker",
    }


def test_the_walk_sees_real_imports() -> None:
    """The walker is not vacuous: it finds the core's imports and would flag a wrong one."""
    engine = dict((t, n) for n, t in imports_of(SRC / "run" / "engine.py"))
    assert "durable_plan.run.scheduler" in engine and "durable_plan.check" in engine
    assert layer_of("durable_plan.temporal.workflows.plan_workflow") == "temporal.workflows"
    assert layer_of("durable_plan.temporal.wire.messages") == "temporal.wire"
    assert layer_of("durable_plan") == "<top>"
    assert not any(layer.startswith("temporal") for layer in ALLOWED["run"])
    assert all("local" not in ALLOWED[layer] for layer in ALLOWED if layer.startswith("temporal"))
    for room in ("temporal.activities", "temporal.client", "temporal.worker"):
        assert room not in ALLOWED["temporal.workflows"] and room not in ALLOWED["strands"]
    assert all("cli" not in allowed for layer, allowed in ALLOWED.items() if layer != "cli")


def test_no_layer_depends_on_itself_through_another() -> None:
    """The allowed graph has no cycle, so the layers can be read bottom to top."""
    from graphlib import TopologicalSorter

    order = list(TopologicalSorter(ALLOWED).static_order())
    assert order.index("language") < order.index("run") < order.index("temporal.workflows")
    assert order.index("temporal.wire") < order.index("temporal.workflows")
    assert order.index("temporal.workflows") < order.index("temporal.client")


@pytest.mark.parametrize(
    "imports",
    [
        "from durable_plan import execute_plan, ToolRegistry",
        "from durable_plan import WorkflowPlanPlugin",
    ],
)
def test_a_plain_agent_does_not_load_workflow_code(imports: str) -> None:
    """A plain Strands agent with the plan tool, running a plan in-process, never imports
    the workflow modules (nor the Temporal client the durable path needs)."""
    script = f"""
import asyncio, sys
{imports}
from durable_plan import ToolRegistry, WorkflowPlanPlugin, execute_plan
from strands import Agent, tool
from durable_plan.testing import ScriptedModel, call, say

@tool
def add(a: int, b: int) -> int:
    '''a + b.

    Args:
        a: first
        b: second
    '''
    return a + b

plan = {{"steps": [{{"id": "s", "tool": "add", "args": {{"a": 1, "b": 2}}}}], "final": True}}
model = ScriptedModel(scripts={{"go": [call("submit_workflow_plan", **plan), say("done")]}})
agent = Agent(model=model, tools=[add], plugins=[WorkflowPlanPlugin()], callback_handler=None)
agent("go")
print(asyncio.run(execute_plan(plan, ToolRegistry([add]))).returned)
loaded = sorted(m for m in sys.modules if m in (
    "durable_plan.temporal.workflows.plan_workflow",
    "durable_plan.temporal.workflows.agent_workflow",
    "durable_plan.strands.durable",
    "durable_plan.temporal.worker.helpers"))
print("LOADED", loaded)
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "{'s': 3}" in done.stdout
    assert "LOADED []" in done.stdout, done.stdout


def _parsed(path: Path) -> ast.Module:
    gc.disable()  # see imports_of
    try:
        return ast.parse(path.read_text(), filename=str(path))
    finally:
        gc.enable()


def _load_time_imports(nodes: list[ast.AST]) -> list[ast.Import | ast.ImportFrom]:
    """The imports a module runs (or a type checker reads) when it is loaded: at module
    level, inside ``if TYPE_CHECKING:``, ``try``, ``with`` and class bodies; never inside
    a function (that one runs on a call: the layer rules above see it)."""
    found: list[ast.Import | ast.ImportFrom] = []
    for node in nodes:
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
        elif not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for field in ("body", "orelse", "finalbody", "handlers", "cases"):
                inner = getattr(node, field, None)
                if isinstance(inner, list):
                    found += _load_time_imports(inner)
    return found


def module_import_graph() -> dict[str, set[str]]:
    """Module -> the ``durable_plan`` modules it imports at module level. Relative imports
    are resolved; ``from x import y`` reaches ``x.y`` when ``y`` is a submodule, else ``x``
    (a package's ``__init__`` is not counted as imported by its children's own imports)."""
    paths = {module_name(path): path for path in sorted(SRC.rglob("*.py"))}
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        tree = _parsed(path)
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        reached: set[str] = set()
        for node in _load_time_imports(list(tree.body)):
            if isinstance(node, ast.Import):
                reached |= {alias.name for alias in node.names}
                continue
            if node.level:
                parts = package.split(".")
                base = parts[: len(parts) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            subs = {f"{target}.{a.name}" for a in node.names} & paths.keys()
            reached |= subs
            if len(subs) < len(node.names):
                reached.add(target)
        graph[name] = {t for t in reached if t in paths and t != name}
    return graph


def test_no_import_cycle() -> None:
    """No module imports, at module level (``TYPE_CHECKING`` blocks included), a module
    that imports it back, directly or through others: each module can be read, moved and
    tested after what it imports. Two modules that need each other share a piece that
    belongs in a module below both, or one of them takes a plain value."""
    from graphlib import CycleError, TopologicalSorter

    graph = module_import_graph()
    assert "durable_plan.run.items" in graph["durable_plan.run.engine"]  # not vacuous
    assert "durable_plan.expressions" in graph["durable_plan.run.binding"]
    assert "durable_plan" not in graph["durable_plan.run.binding"]  # a submodule, not root
    try:
        TopologicalSorter(graph).prepare()
    except CycleError as exc:
        cycle = " -> ".join(exc.args[1])
        pytest.fail(f"import cycle: {cycle}; move the shared piece into a module below both")


def test_each_class_is_defined_once() -> None:
    """One name per thing: a class defined in two modules is two classes, and an
    ``except`` written for one misses the other (``PlanFailed`` was, in the plan tool and
    in the client). Other import paths re-export the one class."""
    where: dict[str, list[str]] = {}
    for path in sorted(SRC.rglob("*.py")):
        for node in _parsed(path).body:
            if isinstance(node, ast.ClassDef):
                where.setdefault(node.name, []).append(module_name(path))
    assert {name: mods for name, mods in where.items() if len(mods) > 1} == {}


def test_plan_failed_is_one_class() -> None:
    """Every import path of ``PlanFailed`` names the same class, so ``except PlanFailed``
    holds whichever path raised it (the client's ``PlanHandle.result``, the plugin's
    durable path) and it stays a ``RuntimeError``."""
    from durable_plan import PlanFailed as from_package
    from durable_plan.strands.plan_tool import PlanFailed as from_plan_tool
    from durable_plan.temporal.client.start import PlanFailed as from_client
    from durable_plan.temporal.workflows.failures import PlanFailed

    assert from_plan_tool is from_client is from_package is PlanFailed
    assert issubclass(PlanFailed, RuntimeError)
    failed = PlanFailed("the child workflow failed")
    assert failed.salvage is None and str(failed) == "the child workflow failed"


def test_no_module_shadows_a_lazy_name() -> None:
    """A submodule named like a name of the package's lazy table replaces that name once
    anything imports it (``durable_plan.temporal.plan_input``, a module, hid the function
    ``plan_input``: 'module' object is not callable, depending on test order)."""
    import importlib
    import pkgutil

    package = importlib.import_module("durable_plan")
    lazy = set(package.__all__)
    modules = {info.name for info in pkgutil.iter_modules(package.__path__)}
    assert not lazy & modules, sorted(lazy & modules)


def test_the_public_api_is_one_table() -> None:
    """One import path per public name: ``durable_plan``'s table. No other package keeps a
    lazy table (a second one was ``durable_plan.temporal``'s), no top-level module but the
    root and the entry point re-exports a subpackage (the 0.1.0 shims are gone), and every
    name of the table is importable, listed in ``__all__`` and owned by the module it names
    (the class or function is defined there, not re-exported on the way)."""
    import importlib

    import durable_plan

    lazy_packages = sorted(
        module_name(path)
        for path in SRC.rglob("__init__.py")
        if any(
            isinstance(node, ast.FunctionDef) and node.name == "__getattr__"
            for node in _parsed(path).body
        )
    )
    assert lazy_packages == ["durable_plan"]
    assert sorted(p.name for p in SRC.glob("*.py")) == ["__init__.py", "__main__.py"]
    table = durable_plan._EXPORTS
    assert sorted(durable_plan.__all__) == sorted([*table, "__version__"])
    for name, owner in table.items():
        value = getattr(importlib.import_module(owner), name)
        assert getattr(durable_plan, name) is value, name
        defined_in = getattr(value, "__module__", owner)
        assert owner in (defined_in, defined_in.rsplit(".", 1)[0]), (name, owner, defined_in)


MAX_MODULE_LINES = 400
BEING_SPLIT: dict[str, str] = {}
"""Modules allowed over the limit while someone splits them (empty since issue 47): the list
can only shrink, a module split below the limit must leave it."""


def test_no_module_is_over_400_lines() -> None:
    """A module a newcomer can read in one sitting does one job: past 400 lines it holds
    several, and they are split by job (one job per module, a docstring saying why). The
    modules still over the limit are listed above, and the list can only shrink: a module
    that is split (or renamed) must leave it, so nothing new is let in behind them."""
    lines = {
        str(path.relative_to(SRC.parent)): len(path.read_text().splitlines())
        for path in sorted(SRC.rglob("*.py"))
    }
    over = {name: count for name, count in lines.items() if count > MAX_MODULE_LINES}
    assert sorted(set(over) - set(BEING_SPLIT)) == [], f"over {MAX_MODULE_LINES} lines: {over}"
    done = sorted(name for name in BEING_SPLIT if lines.get(name, 0) <= MAX_MODULE_LINES)
    assert done == [], f"split (or gone) now: remove them from BEING_SPLIT: {done}"
