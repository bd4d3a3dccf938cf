"""The lifeline: a watcher that stops a dev server we started once this process is gone.

Apart from the server process (``devserver.py``) because it is process plumbing of its
own (a pipe whose write end only this process holds, closed again in forked children):
whatever ends this process, SIGKILL included, a server we started never outlives us.
"""

from __future__ import annotations

import contextlib
import os
import subprocess


def _lifeline(pid: int) -> subprocess.Popen[bytes] | None:
    """A watcher that stops the server ``pid`` when this process is gone, however it ended.

    SIGTERM, SIGHUP and Ctrl-C stop the server in order (``stop``); SIGKILL, or a crash, runs
    no code of ours. The watcher, a shell in a session of its own, blocks reading a pipe
    whose only write end this process holds (not inherited: PEP 446); when this process
    ends, the kernel closes it, the read returns, and the shell sends the server SIGTERM.
    A server we started never outlives us. Without ``sh``, no watcher (the stops above hold).
    """
    read_end, write_end = os.pipe()
    try:
        watcher = subprocess.Popen(
            ["sh", "-c", f"read _ignored; kill -TERM {pid} 2>/dev/null"],
            stdin=read_end,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError:
        os.close(write_end)
        return None
    finally:
        os.close(read_end)
    _LIFELINE_ENDS[watcher.pid] = write_end  # kept open as long as this process lives
    return watcher


_LIFELINE_ENDS: dict[int, int] = {}


def _close_lifeline_ends() -> None:
    """In a forked child (a tool using multiprocessing's fork): the write ends are ours, not
    its; held there, they would keep a watcher waiting after we are gone."""
    for end in _LIFELINE_ENDS.values():
        with contextlib.suppress(OSError):
            os.close(end)
    _LIFELINE_ENDS.clear()


os.register_at_fork(after_in_child=_close_lifeline_ends)
