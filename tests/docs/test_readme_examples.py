"""The documentation's code is what runs: each Python or YAML block of the README and of
docs/ is marked ``<!-- file: PATH -->`` and equals that file, which a test runs (each example
file runs to its documented end against the dev server), or is marked ``<!-- not-run:
REASON -->``; each plan picture is what ``durable-plan graph`` draws; each JSON block parses
(a newcomer copies them as they are)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.doc_pages import ROOT, Block, blocks

CODE_LANGS = ("python", "py", "pycon", "yaml", "yml")

# Each file a block shows, and the test module that runs it (or imports it, for a module of
# tools or a workflow that an example runs).
RUN_BY = {
    "examples/plans/triage.yaml": "tests/cli/test_cli_run.py",
    "examples/plans/saved/size_up.yaml": "tests/cli/test_cli_run.py",
    "examples/plans/callers/skirmish.yaml": "tests/cli/test_cli_run.py",
    "examples/monster_tools.py": "tests/unit/check/test_return_shapes.py",
    "examples/plain_agent.py": "tests/docs/test_readme_examples.py",
    "examples/breakpoints.py": "tests/docs/test_readme_examples.py",
    "examples/existing_app.py": "tests/durable/agents/test_durable_plan_plugin.py",
    "examples/existing_app_workflow.py": "tests/durable/agents/test_durable_plan_plugin.py",
    "examples/sandbox_agent.py": "tests/docs/test_sandbox_example.py",
    "examples/sandbox_agent_workflow.py": "tests/docs/test_sandbox_example.py",
    "examples/plans_without_agent.py": "tests/docs/test_readme_examples.py",
    "examples/large_results.py": "tests/docs/test_readme_examples.py",
    "examples/issue_agent_workflow.py": "tests/docs/test_readme_examples.py",
    "examples/issue_agent.py": "tests/docs/test_readme_examples.py",
    "examples/encrypted_plans.py": "tests/durable/storage/test_encryption.py",
    "examples/watch_a_plan.py": "tests/docs/test_readme_examples.py",
    "examples/routed_tools.py": "tests/durable/plans/test_routing.py",
}


def _code_blocks() -> list[Block]:
    return [b for b in blocks() if b.lang in CODE_LANGS]


def _file_blocks() -> list[Block]:
    return [b for b in _code_blocks() if b.marker == "file"]


def test_every_code_block_is_a_file_the_tests_run_or_says_why_not() -> None:
    unmarked = [b.where() for b in _code_blocks() if b.marker not in ("file", "not-run")]
    assert not unmarked, "mark each block <!-- file: PATH --> or <!-- not-run: REASON -->"
    no_reason = [b.where() for b in _code_blocks() if b.marker == "not-run" and not b.value]
    assert not no_reason, "a not-run block says why it cannot run"
    assert {b.value for b in _file_blocks()} == set(RUN_BY)
    for path, test in RUN_BY.items():
        name = Path(path).stem
        assert name in (ROOT / test).read_text(encoding="utf-8"), f"{test} does not run {path}"


@pytest.mark.parametrize("block", _file_blocks(), ids=lambda b: f"{b.page}:{b.value}")
def test_the_block_equals_its_file(block: Block) -> None:
    assert block.value is not None
    assert block.body == (ROOT / block.value).read_text(encoding="utf-8"), (
        f"{block.page}'s block for {block.value} differs from the file; copy the file in"
    )


def test_the_plan_pictures_are_the_graph_commands_output() -> None:
    graphs = {b.value: b.body for b in blocks() if b.marker == "graph"}
    assert sorted(graphs) == sorted(
        f"examples/plans/{p.name}" for p in (ROOT / "examples" / "plans").glob("*.yaml")
    )
    mermaid = [b for b in blocks() if b.lang == "mermaid"]
    assert len(mermaid) == len(graphs), "a Mermaid block in the docs has no graph marker"
    for path, body in graphs.items():
        assert path is not None
        done = subprocess.run(
            [sys.executable, "-m", "durable_plan", "graph", str(ROOT / path)],
            capture_output=True,
            text=True,
            check=True,
        )
        assert body == done.stdout, f"re-draw {path}: durable-plan graph {path}"


def test_json_blocks_parse() -> None:
    found = [b for b in blocks() if b.lang == "json"]
    assert found
    for block in found:
        json.loads(block.body)


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


def test_breakpoints_runs_offline() -> None:
    out = _run_example("breakpoints.py", "127.0.0.1:1")  # in-process: no server needed
    assert out.splitlines() == [
        "paused at attack: roll_attack({'armour': 15})",
        "ledger: [('lookup', 'ok'), ('attack', 'ok'), ('damage', 'ok')]",
    ]


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
