"""The command line's edges, as a person meets them: each mistake is one line on stderr with
its exit code (2 bad input, 3 no server), never a traceback or a hang; and the docs'
quoted `validate` output is what the command prints.

Run as subprocesses (what a person sees is the point); the few that need a server use the
session's dev server.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from temporalio.client import Client

from durable_plan.server.devserver import DevServer

ROOT = Path(__file__).resolve().parents[2]
PLANS = ROOT / "examples" / "plans"
TRIAGE = str(PLANS / "triage.yaml")
TOOLS = ("--tools", "examples.plan_tools")
CLI_GUIDE = (ROOT / "docs" / "guides" / "cli.md").read_text(encoding="utf-8")


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "durable_plan", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, **(env or {})},
    )


async def acli(*args: str) -> tuple[int, str, str]:
    """`cli` without blocking the event loop the session's dev server fixture lives on."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "durable_plan",
        *args,
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    return proc.returncode if proc.returncode is not None else -1, out.decode(), err.decode()


def one_line(stderr: str) -> str:
    """The single line of stderr (and no traceback, no Python warning)."""
    assert "Traceback" not in stderr and "Warning" not in stderr, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    return lines[0]


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


# --- graph, validate: files -----------------------------------------------------------------


def test_graph_into_a_missing_directory_or_onto_a_directory_is_one_line(tmp_path: Path) -> None:
    done = cli("graph", TRIAGE, "-o", "/nonexistent/x.mmd")
    assert done.returncode == 2
    assert one_line(done.stderr) == (
        "durable-plan: error: cannot write /nonexistent/x.mmd: there is no directory "
        "'/nonexistent'; create it or pass another -o"
    )
    folder = tmp_path / "taken.mmd"
    folder.mkdir()
    done = cli("graph", TRIAGE, "-o", str(folder))
    assert done.returncode == 2
    assert one_line(done.stderr) == (
        f"durable-plan: error: cannot write {folder}: Is a directory; pass another -o"
    )


UNRESOLVED_REF = """\
inputs:
  type: object
  properties:
    name: {"$ref": "#/definitions/nope"}
steps:
  - id: s
    tool: look_up_monster
    args: {name: goblin}
"""
SELF_REF = """\
inputs: {"$ref": "#"}
steps:
  - id: s
    tool: look_up_monster
    args: {name: goblin}
"""


@pytest.mark.parametrize(
    ("text", "words"),
    [
        (UNRESOLVED_REF, "$ref '#/definitions/nope' at properties/name does not resolve"),
        (SELF_REF, "the schema's references loop without reaching a value: # -> #"),
    ],
)
def test_an_input_schema_whose_refs_do_not_resolve_is_one_line_for_validate_and_run(
    tmp_path: Path, text: str, words: str
) -> None:
    """It was OK for validate and a RecursionError (2,000 lines) for run."""
    path = write(tmp_path, "refs.yaml", text)
    done = cli("validate", path, *TOOLS)
    assert done.returncode == 1, done.stdout + done.stderr
    problem, summary = done.stdout.splitlines()
    assert problem.startswith(f"{path}:1: inputs is not a valid JSON Schema here: ")
    assert words in problem and summary == "1 problem in 1 of 1 files"
    # In-process, and on a server (nothing listens at 127.0.0.1:1): checked before either.
    for where in (["--local"], ["--no-worker", "--address", "127.0.0.1:1"]):
        done = cli("run", path, *TOOLS, *where)
        assert done.returncode == 2, done.stderr
        assert one_line(done.stderr) == f"durable-plan: error: {problem}"


def test_validate_reads_no_further_than_a_plan_file_can_be() -> None:
    """/dev/zero has no size to check first: it was read forever."""
    done = cli("validate", "/dev/zero", *TOOLS)
    assert done.returncode == 2
    assert done.stdout.splitlines() == [
        "/dev/zero: goes on past 33,554,432 bytes, not a plan file. Fix: pass a plan file "
        "(plans are small)",
        "1 problem in 1 of 1 files",
    ]


def test_a_missing_plan_file_is_bad_input_for_validate_as_for_run(tmp_path: Path) -> None:
    missing = str(tmp_path / "nope.yaml")
    done = cli("validate", missing, str(PLANS / "game_master.yaml"), *TOOLS)
    assert done.returncode == 2
    assert done.stdout.splitlines() == [
        f"{missing}: no such file. Fix: check the path",
        f"{PLANS / 'game_master.yaml'}: ok (3 steps, 3 levels)",
        "1 problem in 1 of 2 files",
    ]
    done = cli("run", missing, *TOOLS, "--local")
    assert done.returncode == 2
    assert (
        one_line(done.stderr)
        == f"durable-plan: error: {missing}: no such file. Fix: check the path"
    )


def test_a_tools_module_that_exits_is_an_error_not_a_pass(tmp_path: Path) -> None:
    """`sys.exit(0)` at import made validate exit 0 without validating."""
    tools = write(tmp_path, "exits.py", "import sys\nsys.exit(0)\n")
    for args in (["validate", TRIAGE], ["run", TRIAGE, "--local"], ["worker"]):
        done = cli(*args, "--tools", tools)
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        assert one_line(done.stderr) == (
            f"durable-plan: error: importing tools module {tools!r} called sys.exit(0); a tools "
            "module must define its tools, not run a program: put the script's code under "
            "`if __name__ == '__main__':`"
        )


def test_validate_without_tools_says_tool_names_were_not_checked(tmp_path: Path) -> None:
    typo = write(tmp_path, "typo.yaml", "steps:\n  - id: a\n    tool: look_up_monstr\n")
    env = {"DURABLE_PLAN_TOOLS": ""}
    done = cli("validate", typo, env=env)
    assert done.returncode == 0
    assert done.stdout == f"{typo}: ok (1 step, 1 level)\n"
    assert one_line(done.stderr) == (
        "validate: tool names and arguments were not checked; pass --tools MODULE (or set "
        "$DURABLE_PLAN_TOOLS) to check them"
    )
    done = cli("validate", "--json", typo, env=env)
    assert json.loads(done.stdout)["tools_checked"] is False
    done = cli("validate", typo, *TOOLS)
    assert done.returncode == 1 and "unknown tool 'look_up_monstr'" in done.stdout
    assert done.stderr == ""
    done = cli("validate", "--json", typo, *TOOLS)
    assert json.loads(done.stdout)["tools_checked"] is True


def test_the_docs_show_what_validate_prints_for_broken_yaml() -> None:
    found = re.search(
        r"<!-- validate: (\S+) -->\n```text\n\$ (.*?)\n(.*?)^```$", CLI_GUIDE, re.S | re.M
    )
    assert found, "docs/guides/cli.md's validate example lost its marker"
    path, command, output = found.groups()
    words = command.split()
    assert words[0] == ".venv/bin/durable-plan" and path in words
    done = cli(*words[1:])
    assert done.returncode == 1
    assert done.stdout == output
    assert done.stderr == ""
    assert not (PLANS / Path(path).name).exists(), "examples/plans/ holds only valid plans"


# --- ports and addresses --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ["dev", "--port", "99999"],
            "durable-plan dev: error: argument --port: 99999 is not a port number (1-65535) "
            "(see durable-plan dev --help)",
        ),
        (
            ["codec-server", "--port", "99999"],
            "durable-plan codec-server: error: argument --port: 99999 is not a port number "
            "(1-65535) (see durable-plan codec-server --help)",
        ),
        (
            ["dev", "--port", "65000", "--headless", "--ui-port", "0"],
            "durable-plan dev: error: argument --ui-port: 0 is not a port number (1-65535) "
            "(see durable-plan dev --help)",
        ),
        (
            ["dev", "--port", "65000"],
            "durable-plan: error: dev: the web UI's default port, --port + 1000 = 66000, is "
            "past 65535; pass --ui-port PORT, or --headless",
        ),
    ],
)
def test_a_port_out_of_range_is_one_line(args: list[str], expected: str) -> None:
    """They were OverflowError tracebacks."""
    done = cli(*args, env={"DURABLE_PLAN_KEYS": ""})
    assert done.returncode == 2
    assert one_line(done.stderr) == expected


@pytest.mark.parametrize(
    ("address", "words"),
    [
        ("not an address", "is not HOST:PORT; write HOST:PORT, e.g. 127.0.0.1:7233"),
        ("localhost", "has no port; write localhost:7233 (the dev server's port)"),
        (
            "http://127.0.0.1:7233",
            "has a scheme (http://); a Temporal address is HOST:PORT without one: write "
            "127.0.0.1:7233",
        ),
        ("127.0.0.1:99999", "has no valid port (1-65535) after the colon"),
        (":7233", "does not start with a host name"),
        ("::1:7233", "looks like an IPv6 address without brackets; write [HOST]:PORT"),
    ],
)
def test_a_malformed_address_is_bad_input_before_anything_is_tried(
    address: str, words: str
) -> None:
    for args in (["show", "x"], ["approve", "x", "y"], ["worker", *TOOLS]):
        done = cli(*args, "--address", address)
        assert done.returncode == 2, (args, done.stderr)
        line = one_line(done.stderr)
        assert line.startswith(
            f"durable-plan: error: the address {address!r} (--address or $TEMPORAL_ADDRESS) "
        )
        assert line.endswith(words) or words in line, line
    done = cli("run", str(PLANS / "game_master.yaml"), *TOOLS, "--address", address)
    assert done.returncode == 2 and words in one_line(done.stderr)


@pytest.mark.parametrize("script", ["worker.py", "client.py"])
def test_the_scripts_refuse_a_malformed_address_in_one_line(script: str) -> None:
    done = subprocess.run(
        [sys.executable, script, "--address", "http://localhost:7233"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2
    assert one_line(done.stderr) == (
        f"{script}: the address 'http://localhost:7233' (--address or $TEMPORAL_ADDRESS) has a "
        "scheme (http://); a Temporal address is HOST:PORT without one: write localhost:7233"
    )


def test_an_unknown_host_is_no_server_and_names_the_host() -> None:
    """`.invalid` never resolves (RFC 2606); it read `tonic::transport::Error`."""
    done = cli("show", "x", "--address", "temporal.invalid:7233")
    assert done.returncode == 3
    assert one_line(done.stderr) == (
        "durable-plan: error: no Temporal server answers at temporal.invalid:7233 (the host "
        "name does not resolve); check the host name 'temporal.invalid', or pass --address "
        "HOST:PORT"
    )
    done = subprocess.run(
        [sys.executable, "worker.py", "--address", "temporal.invalid:7233"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 3  # as the command line's: no server
    assert one_line(done.stderr) == (
        "worker.py: no Temporal server answers at temporal.invalid:7233 (the host name does not "
        "resolve): check the host name 'temporal.invalid', or point --address / "
        "TEMPORAL_ADDRESS at your server"
    )


def test_a_closed_pipe_is_not_a_traceback() -> None:
    """`durable-plan validate --json ... | head -1`, with more output than a pipe holds."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "durable_plan", "validate", "--json", *[TRIAGE] * 2000, *TOOLS],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141
    assert "Traceback" not in err and "BrokenPipeError" not in err


async def test_show_and_approve_a_plan_no_worker_answers_for(
    client: Client, temporal_target: str, task_queue: str
) -> None:
    """A query or an update needs a worker: `show` waited 40 s and printed a traceback,
    `approve` waited without end. Now each asks for 5 s and says which queue lacks one."""
    from durable_plan import start_plan
    from examples.plan_tools import registry

    handle = await start_plan(
        client,
        {"steps": [{"id": "lookup", "tool": "look_up_monster", "args": {"name": "ogre"}}]},
        task_queue=task_queue,
        registry=registry,
        if_no_worker="ignore",
    )
    fix = (
        f"within 5 s; start one polling task queue {task_queue!r} (durable-plan worker --tools "
        f"MODULE --task-queue {task_queue})"
    )
    try:
        code, out, err = await acli("show", handle.id, "--address", temporal_target)
        assert (code, err) == (0, "")
        assert out.splitlines() == [
            f"plan {handle.id}: running: no worker answered for its ledger {fix}"
        ]
        code, out, err = await acli("approve", handle.id, "lookup", "--address", temporal_target)
        assert (code, out) == (1, "")
        assert one_line(err) == (
            f"durable-plan: refused: plan {handle.id}: no worker answered to take a decision {fix}"
        )
    finally:
        await handle.handle.terminate("test: nobody runs it")


# --- the dev server leaves nothing behind ---------------------------------------------------


def test_a_dev_server_stopped_the_hard_way_leaves_no_log_directory() -> None:
    """A server slow to stop gets SIGKILL after the timeout (here: at once); its log
    directory stayed behind in the temp directory, one per such test."""
    server = DevServer(headless=True).start()
    assert server.log_path is not None
    folder = server.log_path.parent
    assert folder.name.startswith("durable-plan-devserver-") and folder.exists()
    server.stop(timeout=0)
    assert not server.running
    assert not folder.exists()


# --- a failing tool: one line, not the SDK's tracebacks --------------------------------------

FAILING = """\
name: dragon
steps:
  - id: lookup
    tool: look_up_monster
    args: {name: dragon}
  - id: attack
    tool: roll_attack
    bind: {armour: steps.lookup.armour}
"""
FAILED_LINE = (
    "step 'lookup' failed: KeyError: \"no monster named 'dragon'; known: goblin, ogre, skeleton\""
)


async def test_run_prints_one_line_for_a_failed_step_quiet_or_not(
    tmp_path: Path, temporal_target: str
) -> None:
    """Three 25-line "Completing activity as failed" tracebacks came first; with -q the
    summary was missing and only the tracebacks remained."""
    plan = write(tmp_path, "dragon.yaml", FAILING)
    code, out, err = await acli("run", plan, *TOOLS, "--address", temporal_target, "-q")
    assert code == 1
    assert json.loads(out)["ledger"][0]["attempts"] == 3
    assert one_line(err) == FAILED_LINE
    code, out, err = await acli("run", plan, *TOOLS, "--address", temporal_target)
    assert code == 1
    assert "Traceback" not in err and "Completing activity" not in err
    assert err.strip().splitlines()[-1] == FAILED_LINE


async def test_tracebacks_come_back_when_asked_for(tmp_path: Path, temporal_target: str) -> None:
    """DURABLE_PLAN_TRACEBACKS=1: the SDK's records as they are, for debugging a tool."""
    plan = write(tmp_path, "dragon.yaml", FAILING)
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "durable_plan",
        "run",
        plan,
        *TOOLS,
        "-q",
        "--address",
        temporal_target,
        cwd=ROOT,
        env={**os.environ, "DURABLE_PLAN_TRACEBACKS": "1"},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 1
    assert err.decode().count("Completing activity as failed") == 3
    assert "Traceback" in err.decode()


async def test_a_worker_prints_one_line_per_failed_attempt(
    tmp_path: Path, temporal_target: str, task_queue: str
) -> None:
    plan = write(tmp_path, "dragon.yaml", FAILING)
    address = ("--address", temporal_target)
    worker = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "durable_plan",
        "worker",
        *TOOLS,
        "--task-queue",
        task_queue,
        *address,
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert worker.stdout is not None
        await asyncio.wait_for(worker.stdout.readline(), 60)  # the banner: it polls now
        code, out, _ = await acli(
            "run", plan, *TOOLS, "--no-worker", "--task-queue", task_queue, "-q", *address
        )
        assert code == 1
        assert json.loads(out)["ledger"][0]["attempts"] == 3
    finally:
        worker.terminate()
        _, err = await asyncio.wait_for(worker.communicate(), 60)
    lines = [line for line in err.decode().splitlines() if not line.startswith("worker: stopping")]
    assert len(lines) == 3, err.decode()
    for attempt, line in enumerate(lines, 1):
        assert re.fullmatch(
            r"worker: step 'lookup' \(look_up_monster\) of plan-dragon-[0-9a-f]{8}, attempt "
            + str(attempt)
            + r": KeyError: \"no monster named 'dragon'; known: goblin, ogre, skeleton\"",
            line,
        ), line


async def test_worker_py_prints_one_line_per_failed_attempt(
    client: Client, temporal_target: str, task_queue: str
) -> None:
    from activities.game_master import GAME_TOOLS
    from durable_plan import start_plan

    worker = await asyncio.create_subprocess_exec(
        sys.executable,
        "worker.py",
        "--address",
        temporal_target,
        "--task-queue",
        task_queue,
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert worker.stdout is not None
        banner = (await asyncio.wait_for(worker.stdout.readline(), 60)).decode()
        assert banner.startswith(f"worker polling '{task_queue}'")
        plan = {"steps": [{"id": "lookup", "tool": "look_up_monster", "args": {"name": "dragon"}}]}
        handle = await start_plan(client, plan, task_queue=task_queue, registry=GAME_TOOLS)
        result = await asyncio.wait_for(handle.result(), 60)
        assert not result.ok
        attempts = result.ledger[0].attempts
    finally:
        worker.terminate()
        _, err = await asyncio.wait_for(worker.communicate(), 60)
    lines = err.decode().splitlines()
    assert "Traceback" not in err.decode()
    assert len(lines) == attempts, err.decode()
    assert lines[0] == (
        f"worker.py: step 'lookup' (look_up_monster) of {handle.id}, attempt 1: KeyError: "
        "\"no monster named 'dragon'; known: goblin, ogre, skeleton\""
    )


async def test_the_command_lines_worker_and_worker_py_do_not_share_a_task_queue(
    temporal_target: str,
) -> None:
    """Both set-ups of the README on one server, each on its default queue: a plan started
    with `run --no-worker` reaches only the worker that holds its tools (on one shared queue
    its steps landed on worker.py, "not registered on this worker", and were retried)."""
    env = {**os.environ, "TEMPORAL_ADDRESS": temporal_target}
    demo = await asyncio.create_subprocess_exec(
        sys.executable,
        "worker.py",
        cwd=ROOT,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    cli_worker = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "durable_plan",
        "worker",
        *TOOLS,
        cwd=ROOT,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert demo.stdout is not None and cli_worker.stdout is not None
        demo_banner = (await asyncio.wait_for(demo.stdout.readline(), 60)).decode()
        cli_banner = (await asyncio.wait_for(cli_worker.stdout.readline(), 60)).decode()
        assert demo_banner.startswith("worker polling 'durable-plan' on ")
        assert "on task queue 'durable-plan-cli' at " in cli_banner
        code, out, err = await acli(
            "run",
            str(PLANS / "party_round.yaml"),
            *TOOLS,
            "--no-worker",
            "-q",
            "--address",
            temporal_target,
        )
    finally:
        for proc in (demo, cli_worker):
            proc.terminate()
        demo_err = (await asyncio.wait_for(demo.communicate(), 60))[1].decode()
        await asyncio.wait_for(cli_worker.communicate(), 60)
    assert code == 0, err
    assert {line["attempts"] for line in json.loads(out)["ledger"]} == {1}
    assert "not registered" not in demo_err and demo_err == "", demo_err
