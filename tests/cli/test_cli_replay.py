"""`durable-plan replay`: what a user runs before deploying an upgrade.

Histories come from files (a release's corpus directory, ``temporal workflow show`` output)
or from the server (``--workflow-id``, ``--query``). One line per workflow; exit 0 only when
every one replays, 1 when one does not (naming the first event that diverges), 2 for input
the command cannot use, before it replays anything. In this process (``arun_cli``) except the
one subprocess test of the command. The histories are recorded from the current code: a
plan on the session's dev server, and the whole corpus (``tests/corpus/recorded.py``).
"""

from __future__ import annotations

import asyncio
import json
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from durable_plan import plan_worker, start_plan
from durable_plan.tools.registry import ToolRegistry
from tests.corpus.recorded import entries, record_corpus
from tests.support.helpers import arun_cli, cli_subprocess, finish, run_cli, spawn_cli

ROOT = Path(__file__).resolve().parents[2]
USER_WORKFLOWS = ("--workflows", "tests.corpus.workflows")


def lookup(name: str) -> dict[str, Any]:
    """Find a monster. Returns {"name": str}."""
    return {"name": name}


CHAIN = {
    "steps": [
        {"id": "a", "tool": "lookup", "args": {"name": "goblin"}},
        {"id": "b", "tool": "lookup", "bind": {"name": "steps.a.name"}},
    ]
}


@pytest.fixture
async def chain(client: Client, task_queue: str, workflow_id: str, tmp_path: Path) -> Path:
    """A plan recorded on the dev server by this version, as ``plan_chain.json``."""
    tools = ToolRegistry([lookup])
    async with plan_worker(client, task_queue=task_queue, registry=tools):
        handle = await start_plan(
            client, CHAIN, task_queue=task_queue, registry=tools, workflow_id=workflow_id
        )
        await asyncio.wait_for(handle.result(), 30)
    path = tmp_path / "plan_chain.json"
    path.write_text((await handle.handle.fetch_history()).to_json())
    return path


@pytest.fixture
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This version's whole corpus, recorded in another process (once per session)."""
    return record_corpus(tmp_path_factory.getbasetemp())


def started_only(path: Path, workflow_type: str) -> Path:
    """A history of one event, a workflow of ``workflow_type`` started: enough for what the
    command decides before it replays anything."""
    event = {
        "eventId": "1",
        "eventTime": "2026-01-01T00:00:00Z",
        "eventType": "EVENT_TYPE_WORKFLOW_EXECUTION_STARTED",
        "workflowExecutionStartedEventAttributes": {
            "workflowType": {"name": workflow_type},
            "taskQueue": {"name": "q"},
        },
    }
    path.write_text(json.dumps({"events": [event]}))
    return path


def diverged_copy(tmp_path: Path, source: Path) -> Path:
    """A recorded plan whose first tool activity has another name, as if the new version
    scheduled a different activity at that point: a nondeterminism error on replay."""
    name = source.stem
    history = json.loads(source.read_text())
    for event in history["events"]:
        scheduled = event.get("activityTaskScheduledEventAttributes")
        if scheduled:
            scheduled["activityType"]["name"] = "renamed_tool"
            break
    path = tmp_path / f"{name}_diverged.json"
    path.write_text(json.dumps(history))
    return path


def test_a_recorded_corpus_replays_line_by_line_and_exits_0(corpus: Path) -> None:
    keys = (corpus / "keys.txt").read_text().strip()
    names = sorted(entries(corpus))
    done = run_cli(
        "replay", str(corpus), *USER_WORKFLOWS, "--no-encrypt", env={"DURABLE_PLAN_KEYS": None}
    )
    lines = done.stdout.splitlines()
    sealed = [line for line in lines if "plan_encrypted" in line]
    # Without the keys only the sealed plan fails, and the line says what to do.
    assert done.returncode == 1, done.stderr
    assert [line.split()[1] for line in lines] == [f"{corpus.name}/{name}" for name in names]
    assert sealed and sealed[0].startswith("FAIL") and "DURABLE_PLAN_KEYS" in sealed[0]
    assert sum(line.startswith("ok ") for line in lines) == len(lines) - 1

    done = run_cli("replay", str(corpus), *USER_WORKFLOWS, env={"DURABLE_PLAN_KEYS": keys})
    assert done.returncode == 0, done.stdout + done.stderr
    assert all(line.startswith("ok ") for line in done.stdout.splitlines())
    assert f"{len(names)} histories" in done.stderr and "all replay" in done.stderr


def test_a_history_that_diverges_names_its_first_diverging_event(
    tmp_path: Path, chain: Path
) -> None:
    diverged = diverged_copy(tmp_path, chain)
    done = run_cli("replay", str(diverged), str(chain))
    assert done.returncode == 1
    bad, good = done.stdout.splitlines()
    assert bad.startswith("FAIL  plan_chain_diverged  PlanWorkflow")
    # The activity's ScheduleActivityTask command is where the two versions part.
    assert "event 5 (ActivityTaskScheduled)" in bad
    assert "renamed_tool" in bad and "lookup" in bad
    assert "Failure {" not in bad  # the one sentence, not core's debug dump
    assert good.startswith("ok    plan_chain  PlanWorkflow")
    assert "Traceback" not in done.stderr and "WARN" not in done.stderr


def test_a_workflow_type_not_given_is_named_with_the_fix(tmp_path: Path) -> None:
    conversation = started_only(tmp_path / "conversation_plain.json", "CorpusConversation")
    done = run_cli("replay", str(conversation))
    assert done.returncode == 1
    [line] = done.stdout.splitlines()
    assert "'CorpusConversation' is not among the workflows given" in line
    assert "--workflows MODULE:CLASS" in line


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ([], "name history files or directories, --workflow-id ID or --query QUERY"),
        (["nowhere/at/all.json"], "no history file or directory 'nowhere/at/all.json'"),
        (["{bad}"], "is not a workflow history in JSON"),
        (["{empty}"], "has no events"),
        (["{dir}"], "no .json histories in"),
        (["{good}", "--workflows", "no_such_module"], "cannot import tools module"),
        (["{good}", "--workflows", "json:dumps"], "'dumps' is not a @workflow.defn class"),
        (["{good}", "--workflows", "json"], "the module defines no workflow class"),
        (["{good}", "--limit", "0"], "--limit must be at least 1"),
        (["{manifest}"], "is not a corpus manifest"),
        (["{good}", "--workflows", "tests/corpus/workflows.py"], "name the module, not its file"),
        (["{huge}"], "more than any history Temporal keeps"),
    ],
)
def test_input_it_cannot_use_exits_2_in_one_line(
    args: list[str], expected: str, tmp_path: Path
) -> None:
    (tmp_path / "bad.json").write_text('{"not": "a history"}')
    (tmp_path / "empty.json").write_text('{"events": []}')
    (tmp_path / "dir").mkdir()
    (tmp_path / "corpus").mkdir()
    (tmp_path / "corpus" / "manifest.json").write_text('{"histories": ["a list"]}')
    with (tmp_path / "huge.json").open("wb") as huge:  # sparse: no disk is written
        huge.truncate(257 * 1024 * 1024)
    paths = {
        "{bad}": tmp_path / "bad.json",
        "{empty}": tmp_path / "empty.json",
        "{dir}": tmp_path / "dir",
        "{good}": started_only(tmp_path / "plan_chain.json", "PlanWorkflow"),
        "{manifest}": tmp_path / "corpus",
        "{huge}": tmp_path / "huge.json",
    }
    done = run_cli("replay", *(str(paths.get(arg, arg)) for arg in args))
    assert done.returncode == 2, (done.stdout, done.stderr)
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("durable-plan: error: replay: ") and expected in line, line
    assert done.stdout == ""


async def test_histories_straight_from_the_server(
    client: Client, temporal_target: str, workflow_id: str, chain: Path
) -> None:
    """A plan run on the dev server replays by id and by a visibility query; an unknown id
    and a query the server refuses are bad input."""
    address = ("--address", temporal_target)
    workflow_id = f"{workflow_id}-run"  # the fixture's plan has the test's own id
    ran = await arun_cli(
        "run", str(ROOT / "examples" / "plans" / "party_round.yaml"),
        "--tools", "examples.plan_tools", "--workflow-id", workflow_id, "--quiet", *address,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr

    done = await arun_cli("replay", "--workflow-id", workflow_id, *address)
    assert done.returncode == 0, done.stdout + done.stderr
    [line] = done.stdout.splitlines()
    assert line.startswith(f"ok    {workflow_id}  PlanWorkflow {workflow_id}")

    query = f'WorkflowId="{workflow_id}"'
    done = await arun_cli("replay", "--query", query, str(chain), *address)
    assert done.returncode == 0, done.stdout + done.stderr
    assert [line.split()[1] for line in done.stdout.splitlines()] == ["plan_chain", workflow_id]

    done = await arun_cli("replay", "--workflow-id", f"{workflow_id}-nope", *address)
    assert done.returncode == 2
    assert f"no workflow '{workflow_id}-nope' on the server" in done.stderr

    done = await arun_cli("replay", "--query", "WorkflowId=", *address)
    assert done.returncode == 2 and "the server refuses --query" in done.stderr

    done = await arun_cli("replay", "--query", 'WorkflowId="none-such-plan"', *address)
    assert done.returncode == 2 and "no workflow matches" in done.stderr


def test_the_command_as_a_subprocess(tmp_path: Path, chain: Path) -> None:
    """The console script, as a user runs it before a deploy."""
    done = cli_subprocess("replay", str(chain), str(diverged_copy(tmp_path, chain)))
    assert done.returncode == 1, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 2
    assert [line for line in lines if line.startswith("FAIL")] == [
        line for line in lines if "plan_chain_diverged" in line
    ]
    assert "1 do not replay" in done.stderr


async def test_a_plan_started_with_a_delay_replays_at_once(
    client: Client, temporal_target: str, workflow_id: str, task_queue: str
) -> None:
    """A plan started with ``start_delay`` has no workflow task yet: nothing to replay, and the
    pre-deploy check the README recommends (every running workflow) answers at once, exit 0.
    As a subprocess with a deadline of its own: before the fix the command never answered."""
    plan = {"steps": [{"id": "u", "tool": "lookup", "args": {"name": "ana"}}]}
    handle = await start_plan(
        client, plan, task_queue=task_queue, registry=ToolRegistry([lookup]),
        workflow_id=workflow_id, start_options={"start_delay": timedelta(hours=1)},
        if_no_worker="ignore",
    )  # fmt: skip
    try:
        # Running, and only this one: other tests' running workflows are not this test's.
        query = f'ExecutionStatus="Running" AND WorkflowId="{workflow_id}"'
        async with asyncio.timeout(30):
            while not [w async for w in client.list_workflows(query)]:
                await asyncio.sleep(0.1)
        proc = await spawn_cli("replay", "--query", query, "--address", temporal_target)
        try:
            code, out, err = await finish(proc, timeout=60)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            pytest.fail("durable-plan replay did not answer within 60 s")
        assert code == 0, out + err
        [line] = out.splitlines()
        assert line.startswith(f"ok    {workflow_id}  PlanWorkflow {workflow_id}"), line
        assert "no workflow task yet" in line, line
        assert "1 history on durable-plan" in err and "all replay" in err, err
    finally:
        await handle.handle.terminate("test over")


def test_the_command_answers_within_its_timeout(chain: Path) -> None:
    """Past ``--timeout`` the command stops with one line saying so (and how to give more
    time), exit 1: a pre-deploy check that cannot say "all replay" must not pass."""
    done = run_cli("replay", str(chain), "--timeout", "0.001")
    assert done.returncode == 1, done.stdout + done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("durable-plan: error: replay: no answer within 0.001 s"), last
    assert "--timeout" in last and "still replaying" in last, last


def test_a_replay_that_never_ends_is_still_bounded() -> None:
    """The SDK's replayer cannot be cancelled while it waits for a workflow task that never
    comes (its clean-up awaits the same task), so the bound cannot be asyncio's alone: a
    replay whose cancellation never finishes still gives an answer at the deadline."""
    from durable_plan.temporal.client.replay import ReplayTimedOut, bounded_in_thread

    held: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []

    async def stuck(tell: Any) -> None:
        tell("first")
        never = asyncio.Event()
        held.append((asyncio.get_running_loop(), never))
        try:
            await never.wait()
        finally:  # as the replayer's clean-up does: wait for what never comes
            await never.wait()

    async def main() -> None:
        with pytest.raises(ReplayTimedOut) as caught:
            await bounded_in_thread(stuck, 0.5)
        assert caught.value.answered == ["first"]

    started = time.monotonic()
    asyncio.run(asyncio.wait_for(main(), 10))
    assert time.monotonic() - started < 5
    [(loop, never)] = held
    loop.call_soon_threadsafe(never.set)  # the thread left behind ends with the test
