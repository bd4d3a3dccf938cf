"""bench/breakeven.py counts what it claims: model round trips, tool runs, tokens, correctness.

Runs the benchmark's own harness at depths 1 and 2 with no simulated latency on the session
dev server (real TemporalAgent, real invoke_model activities, the scripted model). Counts
only: no timing is asserted.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest
from temporalio.client import Client

from bench import _breakeven_chain as chain
from bench._tokens import CharsOver4
from bench.breakeven import (
    ARMS,
    Run,
    Setting,
    breakeven_worker,
    connect,
    main,
    parse_args,
    report,
    run_once,
    scripted_models,
    sent_text,
)
from durable_plan.local.runner import execute_plan


@pytest.fixture(scope="module")
async def bench_client(temporal_target: str) -> AsyncIterator[Client]:
    chain.set_tool_latency(0.0)
    yield await connect(temporal_target, scripted_models(0.0))
    chain.set_tool_latency(0.25)


async def _runs(client: Client, task_queue: str) -> dict[tuple[str, int], Run]:
    runs: dict[tuple[str, int], Run] = {}
    async with breakeven_worker(client, task_queue):
        for depth in (1, 2):
            for arm in ARMS.values():
                runs[arm.name, depth] = await run_once(
                    client, task_queue, arm, depth, counter=CharsOver4()
                )
    return runs


async def test_counts_at_depth_one_and_two(bench_client: Client, task_queue: str) -> None:
    runs = await _runs(bench_client, task_queue)
    for depth in (1, 2):
        loop, plan, prose = (runs[arm, depth] for arm in ("loop", "plan", "plan+prose"))
        # A plain loop asks the model once per tool, then for the answer.
        assert loop.round_trips == loop.cycle_count == depth + 1
        # A final plan ends the turn: one model call (the demo's "model round trips: 1").
        assert plan.round_trips == plan.cycle_count == 1
        assert prose.round_trips == prose.cycle_count == 2
        for run in (loop, plan, prose):
            # Every tool of the chain ran exactly once, in order, with the right results.
            assert run.tools_ran == tuple(chain.tool_names(depth)), run
            assert run.correct, run
            assert run.input_tokens > 0
        assert not loop.used_plan and plan.used_plan and prose.used_plan
        last = chain.LINKS[depth - 1].step_id
        assert json.loads(plan.answer) == {last: chain.final_result(depth)}
        assert chain.expected_text(depth) in prose.answer
    # The loop resends the growing conversation at every call: its tokens grow with depth,
    # while the final plan's single call barely changes.
    assert runs["loop", 2].input_tokens > runs["loop", 1].input_tokens
    assert runs["plan", 2].input_tokens - runs["plan", 1].input_tokens < (
        runs["loop", 2].input_tokens - runs["loop", 1].input_tokens
    )


async def test_scripted_plans_are_correct_at_every_depth() -> None:
    """The plan the script submits computes the chain's answer at depths 1-6 (in-process)."""
    before = chain.tool_latency()
    chain.set_tool_latency(0.0)
    try:
        for depth in range(1, chain.MAX_DEPTH + 1):
            plan = chain.chain_plan(depth)
            result = await execute_plan(plan, chain.CHAIN_TOOLS.invoke)
            assert result.ok, result
            assert result.returned == {chain.LINKS[depth - 1].step_id: chain.final_result(depth)}
            assert len(chain.loop_script(depth)) == depth + 1
    finally:
        chain.set_tool_latency(before)


def test_sent_text_counts_system_messages_and_tool_specs() -> None:
    sent = {
        "system_prompt": "be brief",
        "messages": [{"role": "user", "content": [{"text": "hi"}]}],
        "tool_specs": [{"name": "t"}],
    }
    text = sent_text(sent)
    assert "be brief" in text and '"text":"hi"' in text and '"name":"t"' in text
    assert CharsOver4().count("abcde") == 2


def test_report_states_machine_command_and_definitions() -> None:
    arms = [ARMS["loop"], ARMS["plan"]]
    runs = [
        Run("loop", 1, 3.5, 2, 2, 1000, 0, False, ("read_notice_board",), True, "ok"),
        Run("plan", 1, 1.9, 1, 1, 2000, 0, True, ("read_notice_board",), False, "?"),
    ]
    setting = Setting(
        "python -m bench.breakeven --quick", None, 1.5, 0.25, 1, "chars", "v", 0, 0, 1
    )
    text = report(runs, arms, [1], setting)
    assert "`python -m bench.breakeven --quick`" in text
    assert "cores" in text and "Python" in text and "v;" in text
    assert "| 1 | 3.50 | 2 | 1000 | 1.90 | 1 | 2000 | -46%, +100% |" in text
    assert "Not correct (1 of 2 runs)" in text


def test_quick_and_live_options() -> None:
    quick = parse_args(["--quick"])
    assert quick.depths == [1, 2, 3, 6] and quick.repeats == 2 and quick.model_latency == 0.3
    full = parse_args([])
    assert full.depths == [1, 2, 3, 4, 5, 6] and full.model_latency == 1.5
    with pytest.raises(SystemExit):
        parse_args(["--live"])  # needs --model


def test_live_without_credentials_stops_with_one_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: object
) -> None:
    for name in (
        "AWS_PROFILE",
        "AWS_DEFAULT_PROFILE",
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", f"{tmp_path}/none")
    monkeypatch.setenv("AWS_CONFIG_FILE", f"{tmp_path}/none")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # never ask a metadata endpoint
    with pytest.raises(SystemExit) as stopped:
        main(["--live", "--model", "some.model"])
    message = str(stopped.value.code)
    assert "\n" not in message and "--live needs AWS credentials" in message
