"""The README's code is what runs: each Python block marked ``<!-- file: PATH -->`` equals
that file, each example file runs to its documented end against the dev server, and each
JSON block parses (a newcomer copies them as they are)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
BLOCK = re.compile(r"^```(\w*)\n(.*?)^```$", re.S | re.M)
MARKED = re.compile(r"<!-- file: (\S+) -->\n```(?:python|yaml)\n(.*?)^```$", re.S | re.M)
GRAPHS = re.compile(r"<!-- graph: (\S+) -->\n```mermaid\n(.*?)^```$", re.S | re.M)


def _marked_blocks() -> dict[str, str]:
    return {path: body for path, body in MARKED.findall(README)}


def test_every_python_block_is_a_file_the_tests_run() -> None:
    python_blocks = [body for lang, body in BLOCK.findall(README) if lang in ("python", "yaml")]
    marked = _marked_blocks()
    assert len(python_blocks) == len(marked), "a Python block in the README has no file marker"
    assert set(marked) == {
        "examples/plans/triage.yaml",
        "examples/monster_tools.py",
        "examples/plain_agent.py",
        "examples/agent_workflow.py",
        "examples/in_your_workflow.py",
        "examples/plans_without_agent.py",
        "examples/large_results.py",
        "examples/issue_agent_workflow.py",
        "examples/issue_agent.py",
        "examples/encrypted_plans.py",
        "examples/watch_a_plan.py",
        "examples/routed_tools.py",
    }


@pytest.mark.parametrize("path", sorted(_marked_blocks()))
def test_the_block_equals_its_file(path: str) -> None:
    assert _marked_blocks()[path] == (ROOT / path).read_text(encoding="utf-8"), (
        f"README's block for {path} differs from the file; copy the file into the README"
    )


def test_the_plan_pictures_are_the_graph_commands_output() -> None:
    graphs = dict(GRAPHS.findall(README))
    assert sorted(graphs) == sorted(
        f"examples/plans/{p.name}" for p in (ROOT / "examples" / "plans").glob("*.yaml")
    )
    mermaid = [body for lang, body in BLOCK.findall(README) if lang == "mermaid"]
    assert len(mermaid) == len(graphs), "a Mermaid block in the README has no graph marker"
    for path, body in graphs.items():
        done = subprocess.run(
            [sys.executable, "-m", "durable_plan", "graph", str(ROOT / path)],
            capture_output=True,
            text=True,
            check=True,
        )
        assert body == done.stdout, f"re-draw {path}: durable-plan graph {path}"


def test_json_blocks_parse() -> None:
    blocks = [body for lang, body in BLOCK.findall(README) if lang == "json"]
    assert blocks
    for body in blocks:
        json.loads(body)


def _run_example(name: str, address: str, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / name), *args],
        cwd=ROOT,
        env={**os.environ, "TEMPORAL_ADDRESS": address},
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    return done.stdout


def test_plain_agent_runs_offline() -> None:
    out = _run_example("plain_agent.py", "127.0.0.1:1")  # no server needed
    assert "model calls:" in out


def test_in_your_workflow_runs(temporal_target: str) -> None:
    out = _run_example("in_your_workflow.py", temporal_target)
    assert out.strip(), "the conversation printed no answer"


def test_plans_without_agent_runs(temporal_target: str) -> None:
    out = _run_example("plans_without_agent.py", temporal_target)
    assert "rm:" in out


def test_large_results_runs(temporal_target: str) -> None:
    out = _run_example("large_results.py", temporal_target)
    assert "count: {'pages': 2048, 'chars': 20976554}" in out
    assert "left in the store: []" in out
    history = int(out.split("history: ")[1].split()[0])
    assert history < 64 * 1024, out


def test_issue_agent_runs_a_plan_over_an_mcp_server(temporal_target: str) -> None:
    out = _run_example("issue_agent.py", temporal_target)
    expected = '{"label": {"number": 7, "labels": ["bug", "monsters"]}}'
    assert out.splitlines() == [f"in-process: {expected}", f"durable: {expected}"], out


def test_watch_a_plan_runs(temporal_target: str) -> None:
    out = _run_example("watch_a_plan.py", temporal_target)
    assert "in-process: step_finished damage ok" in out
    assert "durable: 6 damage ok" in out
    assert "resumed at 3: True" in out
    assert "spans: ['plan', 'step attack', 'step damage', 'step lookup']" in out
