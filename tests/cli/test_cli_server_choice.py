"""Which server `durable-plan run` uses, and that a server it started never outlives it
(issue 46): the running dev server when one answers at the default address (as `worker`,
`show` and `approve` assume), else one started for the run, stopped on Ctrl-C, SIGTERM,
SIGHUP and even SIGKILL."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from pathlib import Path

import pytest

import durable_plan.server.connection as connection
from durable_plan.server.devserver import free_port
from tests.support.helpers import ROOT, arun_cli, spawn_cli

PLANS = ROOT / "examples" / "plans"
TOOLS = ("--tools", "examples.plan_tools")


async def test_run_uses_the_dev_server_that_answers_at_the_default_address(
    monkeypatch: pytest.MonkeyPatch, temporal_target: str
) -> None:
    monkeypatch.setattr(connection, "DEFAULT_ADDRESS", temporal_target)
    done = await arun_cli(
        "run",
        str(PLANS / "game_master.yaml"),
        *TOOLS,
        "-i",
        "monster=ogre",
        env={"TEMPORAL_ADDRESS": None},
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["returned"]["damage"] == {"hp_after": 53, "defeated": False}
    assert f"on the dev server already running at {temporal_target}" in done.stderr


async def test_no_worker_without_a_server_says_so_instead_of_waiting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """It started a throwaway server that no `durable-plan worker` could reach, and waited."""
    nobody = f"127.0.0.1:{free_port()}"
    monkeypatch.setattr(connection, "DEFAULT_ADDRESS", nobody)
    done = await arun_cli(
        "run",
        str(PLANS / "game_master.yaml"),
        *TOOLS,
        "-i",
        "monster=ogre",
        "--no-worker",
        env={"TEMPORAL_ADDRESS": None},
    )
    assert done.returncode == 3, done.stderr
    assert done.stderr.strip() == (
        "durable-plan: error: --no-worker runs the plan on a server that a `durable-plan "
        f"worker` reaches, and no Temporal server answers at {nobody}: start one with "
        "`durable-plan dev`, or pass --address HOST:PORT"
    )


def _servers_on(port: int) -> list[int]:
    """Processes whose command line serves ``port`` (the dev server: ``--port PORT``)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"start-dev" in argv and str(port).encode() in argv:
            found.append(int(entry.name))
    return found


async def _started_server_port(proc: asyncio.subprocess.Process) -> int:
    """Reads the run's header until it names the dev server it started."""
    assert proc.stderr is not None
    seen = b""
    while b"started for this run at" not in seen:
        line = await asyncio.wait_for(proc.stderr.readline(), 60)
        assert line, f"the run ended before its header: {seen.decode()}"
        seen += line
    text = seen.decode()
    address = text.split("started for this run at ", 1)[1].split()[0]
    return int(address.rsplit(":", 1)[1])


async def _gone(port: int, within: float = 20.0) -> bool:
    for _ in range(int(within / 0.1)):
        if not _servers_on(port):
            return True
        await asyncio.sleep(0.1)
    return False


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGKILL])
async def test_a_server_started_for_the_run_never_outlives_it(signum: int) -> None:
    """The plan waits at its approval gate; the run is ended by ``signum``. SIGTERM left the
    server running, reparented to init (exit 143); SIGKILL runs no code of ours at all."""
    proc = await spawn_cli(
        "run", str(PLANS / "triage.yaml"), *TOOLS, "-i", "ticket_id=7", "--embedded"
    )
    try:
        port = await _started_server_port(proc)
        assert _servers_on(port), "the header named a server that is not running"
        os.kill(proc.pid, signum)
        code = await asyncio.wait_for(proc.wait(), 30)
        if signum != signal.SIGKILL:
            assert code == 128 + signum
        assert await _gone(port), f"the dev server on port {port} outlived the run"
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def test_no_worker_is_said_in_words_once(temporal_target: str, task_queue: str) -> None:
    """It printed as a raw Python warning too, with the source file, line and code."""
    proc = await spawn_cli(
        "run",
        str(PLANS / "game_master.yaml"),
        *TOOLS,
        "-i",
        "monster=ogre",
        "--no-worker",
        "--task-queue",
        task_queue,
        "--address",
        temporal_target,
    )
    try:
        assert proc.stderr is not None
        seen = ""
        while "no worker polls" not in seen:
            line = await asyncio.wait_for(proc.stderr.readline(), 60)
            assert line, seen
            seen += line.decode()
        await asyncio.sleep(1.0)  # a warning would follow within the start's second
        os.kill(proc.pid, signal.SIGTERM)
        _, rest = await asyncio.wait_for(proc.communicate(), 30)
        seen += rest.decode()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert seen.count("no worker polls") == 1, seen
    assert "Warning" not in seen and ".py:" not in seen, seen
    assert f"durable-plan worker --tools examples.plan_tools --task-queue {task_queue}" in seen


def test_a_forked_child_does_not_hold_the_lifeline() -> None:
    """A tool that forks (multiprocessing's fork) kept the watcher's pipe open in its child:
    killed, we would have left the server to live as long as that child."""
    from durable_plan.server import devserver

    with devserver.DevServer(headless=True) as server:
        assert server.running
        assert server._lifeline is not None, "a watcher for the server"
        watcher = server._lifeline.pid
        ends = list(devserver._LIFELINE_ENDS.values())  # other servers' of this process too
        pid = os.fork()
        if pid == 0:  # the child: every write end is closed
            still_open = 0
            for end in ends:
                try:
                    os.fstat(end)
                    still_open += 1
                except OSError:
                    pass
            os._exit(still_open)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
    assert watcher not in devserver._LIFELINE_ENDS, "stopped: its watcher is gone too"
