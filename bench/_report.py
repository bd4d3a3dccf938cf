"""What every bench prints around its numbers: the exact command, the machine it ran on, and
Markdown tables, so a figure pasted into the README or an issue says how to reproduce it."""

from __future__ import annotations

import os
import platform
import shlex
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path


def command_line(module: str, argv: Sequence[str] | None = None) -> str:
    """``python -m bench.<name> <args>`` as the user would type it again."""
    args = list(sys.argv[1:] if argv is None else argv)
    return " ".join(["python -m", module, *(shlex.quote(a) for a in args)])


def server_version(binary: Path | str | None) -> str:
    """``temporal --version`` of the dev server binary (CLI, server and UI versions)."""
    if binary is None:
        return "no Temporal server"
    try:
        out = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return "temporal version unknown"
    return out.stdout.strip() or "temporal version unknown"


def machine_line(load_start: float, server: str = "", *, extra: str = "") -> str:
    """``machine: 2 cores, load 1.2 at start / 1.9 at end, Python 3.11.7, <server>; <extra>``."""
    parts = [
        f"machine: {os.cpu_count()} cores, load {load_start:.1f} at start / "
        f"{os.getloadavg()[0]:.1f} at end, Python {platform.python_version()}"
    ]
    if server:
        parts.append(server)
    text = ", ".join(parts)
    return f"{text}; {extra}" if extra else text


def markdown_table(
    header: Sequence[str], rows: Sequence[Sequence[object]], *, digits: int = 1
) -> str:
    """A Markdown table; floats get ``digits`` decimals, numbers are right-aligned."""

    def cell(value: object) -> str:
        return f"{value:.{digits}f}" if isinstance(value, float) else str(value)

    numeric = [
        bool(rows) and all(isinstance(r[i], int | float) for r in rows) for i in range(len(header))
    ]
    lines = [
        "| " + " | ".join(header) + " |",
        "| " + " | ".join("---:" if n else "---" for n in numeric) + " |",
    ]
    lines += ["| " + " | ".join(cell(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def key_value_table(lines: Sequence[str]) -> str:
    """A harness report's ``label    value`` lines (two or more spaces apart) as a table."""
    rows: list[list[object]] = []
    for line in lines:
        label, _, value = line.strip().partition("  ")
        rows.append([label, value.strip()])
    return markdown_table(["", "value"], rows)
