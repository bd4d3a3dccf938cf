"""One real Temporal dev server per test process, on a free port (never 7233), and the tiers.

Under pytest-xdist (``-n auto`` in pyproject.toml) every worker process is a session of its
own, so each gets its own server; ports, task queues, workflow ids and temp dirs are unique
per test (``free_port``, ``task_queue``, ``workflow_id``, ``tmp_path``).

Tiers are markers set here from what a test uses, never written on a test:

* ``server``: the test talks to a Temporal dev server: it needs ``dev_server`` (directly or
  through ``client``, ``temporal_target`` or a module's own client fixture), or it is one of
  ``OWN_SERVER`` (it starts a server of its own).
* ``slow``: crash, chaos, load, fuzz and subprocess-heavy tests: every test of a module in
  ``SLOW_MODULES``, and the tests in ``SLOW_TESTS`` (each runs Python subprocesses that
  import the whole stack, a few seconds of CPU apiece).

The inner loop is ``-m "not server and not slow"``; the durable inner loop is
``-m "server and not slow"`` (README, Development).

Hypothesis: the ``ci`` profile (the default) keeps each test's own example count; ``dev``
(``HYPOTHESIS_PROFILE=dev``) runs a tenth of it. Tests that set a count write it as
``examples(n)`` (tests/support/helpers.py), which scales with the profile.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import AsyncIterator, Iterator

import pytest
from hypothesis import settings, strategies
from temporalio.client import Client

from durable_plan.server.devserver import DevServer, DevServerNotFound

# -- Hypothesis profiles -------------------------------------------------------------------

settings.register_profile("ci", max_examples=100)  # Hypothesis' own default: today's counts
settings.register_profile("dev", max_examples=10)  # a tenth of every count (examples(n))
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

# Hypothesis imports its regex module on a test's first ``from_regex``; as a pytest plugin
# its modules are assertion-rewritten, so that import parses source (``ast.parse``) while a
# test's other threads (workers, workflow threads) may be parsing too. CPython 3.11's AST
# constructor counts its recursion in state the threads share (python/cpython#106905,
# fixed in 3.13): a clean-clone run failed once with "AST constructor recursion depth
# mismatch". Imported here, before any thread starts, through the public strategy.
strategies.from_regex("a", fullmatch=True).validate()

# -- tiers -----------------------------------------------------------------------------------

SERVER_FIXTURES = frozenset({"dev_server"})
"""A test whose fixture closure holds one of these uses the session's dev server."""

OWN_SERVER = {
    "tests/cli/test_devserver.py::test_server_exit_during_startup_shows_its_log": "runs the binary",
    "tests/cli/test_devserver.py::test_workflow_survives_server_restart": "two servers, one db",
    "tests/cli/test_devserver.py::test_a_server_restarts_at_once_on_the_same_port_and_db": "two",
    "tests/cli/test_devserver.py::test_cli_dev_stops_cleanly_on_ctrl_c": "`durable-plan dev`",
    "tests/cli/test_cli_run.py::test_run_on_an_embedded_dev_server": "`run` starts its own",
    "tests/cli/test_codec_commands.py::test_dev_server_tells_the_ui_where_the_codec_server_is": "dev",
    "tests/chaos/test_chaos.py": "its own server, restarted",
    "tests/durable/plans/test_routing.py::test_fairness_serves": "a server with task-queue fairness on",
    "tests/durable/replay/test_history_corpus.py": "records this version's corpus on a server of its own",
    "tests/cli/test_cli_replay.py::test_a_recorded_corpus_replays": "records the corpus",
}
"""Tests (or whole modules) that start a Temporal server of their own."""

SLOW_MODULES = {
    "tests/durable/faults/test_crash.py": "crash: worker subprocesses SIGKILLed mid-step",
    "tests/durable/faults/test_mcp_crash.py": "crash: a worker SIGKILLed mid MCP call",
    "tests/chaos/test_chaos.py": "chaos: random kills and a server restart",
    "tests/durable/faults/test_load.py": "load: forty plans at once",
    "tests/unit/run/test_fuzz.py": "fuzz: every case in a forked child",
    "tests/durable/replay/test_replay_hashseed.py": "replay in subprocesses under other hash seeds",
    "tests/durable/faults/test_worker_shutdown.py": "a worker subprocess told to stop",
    "tests/durable/plans/test_mcp.py": "every test starts MCP servers, each a Python subprocess",
    "tests/durable/plans/test_otlp_delivery.py": "traced scripts and a worker, each a Python subprocess",
}

SLOW_TESTS = {
    # One subprocess per command: the entry point, exit codes and streams as users see them.
    "tests/cli/test_cli_files.py::test_the_examples_are_valid_against_their_tools": "validate",
    "tests/cli/test_cli_files.py::test_graph_without_graphviz_says_what_to_do": "graph",
    "tests/cli/test_cli_files.py::test_version_and_validate_import_neither": "a fresh interpreter",
    "tests/cli/test_cli_run.py::test_run_local_prints_the_result_as_json_and_the_ledger": "run",
    "tests/cli/test_cli_run.py::test_an_unreachable_server_exits_3": "run, exit 3",
    "tests/cli/test_devserver.py::test_cli_subprocess_missing_binary_no_traceback": "dev",
    "tests/cli/test_codec_commands.py": "keygen, codec-server and dev as subprocesses",
    # Not a subprocess: PyYAML's scanner is quadratic in flow depth; this file takes ~15 s.
    "tests/cli/test_cli_files.py::test_hostile_files_are_refused_quickly_in_one_line[deep.yaml": "",
    "tests/structure/test_layers.py::test_a_plain_agent_does_not_load_workflow_code": "a fresh interpreter",
    # Scripts and examples run as a user runs them.
    "tests/cli/test_newcomer.py::test_no_server_is_one_line_with_the_fix": "client.py, worker.py",
    "tests/cli/test_newcomer.py::test_client_reads_temporal_address": "client.py",
    "tests/docs/test_readme_examples.py::test_plain_agent_runs_offline": "examples/plain_agent.py",
    "tests/docs/test_readme_examples.py::test_breakpoints_runs_offline": "examples/breakpoints.py",
    "tests/docs/test_readme_examples.py::test_the_plan_pictures_are_the_graph_commands_output": "",
    "tests/benchmarks/test_bench_breakeven.py::test_live_without_credentials_stops_with_one_line": "bench",
    "tests/docs/test_readme_examples.py::test_plans_without_agent_runs": "",
    "tests/docs/test_readme_examples.py::test_large_results_runs": "",
    "tests/docs/test_readme_examples.py::test_watch_a_plan_runs": "",
    "tests/docs/test_readme_examples.py::test_issue_agent_runs_a_plan_over_an_mcp_server": "",
    "tests/cli/test_newcomer.py::test_a_missing_namespace_is_one_line": "worker.py",
    "tests/cli/test_newcomer.py::test_an_unknown_prompt_prints_its_root_cause": "client.py",
    "tests/cli/test_newcomer.py::test_live_without_credentials_prints_its_root_cause": "client.py",
    "tests/cli/test_newcomer.py::test_client_says_when_no_worker_polls": "client.py",
    # The command line on a server, as subprocesses (the rest of those files run in-process).
    "tests/cli/test_cli_run.py::test_run_on_a_server_with_its_own_worker": "run",
    "tests/cli/test_cli_replay.py::test_the_command_as_a_subprocess": "replay",
    "tests/durable/faults/test_versioned_workers.py": "two worker processes, a rolling upgrade",
    "tests/cli/test_cli_server.py::test_show_and_approve_bad_ids_and_no_server": "show, approve",
    "tests/cli/test_cli_server.py::test_worker_serves_plans_started_elsewhere": "worker",
    "tests/durable/plans/test_owner_rules.py::test_the_cli_shows_the_arguments_awaiting_approval": "decide",
    "tests/durable/storage/test_encryption.py::test_the_command_line_encrypts_with_the_keys": "every command",
    "tests/durable/storage/test_encryption.py::test_the_readme_example_runs_with_the_keys_from_keygen": "",
    # Issue 22's defects at the size they were found, and replays in another process.
    "tests/durable/agents/test_conversation_guards.py::test_a_conversation_of_four_large_plans": "29 MB",
    "tests/durable/agents/test_conversation_guards.py::test_a_step_past_the_relay_budget": "four large plans",
    "tests/durable/agents/test_conversation_guards.py::test_a_slow_hook_and_an_agent_step": "replay, subprocess",
    "tests/durable/plans/test_plan_guards.py::test_a_thousand_item_map": "1,000 activities",
    "tests/durable/storage/test_store_scope.py": "sweep-store as a subprocess",
    "tests/durable/replay/test_history_corpus.py": "records the corpus, replays it in another process",
    "tests/cli/test_cli_replay.py::test_a_recorded_corpus_replays": "records the corpus",
    "tests/unit/check/test_return_shapes.py::test_the_rejection_is_the_same_in_every_process": "3 seeds",
    # Crash: a worker subprocess SIGKILLed mid-conversation.
    "tests/durable/plans/test_reuse.py::test_memory_survives_a_worker_kill_between_plans": "crash",
    "tests/durable/agents/test_plugin_temporal.py::test_worker_killed_mid_plan_conversation_completes": "crash",
    "tests/durable/plans/test_events.py::test_a_worker_killed_mid_plan_publishes_nothing_twice": "crash",
    "tests/durable/storage/test_payload_storage.py::test_a_worker_killed_while_storing": "crash",
    "tests/durable/plans/test_routing.py::test_killing_a_tool_worker": "crash: a tool worker SIGKILLed",
    "tests/durable/plans/test_routing.py::test_two_command_line_workers": "two `durable-plan worker`s",
    "tests/durable/plans/test_routing.py::test_fairness_serves": "its own server, 42 calls at 10/s",
}
"""Tests (or whole modules) that run Python subprocesses; ``::name`` matches a prefix."""


def _matches(nodeid: str, table: dict[str, str]) -> bool:
    module, _, name = nodeid.partition("::")
    for key in table:
        key_module, _, key_name = key.partition("::")
        if module == key_module and name.startswith(key_name):
            return True
    return False


LONG_POLES = {
    "tests/durable/agents/test_conversation_guards.py::test_a_conversation_of_four_large_plans_closes[noop]": 60,
    "tests/durable/faults/test_mcp_crash.py::test_kill_worker_mid_mcp_step": 21,
    "tests/durable/agents/test_conversation_guards.py::test_a_step_past_the_relay_budget": 19,
    "tests/chaos/test_chaos.py::test_chaos_loses_nothing": 18,
    "tests/durable/agents/test_plugin_temporal.py::test_worker_killed_mid_plan_conversation_completes": 15,
    "tests/cli/test_cli_files.py::test_hostile_files_are_refused_quickly_in_one_line[deep.yaml": 11,
    "tests/durable/faults/test_crash.py::test_kill_worker_mid_map_reruns_no_finished_item": 10,
    "tests/durable/faults/test_crash.py::test_a_step_interrupted_by_three_kills": 10,
    "tests/durable/faults/test_crash.py::test_kill_worker_mid_agent_loop": 10,
    "tests/durable/faults/test_crash.py::test_kill_worker_mid_step": 10,
    "tests/durable/plans/test_events.py::test_a_worker_killed_mid_plan_publishes_nothing_twice": 10,
    "tests/durable/faults/test_crash.py::test_failover_the_other_worker_finishes_every_plan": 10,
    "tests/unit/run/test_fuzz.py::test_execute_plan_returns_json_or_rejects_without_invoking": 9,
    "tests/unit/run/test_fuzz.py::test_check_plan_returns_or_rejects": 7,
    "tests/durable/agents/test_conversation_guards.py::test_a_slow_hook_and_an_agent_step": 7,
    "tests/cli/test_cli_edges.py::test_show_and_approve_a_plan_no_worker_answers_for": 17,
    "tests/cli/test_cli_edges.py::test_a_closed_pipe_is_not_a_traceback": 13,
    "tests/unit/expressions/test_fast_paths.py::test_plain_paths_evaluate_as_jsonata_does": 12,
    "tests/cli/test_devserver.py::test_a_server_restarts_at_once_on_the_same_port_and_db": 12,
    "tests/cli/test_cli_edges.py::test_run_prints_one_line_for_a_failed_step_quiet_or_not": 10,
    "tests/cli/test_cli_agent_step.py::test_show_and_approve_a_tool_call_inside_an_agent_step": 10,
}
"""Tests that take many seconds (seconds measured on this 2-core machine): started first,
spread over the xdist workers, so the run does not end waiting for one of them."""


WORKERS_PER_CORE = 2
MAX_WORKERS = 8


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto``: two workers per core, at most eight. Most tests wait (on a dev server, a
    worker subprocess, a timeout), so one per core left the cores half idle: on this 2-core
    machine the suite took 4:53 with 2 workers (user+sys 4:44) and 3:11 with 4. Each worker
    starts its own dev server, hence the cap."""
    return max(1, min(WORKERS_PER_CORE * (os.cpu_count() or 1), MAX_WORKERS))


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Markers first (tryfirst), so that ``-m`` selects by them."""
    for item in items:
        nodeid = item.nodeid
        fixtures = set(getattr(item, "fixturenames", ()))
        if fixtures & SERVER_FIXTURES or _matches(nodeid, OWN_SERVER):
            item.add_marker(pytest.mark.server)
        if _matches(nodeid, SLOW_MODULES) or _matches(nodeid, SLOW_TESTS):
            item.add_marker(pytest.mark.slow)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    """The long poles at the head of each xdist worker's share (see `long_poles_first`).

    Runs after ``-m`` has deselected (collection is finished) and before xdist sends the
    ids (tryfirst). Every worker computes the same order from node ids alone, as xdist
    requires of their collections."""
    count = int(getattr(session.config, "workerinput", {}).get("workercount", 1))
    order = long_poles_first([item.nodeid for item in session.items], count)
    session.items[:] = [session.items[i] for i in order]


def long_poles_first(nodeids: list[str], workers: int) -> list[int]:
    """An order of ``nodeids`` (as indices) that starts every long test early.

    ``--dist worksteal`` hands each worker an equal contiguous slice of the collection and
    lets an idle worker steal from the tail of a busy one's; a long test late in a slice
    cannot be stolen early and ends the run late. So the long poles go, longest first, each
    to the least loaded worker, at the head of that worker's slice; the other tests keep
    their order (module-scoped fixtures stay together)."""
    if workers < 2:
        return list(range(len(nodeids)))
    longs = sorted(
        (i for i, nodeid in enumerate(nodeids) if _matches(nodeid, LONG_POLES)),
        key=lambda i: -_long_seconds(nodeids[i]),
    )
    chosen = set(longs)
    rest = [i for i in range(len(nodeids)) if i not in chosen]
    buckets: list[list[int]] = [[] for _ in range(workers)]
    load = [0.0] * workers
    for i in longs:
        j = load.index(min(load))
        buckets[j].append(i)
        load[j] += _long_seconds(nodeids[i])
    ordered: list[int] = []
    remaining = len(nodeids)
    for j, bucket in enumerate(buckets):
        size = remaining // (workers - j)  # the slice xdist hands worker j (worksteal.py)
        fill = max(size - len(bucket), 0)
        ordered += bucket + rest[:fill]
        rest = rest[fill:]
        remaining -= len(bucket) + fill
    return ordered + rest


def _long_seconds(nodeid: str) -> float:
    module, _, name = nodeid.partition("::")
    return max(
        (
            seconds
            for key, seconds in LONG_POLES.items()
            if key.partition("::")[0] == module and name.startswith(key.partition("::")[2])
        ),
        default=0.0,
    )


# -- fixtures --------------------------------------------------------------------------------


def _unique(request: pytest.FixtureRequest, prefix: str) -> str:
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", request.node.name)[:60]
    return f"{prefix}-{name}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="session")
def dev_server() -> Iterator[DevServer]:
    try:
        server = DevServer(headless=True)
    except DevServerNotFound as err:
        pytest.fail(str(err), pytrace=False)
    with server:
        yield server


@pytest.fixture(scope="session")
def temporal_target(dev_server: DevServer) -> str:
    return dev_server.target


@pytest.fixture(scope="session")
async def client(dev_server: DevServer) -> AsyncIterator[Client]:
    yield await dev_server.connect()


@pytest.fixture
def task_queue(request: pytest.FixtureRequest) -> str:
    return _unique(request, "tq")


@pytest.fixture
def workflow_id(request: pytest.FixtureRequest) -> str:
    return _unique(request, "wf")


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    """moto's S3-compatible HTTP server on a free loopback port (the S3 stores' tests)."""
    from moto.server import ThreadedMotoServer

    from durable_plan.server.devserver import free_port

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()
