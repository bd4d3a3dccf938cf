"""Python worker subprocesses without the import cost: forked from a process that imported
the stack once.

A worker script (``tests/support/crash_worker.py``, ``worker.py``) spends about 3 s of CPU importing
Temporal, Strands and the plan executor before it does anything; the crash, chaos and
kill tests start dozens of them. ``WarmPython`` starts one launcher per test process that
imports those libraries (never the scripts or the tests' own modules, whose import may read
the environment) and forks a child per ``spawn``: the child gets the caller's stdin,
stdout and stderr, environment, working directory and argv, and runs the script as
``__main__``, as ``python SCRIPT ARGS`` would. It is a real process: SIGKILL kills it with
no goodbye to the server, exactly like a spawned one.

Only a process with a fresh interpreter can differ in what is fixed at start-up (the hash
seed): tests of that (``test_replay_hashseed.py``) spawn their own.

    python tests/support/warm_python.py   # the launcher; its control socket is fd 3
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

PRELOAD = (
    "temporalio.client",
    "temporalio.worker",
    "temporalio.strands_agents",
    "strands",
    "durable_plan.temporal",
    "durable_plan.testing",
    "durable_plan.tools.mcp",
)
"""Libraries only: nothing that reads the environment a test sets for its worker."""

CONTROL_FD = 3
MAX_MESSAGE = 1 << 20


# -- the launcher (its own process) ----------------------------------------------------------


def _child(request: dict[str, Any], fds: list[int], control: socket.socket) -> None:
    """In the forked child: become ``python SCRIPT ARGS`` and run the script."""
    import runpy
    import traceback

    control.close()
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    argv = list(request["argv"])
    module = argv[1] if argv[0] == "-m" else None
    if module is None:
        sys.argv = argv
        sys.path[0] = str(Path(argv[0]).resolve().parent)
    else:  # python -m MODULE ARGS: sys.path[0] is the working directory
        sys.argv = [module, *argv[2:]]
        sys.path[0] = request["cwd"]
    if request["env"].get("PYTHONUNBUFFERED"):
        sys.stdout.reconfigure(line_buffering=True, write_through=True)
        sys.stderr.reconfigure(line_buffering=True, write_through=True)
    code = 0
    try:
        if module is None:
            runpy.run_path(argv[0], run_name="__main__")
        else:
            runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except KeyboardInterrupt:
        code = 130
    except BaseException:
        traceback.print_exc()
        code = 1
    with contextlib.suppress(Exception):
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code)


def _launcher() -> None:
    import importlib
    import select

    for name in PRELOAD:
        importlib.import_module(name)
    # Forking is safe only while this process runs one thread (the imports start none, and
    # the launcher itself reaps its children from this thread).
    assert threading.active_count() == 1, threading.enumerate()
    control = socket.socket(fileno=CONTROL_FD)

    def send(message: dict[str, Any]) -> None:
        control.sendall(json.dumps(message).encode() + b"\n")

    children: set[int] = set()
    buffer = b""
    send({"ready": True})
    while True:
        readable, _, _ = select.select([control], [], [], 0.05)
        while children:  # report the children that exited
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
            children.discard(pid)
            send({"exit": pid, "status": os.waitstatus_to_exitcode(status)})
        if not readable:
            continue
        data, fds, _, _ = socket.recv_fds(control, MAX_MESSAGE, 3)
        if not data:
            return  # the test process is gone: so are we (children end at their stdin's EOF)
        buffer += data
        while b"\n" in buffer:
            line, _, buffer = buffer.partition(b"\n")
            request = json.loads(line)
            pid = os.fork()
            if pid == 0:
                _child(request, fds, control)
            for fd in fds:
                os.close(fd)
            children.add(pid)
            send({"pid": pid})


# -- the test side ---------------------------------------------------------------------------


class WarmProcess:
    """A forked worker, with the parts of ``asyncio.subprocess.Process`` the tests use."""

    def __init__(
        self,
        pid: int,
        stdin: asyncio.StreamWriter,
        stdout: asyncio.StreamReader,
        stderr: asyncio.StreamReader | None = None,
    ) -> None:
        self.pid = pid
        self.stdin = stdin
        self.stdout = stdout
        self.stderr = stderr
        self.returncode: int | None = None
        self._exited = asyncio.get_running_loop().create_future()

    def _set_exit(self, code: int) -> None:
        self.returncode = code
        if not self._exited.done():
            self._exited.set_result(code)

    async def wait(self) -> int:
        return int(await asyncio.shield(self._exited))

    async def communicate(self) -> tuple[bytes, bytes]:
        """Close stdin, read stdout (and a piped stderr) to the end, wait for the exit."""
        self.stdin.close()
        err = self.stderr.read() if self.stderr is not None else asyncio.sleep(0, b"")
        out, errors = await asyncio.gather(self.stdout.read(), err)
        await self.wait()
        return out, errors

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)


class WarmPython:
    """The launcher for one event loop; ``spawn`` is ``asyncio.create_subprocess_exec(
    sys.executable, SCRIPT, ...)`` with stdin and stdout piped and stderr to a file."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen[bytes] | None = None
        self._control: socket.socket | None = None
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._pending: asyncio.Queue[int] = asyncio.Queue()
        self._children: dict[int, WarmProcess] = {}
        self._exits: dict[int, int] = {}
        self._listen: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()

    async def start(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        env = {**os.environ, "PYTHONPATH": _pythonpath()}
        with theirs:
            self._proc = subprocess.Popen(
                [sys.executable, __file__],
                pass_fds=[theirs.fileno()],
                env={**env, "WARM_PYTHON_FD": str(theirs.fileno())},
                stdin=subprocess.DEVNULL,
            )
        self._control = ours
        ours.setblocking(False)
        self._reader, self._writer = await asyncio.open_unix_connection(sock=ours)
        ready = await asyncio.wait_for(self._reader.readline(), 60)
        assert json.loads(ready) == {"ready": True}, ready
        self._listen = asyncio.ensure_future(self._listen_forever())

    async def _listen_forever(self) -> None:
        assert self._reader is not None
        while line := await self._reader.readline():
            message = json.loads(line)
            if "pid" in message:
                await self._pending.put(message["pid"])
            else:
                pid, code = message["exit"], message["status"]
                child = self._children.get(pid)
                if child is None:
                    self._exits[pid] = code
                else:
                    child._set_exit(code)

    async def spawn(
        self,
        script: str | Path,
        *args: str,
        env: Mapping[str, str] | None = None,
        cwd: str | Path | None = None,
        stderr: Any = None,
    ) -> WarmProcess:
        """Fork ``python SCRIPT ARGS`` (``"-m", MODULE, ARGS`` for ``python -m``); ``stderr``
        is a file, ``"stdout"`` (with stdout, as ``stderr=STDOUT``), ``"pipe"`` (the
        process's ``stderr`` stream) or None (this process's)."""
        assert self._control is not None
        loop = asyncio.get_running_loop()
        in_read, in_write = os.pipe()
        out_read, out_write = os.pipe()
        err_read: int | None = None
        if stderr == "stdout":
            err_fd = out_write
        elif stderr == "pipe":
            err_read, err_fd = os.pipe()
        else:
            err_fd = stderr.fileno() if stderr is not None else sys.stderr.fileno()
        request = {
            "argv": [str(script), *args],
            "env": dict(os.environ if env is None else env),
            "cwd": str(cwd or Path.cwd()),
        }
        async with self._lock:  # one request (and its pid reply) at a time
            socket.send_fds(
                self._control, [json.dumps(request).encode() + b"\n"], [in_read, out_write, err_fd]
            )
            pid = await asyncio.wait_for(self._pending.get(), 30)
        os.close(in_read)
        os.close(out_write)
        stdout = await _reader(loop, out_read)
        errors: asyncio.StreamReader | None = None
        if err_read is not None:
            os.close(err_fd)
            errors = await _reader(loop, err_read)
        transport, protocol = await loop.connect_write_pipe(
            asyncio.streams.FlowControlMixin, os.fdopen(in_write, "wb", 0)
        )
        stdin = asyncio.StreamWriter(transport, protocol, None, loop)
        child = WarmProcess(pid, stdin, stdout, errors)
        self._children[pid] = child
        if pid in self._exits:
            child._set_exit(self._exits.pop(pid))
        return child

    async def close(self) -> None:
        for child in self._children.values():
            child.kill()
        for child in self._children.values():
            with contextlib.suppress(Exception):
                await asyncio.wait_for(child.wait(), 10)
        if self._writer is not None:
            self._writer.close()
        if self._listen is not None:
            self._listen.cancel()
        if self._proc is not None:
            self._proc.terminate()
            await asyncio.to_thread(self._proc.wait)


async def _reader(loop: asyncio.AbstractEventLoop, fd: int) -> asyncio.StreamReader:
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(fd, "rb", 0)
    )
    return reader


def _pythonpath() -> str:
    root = str(Path(__file__).resolve().parents[2])
    return os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)


if __name__ == "__main__":
    CONTROL_FD = int(os.environ.pop("WARM_PYTHON_FD"))
    _launcher()
