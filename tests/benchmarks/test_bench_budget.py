"""``bench.budget``: the parts it takes out of a replaying process leave every recorded
history replaying (a part whose removal changed a command would be counted as a failure,
not as instructions saved), and its table's arithmetic."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from temporalio.client import Client

from bench._knockouts import PARTS, take_out
from bench.budget import rows
from bench.instructions import save
from bench.replay_cost import record
from bench.throughput import STEPS

ROOT = Path(__file__).resolve().parents[2]


async def test_histories_replay_with_each_part_and_all_parts_taken_out(
    client: Client, tmp_path: Path
) -> None:
    """In processes of their own, as the bench runs them (the patches are process-wide)."""
    path = tmp_path / "histories.json"
    save(await record(client, 4), path)
    runs: list[tuple[str, tuple[str, ...]]] = [
        *(("plan-l", (part,)) for part in PARTS),
        ("plan", PARTS),
    ]
    for arm, parts in runs:
        proc = subprocess.run(
            [
                *(sys.executable, "-m", "bench.instructions", "--replay", arm),
                *("--histories", str(path)),
                *(f"--without={part}" for part in parts),
            ],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=120,
            check=False,
        )
        assert proc.returncode == 0, (parts, arm, proc.stderr[-2000:])
        assert f"STEPS {4 * STEPS}" in proc.stdout, (parts, arm)


def test_an_unknown_part_is_named_with_the_parts_there_are() -> None:
    with pytest.raises(ValueError, match="no part 'checks' to take out; parts: check, events"):
        take_out(["checks"])


def test_each_removal_is_its_saving_and_its_share_of_the_extra() -> None:
    table = rows(1_000.0, 600.0, {("check",): 900.0, ("events",): 950.0, PARTS: 700.0})
    assert table == [
        ("the check of the sent plan", 100.0, 0.25),
        ("the step events", 50.0, 0.125),
        ("all of them", 300.0, 0.75),
    ]


async def test_the_budget_says_what_it_needs_without_valgrind(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from bench.budget import main, parse_args

    monkeypatch.setenv("PATH", str(tmp_path))  # an empty directory: no valgrind there
    assert await main(parse_args([])) == 2
    assert "bench.budget needs valgrind" in capsys.readouterr().err


def test_a_part_renamed_in_the_package_fails_the_bench() -> None:
    """A patch of a name the package no longer has would count a removal of nothing."""
    from bench._knockouts import _replace

    class Owner:
        def there(self) -> None: ...

    with pytest.raises(AttributeError, match="no 'gone' to replace"):
        _replace(Owner, "gone", lambda self: None)
    _replace(Owner, "there", lambda self: None)
