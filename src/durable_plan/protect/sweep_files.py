"""The file steps of a retention sweep, shared by the result store's and the payload
store's sweeps (``result_store.py``, ``payload_storage.py``).

Kept in one module because both stores keep files on disk that a sweep deletes by age
while writers and readers may be at work: one lock per directory, a file held (renamed)
while its age is read again, and a held file a killed sweep left put back. Written once,
so the two sweeps cannot drift apart.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

try:
    import fcntl
except ImportError:  # not POSIX (Windows): sweeps run unlocked, the grace period holds
    fcntl = None  # type: ignore[assignment]

IsRunning = Callable[[str, "str | None"], bool]
"""``(workflow id, first run id of its chain or None) -> still running?`` for a sweep. A
sweep asks it right before it deletes a plan's objects, so it should ask the server then
(``durable-plan sweep-store`` does), not answer from a list taken before the walk."""
Report = Callable[[str], None]
"""Told where each object a sweep deletes (or, ``dry_run``, would delete) is."""

# -- The file steps of a sweep, shared with the payload store's (payload_storage.py). ---------

HELD = ".sweep-"
"""The name prefix a sweep gives a file while it reads its age again (`remove_if_old`)."""
HELD_GRACE_S = 600.0
"""How long a held file is left alone by other sweeps (by its ``st_ctime``, which the rename
set): a sweep holds a file for a ``stat``, so one held longer was left by a killed sweep
(`put_back_abandoned`)."""


class SweepRunning(RuntimeError):
    """Another sweep of the same directory holds its lock (`sweep_lock`)."""


@contextlib.contextmanager
def sweep_lock(root: Path) -> Iterator[None]:
    """One sweep at a time per directory (``flock`` on the directory itself, not waiting:
    no lock file is left in the store): a second sweep would take the first one's held
    files for a killed sweep's, and the first would then find nothing to put back. A second
    sweep raises `SweepRunning`. Where directories cannot be locked (some network file
    systems) the sweep runs unlocked; the held files' grace period still keeps it off a
    live sweep's files."""
    try:
        fd = os.open(root, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:  # a directory that cannot be opened (Windows): unlocked, as above
        yield
        return
    try:
        try:
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise SweepRunning(
                f"another sweep of {root} is running: let it finish, then run this one "
                "again if needed"
            ) from None
        except OSError:
            pass  # no locks here (see above)
        yield
    finally:
        os.close(fd)  # releases the lock


def file_mtime(path: Path) -> float:
    """When the file was last written (or touched); infinity when it is gone (nothing to
    delete)."""
    try:
        return path.stat().st_mtime
    except FileNotFoundError:
        return float("inf")


def read_file(path: Path) -> bytes | None:
    """The file's bytes, or None when it is not there. While a sweep holds it (renamed to
    ``.sweep-<name>``), the held file's bytes: the same ones (a sweep renames, never
    writes; callers with a digest still check it), and a killed sweep's held file stays
    readable. Not held either: the sweep may have put it back between the two reads, so
    its own name once more before None."""
    held = path.with_name(HELD + path.name)
    for candidate in (path, held, path):
        try:
            return candidate.read_bytes()
        except FileNotFoundError:
            continue
    return None


def remove_if_old(path: Path, cutoff: float) -> bool:
    """Delete ``path`` unless it was written or touched after ``cutoff``; True if deleted.
    It is renamed aside first, then its age read again: a writer that touches or rewrites
    it before the rename is seen (the file is put back), one after finds the name free and
    writes a new file (which stays), so nothing written after the decision is lost."""
    held = path.with_name(HELD + path.name)
    try:
        os.rename(path, held)
    except FileNotFoundError:
        return False
    if file_mtime(held) > cutoff:
        put_back(held, path)
        return False
    held.unlink(missing_ok=True)
    return True


def put_back(held: Path, path: Path) -> None:
    """``held`` under its own name again, unless a file was written under that name since
    (the newer stays, ``held`` is dropped) or ``held`` is gone (nothing to put back)."""
    try:
        os.link(held, path)
    except FileExistsError:
        pass
    except FileNotFoundError:
        return
    except OSError:  # a file system without hard links: a rename (may replace a newer one)
        with contextlib.suppress(FileNotFoundError):
            os.replace(held, path)
        return
    held.unlink(missing_ok=True)


def put_back_abandoned(held: Path) -> Path | None:
    """A held file a killed sweep left (held longer than `HELD_GRACE_S`): under its own
    name again, which is returned, so this sweep judges it like any file (its owner asked)
    instead of deleting it unasked. None while younger: a sweep that does not share the
    lock (another machine on a shared volume) may still be deciding about it."""
    try:
        changed = held.stat().st_ctime
    except FileNotFoundError:
        return None
    if changed > time.time() - HELD_GRACE_S:
        return None
    path = held.with_name(held.name.removeprefix(HELD))
    put_back(held, path)
    return path


def sweepable_files(top: Path, *, put_back_held: bool) -> list[Path]:
    """The files under ``top`` a sweep looks at: with ``put_back_held`` (not a dry run),
    a killed sweep's held files are put back first and listed under their own names, and
    those still in their grace period are left out."""
    found: dict[Path, None] = {}
    for path in list(top.rglob("*")):
        if not path.is_file():
            continue
        if put_back_held and path.name.startswith(HELD):
            back = put_back_abandoned(path)
            if back is None:
                continue
            path = back
        found[path] = None
    return list(found)
