"""Kill the worker mid-command: the plan's sandbox step runs again in the same environment.

The worker runs as a subprocess (``tests/support/crash_worker.py --sandbox``: the sandbox
tests' conversation, its scripted model, ``StrandsPlugin(sandboxes={"work": ...})``). The
plan's ``sandbox_shell`` step appends "start", sleeps 3 s, appends "done" to ``runs.log`` in
the conversation's environment. Once "start" is there and the step is all the server waits
for, the worker is SIGKILLed and a replacement takes over: the step's heartbeat times out
after a second, Temporal retries it (an interruption, not one of its ``retries=0``), and the
factory, asked again with the conversation's chain, finds the same directory: the command
runs a second time there (at least once, as the SDK says), and the plan ends ok. The killed
worker's own shell is orphaned, not killed with it, and may still finish.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from temporalio.client import Client
from temporalio.strands_agents import StrandsPlugin

from tests.support.sandbox_support import BASE_ENV, CALLS_FILE, SANDBOX, chain_sandboxes
from tests.support.sandbox_workflows import SandboxChatInput, SandboxChatWorkflow
from tests.support.worker_processes import RESULT_TIMEOUT_S, worker_processes

KILL_POINT_TIMEOUT_S = 30.0


@pytest.fixture
async def starter(temporal_target: str) -> AsyncIterator[Client]:
    """A client that starts the conversation (the workers are subprocesses)."""
    plugin = StrandsPlugin(models={}, sandboxes={SANDBOX: chain_sandboxes()})
    yield await Client.connect(temporal_target, plugins=[plugin])


async def until_command_runs(client: Client, child_id: str, runs: Path) -> None:
    """Until the command started in the environment and the step is all the plan waits for."""
    deadline = time.monotonic() + KILL_POINT_TIMEOUT_S
    while time.monotonic() < deadline:
        if runs.exists() and runs.read_text().split() == ["start"]:
            with_desc = (await client.get_workflow_handle(child_id).describe()).raw_description
            pending = {a.activity_id for a in with_desc.pending_activities}
            if pending == {"slow"} and not with_desc.HasField("pending_workflow_task"):
                return
        await asyncio.sleep(0.05)
    pytest.fail(
        f"the command never ran alone; runs.log: {runs.read_text() if runs.exists() else None}"
    )


async def test_a_killed_workers_sandbox_step_runs_again_in_the_same_environment(
    starter: Client,
    temporal_target: str,
    task_queue: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    base = tmp_path / "sandboxes"
    base.mkdir()
    monkeypatch.setenv(BASE_ENV, str(base))  # the worker subprocesses inherit it
    workflow_id = f"sandbox-crash-{uuid.uuid4().hex[:8]}"
    log = tmp_path / "unused.jsonl"
    async with worker_processes(temporal_target, task_queue, log, tmp_path, "--sandbox") as spawn:
        first = await spawn()
        handle = await starter.start_workflow(
            SandboxChatWorkflow.run,
            SandboxChatInput(["slow command"], "slow"),
            id=workflow_id,
            task_queue=task_queue,
        )
        child_id = f"{workflow_id}/plan/tooluse_1_0"
        loading = asyncio.create_task(spawn(hold=True))
        deadline = time.monotonic() + KILL_POINT_TIMEOUT_S
        while not any(base.glob("*/runs.log")) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        [runs] = list(base.glob("*/runs.log"))
        await until_command_runs(starter, child_id, runs)
        first.kill()
        await first.proc.wait()
        second = await loading
        await second.release()
        out = await asyncio.wait_for(handle.result(), RESULT_TIMEOUT_S)
    [_created, plan] = out["results"]
    assert plan["status"] == "success", plan
    # Killed mid-sleep, run again from the start in the very same directory. (The killed
    # worker's shell, orphaned, may finish its sleep too: a command runs at least once.)
    lines = runs.read_text().split()
    assert lines[0] == "start" and lines.count("start") == 2 and "done" in lines, lines
    assert lines[-1] == "done" or lines[-2:] == ["done", "done"], lines
    assert runs.parent.name.startswith(workflow_id)
    assert [p.name for p in base.iterdir() if p.is_dir()] == [runs.parent.name]
    chains = {line.split()[0] for line in (base / CALLS_FILE).read_text().splitlines()}
    assert chains == {workflow_id}
