"""``bench.instructions``: the count it reads from valgrind, and the replay it counts."""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.client import Client

from bench.instructions import collected, load, replay_counted, save
from bench.replay_cost import ARMS, record
from bench.throughput import STEPS

VALGRIND_TAIL = """==4242== Events    : Ir
==4242== Collected : 828807376
==4242==
==4242== I   refs:      828,807,376
"""


def test_the_count_is_read_from_what_valgrind_prints() -> None:
    assert collected(VALGRIND_TAIL) == 828_807_376
    assert collected("==1== Callgrind, a call-graph generating cache profiler\n") is None


async def test_saved_histories_replay_as_the_counted_process_replays_them(
    client: Client, tmp_path: Path
) -> None:
    """Outside valgrind the switches do nothing; the replay must still pass (a history
    that no longer replays would be counted as a failure, not as fewer instructions)."""
    path = tmp_path / "histories.json"
    save(await record(client, 4), path)
    for arm in ARMS:
        assert len(load(path, arm)) == 4
        assert await replay_counted(path, arm) == 4 * STEPS


async def test_the_worker_count_says_what_it_needs_without_valgrind(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Without valgrind on the PATH: exit 2 and the package to install, before any server
    or worker starts."""
    from bench.worker_instructions import main, parse_args

    monkeypatch.setenv("PATH", str(tmp_path))  # an empty directory: no valgrind there
    assert await main(parse_args([])) == 2
    err = capsys.readouterr().err
    assert "needs valgrind and callgrind_control" in err and "apt install valgrind" in err
