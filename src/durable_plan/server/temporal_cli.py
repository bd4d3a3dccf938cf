"""Finding the pinned ``temporal`` binary the dev server runs, or saying how to install it.

Apart from the server process (``devserver.py``) because other commands ask it too
(``connection.py`` looks for it before offering to start a server): a path the user named
is authoritative, else this interpreter's venv, else ``PATH``; a miss is one line naming
the fix.
"""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path

INSTALL_HINT = "pip install 'durable-plan[server]'"


class DevServerNotFound(RuntimeError):
    """The server binary is missing; the message is one line that says how to install it."""


def _venv_candidates(name: str) -> Iterator[Path]:
    # Not resolved: a venv's python is often a symlink to the system one, whose bin dir is not
    # where pip put the console scripts.
    yield Path(sys.executable).parent / name
    yield Path(sysconfig.get_path("scripts")) / name


def _is_executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def _find(name: str, env_var: str, explicit: str | Path | None) -> Path | None:
    # A path the user named (argument or env var) is authoritative: silently running some other
    # binary instead would hide their mistake.
    chosen = explicit if explicit is not None else os.environ.get(env_var) or None
    if chosen is not None:
        path = Path(chosen).expanduser()
        return path if _is_executable(path) else None
    for candidate in _venv_candidates(name):
        if _is_executable(candidate):
            return candidate
    found = shutil.which(name)
    return Path(found) if found else None


def find_temporal_cli(explicit: str | Path | None = None) -> Path | None:
    """Explicit path, else $TEMPORAL_CLI, else this interpreter's venv, else PATH."""
    return _find("temporal", "TEMPORAL_CLI", explicit)


def _not_found(name: str, env_var: str, explicit: str | Path | None) -> DevServerNotFound:
    env_value = os.environ.get(env_var) or None
    fix = f"install it with: {INSTALL_HINT}"
    if explicit is not None:
        return DevServerNotFound(
            f"No {name} binary at {explicit} (the path you gave); {fix} "
            f"or give the path of an existing {name} executable."
        )
    if env_value is not None:
        return DevServerNotFound(
            f"No {name} binary at {env_value} (from ${env_var}); {fix} "
            f"or set {env_var} to an existing {name} executable."
        )
    venv = Path(sys.executable).parent
    return DevServerNotFound(
        f"No {name} binary found (looked at ${env_var}, {venv}/{name} and PATH); "
        f"{fix}  (or set {env_var}=/path/to/{name}; with internet access the Temporal SDK "
        "can also download one: temporalio.testing.WorkflowEnvironment.start_local())."
    )


def require_temporal_cli(explicit: str | Path | None = None) -> Path:
    """Like `find_temporal_cli`, but a miss raises `DevServerNotFound` with the fix."""
    path = find_temporal_cli(explicit)
    if path is None:
        raise _not_found("temporal", "TEMPORAL_CLI", explicit)
    return path
