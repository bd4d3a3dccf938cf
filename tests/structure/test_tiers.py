"""The tier tables in conftest.py name tests that exist, and the markers land where they say.

A renamed test would silently drop out of its tier (a subprocess test back in the inner
loop); these checks read the test files instead of collecting the suite.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests import conftest

ROOT = Path(__file__).resolve().parents[2]
TABLES = {
    "OWN_SERVER": conftest.OWN_SERVER,
    "SLOW_MODULES": conftest.SLOW_MODULES,
    "SLOW_TESTS": conftest.SLOW_TESTS,
    "LONG_POLES": conftest.LONG_POLES,
}


@pytest.mark.parametrize("table", sorted(TABLES))
def test_every_entry_names_an_existing_module_and_test(table: str) -> None:
    for key in TABLES[table]:
        module, _, name = key.partition("::")
        path = ROOT / module
        assert path.is_file(), f"{table}: {key}: no file {module}"
        if name:
            defined = re.findall(r"^(?:async )?def (test_\w+)", path.read_text(), re.M)
            function = name.partition("[")[0]  # a parametrized case names its function
            assert any(test.startswith(function) for test in defined), f"{table}: {key}: no test"


def test_a_prefix_matches_parametrized_ids_and_only_its_module() -> None:
    table = {"tests/test_a.py::test_run": ""}
    assert conftest._matches("tests/test_a.py::test_run_local[x-1]", table)
    assert not conftest._matches("tests/test_b.py::test_run_local", table)
    assert not conftest._matches("tests/test_a.py::test_walk", table)
    assert conftest._matches("tests/test_a.py::test_walk", {"tests/test_a.py": ""})


def test_the_markers_follow_the_fixtures(request: pytest.FixtureRequest) -> None:
    """This test uses no server and runs no subprocess: it is in the inner loop."""
    assert request.node.get_closest_marker("server") is None
    assert request.node.get_closest_marker("slow") is None


def test_a_test_that_needs_the_dev_server_is_marked_server(
    request: pytest.FixtureRequest, temporal_target: str
) -> None:
    assert request.node.get_closest_marker("server") is not None
    assert temporal_target.startswith("127.0.0.1:")


def test_the_long_poles_start_at_the_head_of_each_workers_share() -> None:
    """xdist's worksteal gives worker j the j-th contiguous slice; each long test must be
    among the first of a slice, the longest spread over the workers, nothing lost."""
    longs = list(conftest.LONG_POLES)
    nodeids = [f"tests/test_x.py::test_{i}" for i in range(40)]
    nodeids[5:5] = longs[::2]
    nodeids += longs[1::2]
    for workers in (1, 2, 3):
        order = conftest.long_poles_first(nodeids, workers)
        assert sorted(order) == list(range(len(nodeids)))  # a permutation
        if workers == 1:
            assert order == list(range(len(nodeids)))
            continue
        ordered = [nodeids[i] for i in order]
        slices, start, remaining = [], 0, len(ordered)
        for j in range(workers):
            size = remaining // (workers - j)
            slices.append(ordered[start : start + size])
            start, remaining = start + size, remaining - size
        heads = [[n for n in part if conftest._matches(n, conftest.LONG_POLES)] for part in slices]
        for part, head in zip(slices, heads, strict=True):
            assert part[: len(head)] == head  # the long ones lead their slice
        assert {heads[j][0] for j in range(workers)} >= {longs[0]}  # the longest leads one
        loads = [sum(conftest._long_seconds(n) for n in head) for head in heads]
        assert max(loads) - min(loads) <= max(conftest.LONG_POLES.values())
        rest = [n for n in ordered if not conftest._matches(n, conftest.LONG_POLES)]
        assert rest == [n for n in nodeids if not conftest._matches(n, conftest.LONG_POLES)]
