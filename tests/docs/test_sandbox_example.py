"""``examples/sandbox_agent.py`` (with its ``examples/sandbox_agent_workflow.py``) runs to its
end against the dev server: a plan over the agent's
sandbox (the agent writes, the plan reads, edits and runs, the agent reads the change)."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.support.doc_pages import ROOT


def test_the_sandbox_example_runs_a_plan_in_the_conversations_sandbox(temporal_target: str) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "sandbox_agent.py")],
        cwd=ROOT,
        env={**os.environ, "TEMPORAL_ADDRESS": temporal_target},
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("agent wrote: ")
    assert lines[1] == (
        "plan returned: {'shout': {'output': 'GOOD DAY THERE\\n', 'error': '', 'exit_code': 0}, "
        "'words': {'path': '/hello.txt', 'words': 3}}"
    ), done.stdout
    assert "good day there" in lines[2], done.stdout
    assert lines[3] == "answer: Done: hello.txt is polite now."
