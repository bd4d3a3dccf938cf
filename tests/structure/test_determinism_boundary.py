"""Workflow code cannot reach the network: the determinism boundary, held by a test.

Deterministic workflow code (the plan workflow, the agent-step workflow, and the plan
tool's body run inside a conversation's workflow, ``strands.durable``) must not load the
client (``temporalio.client``, our ``temporal.client`` room: start, subscribe, pollers, replay),
activity code (``temporal.activities``), the worker (``temporal.worker``), the
result stores (files, boto), the servers, the command line, or network modules. Two checks:

- what importing the entry points loads, in a fresh interpreter, beyond what the
  runtime the workflow code runs on loads by itself (measured in the same interpreter:
  ``temporalio.workflow``, and ``temporalio.strands_agents``, the Temporal runtime of the
  Strands agent an agent step runs, which brings ``strands``, boto and
  ``temporalio.client`` itself: Temporal's sandbox passes them through, they are not ours);
- every import written in the modules of ours that were loaded, lazy ones inside functions
  too (a lazy import runs the first time its function does: in a workflow task), names
  nothing forbidden. ``TYPE_CHECKING`` blocks never run and are not counted.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

ENTRY_POINTS = (
    "durable_plan.temporal.workflows.plan_workflow",  # PlanWorkflow
    "durable_plan.temporal.workflows.agent_workflow",  # the agent step's workflow
    "durable_plan.strands.durable",  # the plan tool's workflow-side body
    "durable_plan.strands.plugin",  # the plan tool, run in the conversation's workflow
    "durable_plan.temporal.workflows.direct_calls",  # a registry tool the model calls directly
    "durable_plan.temporal.workflows.agent_tools",  # DurableTool, in a conversation's workflow
)

FORBIDDEN_THIRD_PARTY = (
    "temporalio.client",
    "temporalio.service",
    "temporalio.worker",
    "temporalio.testing",
    "boto3",
    "botocore",
    "urllib.request",
    "http.client",
    "socket",
    "ssl",
    "httpx",
    "requests",
    "aiohttp",
)
FORBIDDEN_OURS = (
    "durable_plan.protect.payload_storage",
    "durable_plan.protect.result_store",
    # The pieces split out of those two (issue 47): forbidden as they were inside them.
    "durable_plan.protect.payload_errors",
    "durable_plan.protect.payload_file_driver",
    "durable_plan.protect.payload_s3_driver",
    "durable_plan.protect.result_keys",
    "durable_plan.protect.sweep_files",
    # Temporal's rooms that are not workflow code, whole: whatever is added to them later is
    # forbidden too (the client also sets the tracer provider and asks the server).
    "durable_plan.temporal.client",
    "durable_plan.temporal.activities",
    "durable_plan.temporal.worker",
    "durable_plan.server",
    "durable_plan.cli",
)
FORBIDDEN = FORBIDDEN_THIRD_PARTY + FORBIDDEN_OURS

KNOWN_LAZY: set[tuple[str, str]] = set()
"""(module, forbidden import) written in workflow code and not yet moved out, one line
each with the reason. Empty: a new entry needs a reason, and the test fails on any other."""

SCRIPT = """
import json, sys
import temporalio.workflow
bare = set(sys.modules)
import temporalio.strands_agents
runtime = set(sys.modules)
for name in sys.argv[1:]:
    __import__(name)
ours = {
    m: getattr(sys.modules[m], "__file__", None)
    for m in sys.modules
    if m == "durable_plan" or m.startswith("durable_plan.")
}
print(json.dumps({
    "runtime": sorted(runtime - bare),
    "added": sorted(set(sys.modules) - runtime),
    "ours": ours,
}))
"""


def load(modules: tuple[str, ...]) -> dict[str, object]:
    """What importing ``modules`` loads, in a fresh interpreter (this one has loaded
    everything the other tests needed)."""
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, *modules],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    loaded: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return loaded


def forbidden(name: str) -> bool:
    return any(name == f or name.startswith(f + ".") for f in FORBIDDEN)


def runtime_imports(path: Path, module: str) -> list[tuple[int, str]]:
    """(line, absolute module) of every import that can run, at any depth (inside
    functions too), ``if TYPE_CHECKING:`` blocks left out; relative ones resolved."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found: list[tuple[int, str]] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = parts[: len(parts) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.append((node.lineno, target))
            found.extend((node.lineno, f"{target}.{alias.name}") for alias in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


@pytest.fixture(scope="module")
def workflow_code() -> dict[str, object]:
    return load(ENTRY_POINTS)


def test_workflow_code_loads_no_client_storage_or_network_module(
    workflow_code: dict[str, object],
) -> None:
    added = workflow_code["added"]
    ours = workflow_code["ours"]
    assert isinstance(added, list) and isinstance(ours, dict)
    assert all(entry in ours for entry in ENTRY_POINTS)
    assert sorted({m for m in [*added, *ours] if forbidden(m)}) == []


def test_workflow_code_writes_no_forbidden_import_even_lazily(
    workflow_code: dict[str, object],
) -> None:
    ours = workflow_code["ours"]
    assert isinstance(ours, dict)
    found: dict[tuple[str, int], str] = {}  # one line each: the module it names
    for module, file in sorted(ours.items()):
        if not file:
            continue
        for line, target in runtime_imports(Path(file), module):
            if forbidden(target) and (module, target) not in KNOWN_LAZY:
                found[module, line] = min(found.get((module, line), target), target, key=len)
    assert [f"{m}:{line}: imports {t}" for (m, line), t in sorted(found.items())] == []


def test_the_boundary_check_sees_a_violation(tmp_path: Path) -> None:
    """Not vacuous: the client, loaded the way workflow code would, is caught by both
    checks; a lazy import counts and a ``TYPE_CHECKING`` one does not."""
    loaded = load(("durable_plan.temporal.client.start",))
    ours = loaded["ours"]
    assert isinstance(ours, dict)
    assert {
        "durable_plan.temporal.client.pollers",
        "durable_plan.temporal.client.subscribe",
    } <= set(ours)
    assert "temporalio.client" in loaded["runtime"]  # brought by strands_agents, not by us
    client = ROOT / "src" / "durable_plan" / "temporal" / "client" / "start.py"
    targets = [t for _, t in runtime_imports(client, "durable_plan.temporal.client.start")]
    assert "temporalio.client" in targets and "durable_plan.temporal.client.pollers" in targets
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    import boto3\nif TYPE_CHECKING:\n    import botocore\n")
    assert [t for _, t in runtime_imports(probe, "probe")] == ["boto3"]
