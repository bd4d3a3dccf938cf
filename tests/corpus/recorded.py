"""This version's corpus of histories, recorded by the tests from the current code.

No release has been published, so no release corpus is kept in ``tests/histories``: the
replay tests record one with ``python -m scripts.record_histories`` (its own dev server,
worker subprocesses, the scripted model) in another process, under another hash seed than
the process that replays it, once per test session. A published release adds its corpus
under ``tests/histories/<version>/`` (the same script), and the tests replay it too.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
RELEASES = ROOT / "tests" / "histories"
RECORD_SEED = "1"
"""``PYTHONHASHSEED`` of the recording process (every replaying process uses another)."""
RECORD_TIMEOUT_S = 300


def record_corpus(base: Path) -> Path:
    """The corpus recorded under ``base`` (a session's temporary directory): recorded on
    first use, then reused by every test of the session."""
    out = base / "recorded-corpus"
    if (out / "manifest.json").is_file():
        return out
    done = subprocess.run(
        [sys.executable, "-m", "scripts.record_histories", "--out", str(out)],
        cwd=ROOT,
        env={**os.environ, "PYTHONHASHSEED": RECORD_SEED},
        capture_output=True,
        text=True,
        timeout=RECORD_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, f"recording the corpus failed:\n{done.stdout}\n{done.stderr}"
    return out


def released_corpora() -> list[Path]:
    """Each published release's corpus (none yet)."""
    if not RELEASES.is_dir():
        return []
    return sorted(p for p in RELEASES.iterdir() if (p / "manifest.json").is_file())


def entries(corpus: Path) -> dict[str, dict[str, object]]:
    """The corpus's manifest: each history's name and what replaying it needs."""
    histories: dict[str, dict[str, object]] = json.loads((corpus / "manifest.json").read_text())[
        "histories"
    ]
    return histories
