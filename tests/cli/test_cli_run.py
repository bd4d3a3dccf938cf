"""`durable-plan run`, end to end: in-process, on the test session's dev server, and on an
embedded dev server of its own; and every kind of bad input, each with its exit code (0 ok,
1 the plan failed, 2 bad input, 3 no server) and its one line.

The command runs in this process (``tests.support.helpers.run_cli``: the same exit status and
streams); a local run, a run on a server and an unreachable server also run it as a
subprocess, the way a user starts it."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from durable_plan.server.devserver import free_port
from tests.support.helpers import acli_subprocess, arun_cli, cli_subprocess, run_cli

ROOT = Path(__file__).resolve().parents[2]
PLANS = ROOT / "examples" / "plans"
TOOLS = ("--tools", "examples.plan_tools")


def cli(*args: str, env: dict[str, str | None] | None = None) -> subprocess.CompletedProcess[str]:
    """In this process (``run_cli``); the subprocess tests use ``cli_subprocess``."""
    return run_cli(*args, env=env)


async def acli(*args: str) -> tuple[int, str, str]:
    """The same, without blocking the event loop the session's dev server fixture lives on."""
    done = await arun_cli(*args)
    return done.returncode, done.stdout, done.stderr


def one_error(stderr: str) -> str:
    [line] = stderr.strip().splitlines()
    assert line.startswith("durable-plan: error: "), line
    return line.removeprefix("durable-plan: error: ")


def plan_file(tmp_path: Path, text: str) -> str:
    path = tmp_path / "plan.yaml"
    path.write_text(text)
    return str(path)


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


# --- in-process -----------------------------------------------------------------------------


def test_run_local_prints_the_result_as_json_and_the_ledger() -> None:
    done = cli_subprocess("run", str(PLANS / "game_master.yaml"), *TOOLS, "--local")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["returned"]["damage"] == {"hp_after": 1, "defeated": False}
    assert [line["status"] for line in result["ledger"]] == ["ok", "ok", "ok"]
    assert "3 ok" in done.stderr and "look_up_monster" in done.stderr


def test_run_local_reads_inputs() -> None:
    done = cli("run", str(PLANS / "party_round.yaml"), *TOOLS, "--local", "-i", "target=goblin")
    assert done.returncode == 0, done.stderr
    tally = json.loads(done.stdout)["returned"]["tally"]
    # goblin armour 15: aria 14+5 and cyra 12+4 hit (8 + 10), brom 9+3 misses
    assert tally == {"target": "goblin", "total_damage": 18, "hp_after": 0, "defeated": True}


def test_run_quiet_prints_only_json() -> None:
    done = cli("run", str(PLANS / "game_master.yaml"), *TOOLS, "--local", "--quiet")
    assert done.returncode == 0 and done.stderr == ""
    json.loads(done.stdout)


def test_a_failed_step_exits_1_with_the_ledger(tmp_path: Path) -> None:
    done = cli("run", plan_file(tmp_path, FAILING), *TOOLS, "--local")
    assert done.returncode == 1
    result = json.loads(done.stdout)
    assert [line["status"] for line in result["ledger"]] == ["failed", "skipped"]
    assert "step 'lookup' failed: KeyError: \"no monster named 'dragon'" in done.stderr


def test_a_gated_tool_is_refused_in_process() -> None:
    done = cli("run", str(PLANS / "triage.yaml"), *TOOLS, "--local", "-i", "ticket_id=7")
    assert done.returncode == 2
    message = one_error(done.stderr)
    assert message.startswith(f"{PLANS / 'triage.yaml'}:27: step 'refund', field 'tool':")
    assert "requires human approval" in message
    assert message.endswith("(in-process nobody can approve a step: run it without --local)")


# --- bad input: exit 2, one line, nothing runs ----------------------------------------------


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ["run", "nope.yaml", *TOOLS],
            "nope.yaml: no such file. Fix: check the path",
        ),
        (
            ["run", str(PLANS / "triage.yaml"), *TOOLS, "-i", "nope=1"],
            f"{PLANS / 'triage.yaml'}:7: field 'inputs.nope': unknown input 'nope' (declared: "
            "ticket_id, min_confidence). Fix: pass one of: ticket_id, min_confidence",
        ),
        (
            ["run", str(PLANS / "triage.yaml"), *TOOLS, "-i", "ticket_id=seven"],
            f"{PLANS / 'triage.yaml'}:10: field 'inputs.ticket_id': 'seven' is not of type "
            "'integer'. Fix: pass a value the schema allows",
        ),
        (
            ["run", str(PLANS / "triage.yaml"), *TOOLS],
            f"{PLANS / 'triage.yaml'}:10: field 'inputs.ticket_id': missing input 'ticket_id'. "
            "Fix: pass --input ticket_id=VALUE",
        ),
        (
            ["run", str(PLANS / "game_master.yaml"), *TOOLS, "-i", "monster=dragon"],
            f"{PLANS / 'game_master.yaml'}:8: field 'inputs.monster': 'dragon' is not one of "
            "['goblin', 'ogre', 'skeleton']. Fix: pass a value the schema allows",
        ),
        (
            ["run", str(PLANS / "game_master.yaml"), *TOOLS, "-i", "monster"],
            f"{PLANS / 'game_master.yaml'}: --input expects NAME=VALUE, got 'monster'. "
            "Fix: write name=value",
        ),
        (
            ["run", str(PLANS / "game_master.yaml")],
            "run needs --tools MODULE: the module whose `registry` holds the plan's tools "
            "(e.g. --tools examples.plan_tools)",
        ),
        (
            ["run", str(PLANS / "game_master.yaml"), "--tools", "examples.plan_tools:nothing"],
            "tools module 'examples.plan_tools' has no attribute 'nothing'",
        ),
    ],
)
def test_bad_input_exits_2_with_one_line(args: list[str], expected: str) -> None:
    done = cli(*args)
    assert done.returncode == 2, done.stderr
    assert one_error(done.stderr) == expected
    assert done.stdout == ""


def test_bad_yaml_and_a_schema_error(tmp_path: Path) -> None:
    done = cli("run", plan_file(tmp_path, "steps:\n  - id: a\n   tool: x\n"), *TOOLS)
    assert done.returncode == 2
    assert one_error(done.stderr).startswith(f"{tmp_path / 'plan.yaml'}:3: not valid YAML: ")
    text = "steps:\n  - id: a\n    tool: look_up_monster\n    args: {name: goblin}\n    retry: 2\n"
    done = cli("run", plan_file(tmp_path, text), *TOOLS)
    assert done.returncode == 2
    assert one_error(done.stderr) == (
        f"{tmp_path / 'plan.yaml'}:5: step 'a', field 'retry': unknown field 'retry'. "
        "Fix: did you mean 'retries'?"
    )


def test_several_problems_are_listed_one_per_line(tmp_path: Path) -> None:
    text = (
        "steps:\n  - id: a\n    tool: nope\n"
        "  - id: b\n    tool: look_up_monster\n    bind: {name: steps.c}\n"
    )
    done = cli("run", plan_file(tmp_path, text), *TOOLS, "--local")
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert lines[0] == "durable-plan: error: 2 problems:"
    assert lines[1].startswith(f"  {tmp_path / 'plan.yaml'}:3: step 'a', field 'tool': ")
    assert lines[2].startswith(f"  {tmp_path / 'plan.yaml'}:6: step 'b', field 'bind.name': ")


# --- no server: exit 3 ----------------------------------------------------------------------


def test_an_unreachable_server_exits_3() -> None:
    address = f"127.0.0.1:{free_port()}"
    done = cli_subprocess("run", str(PLANS / "game_master.yaml"), *TOOLS, "--address", address)
    assert done.returncode == 3
    assert one_error(done.stderr) == (
        f"no Temporal server answers at {address} (Connection refused); start one with "
        "`durable-plan dev`, or pass --address HOST:PORT"
    )


def test_no_temporal_binary_for_the_embedded_server_exits_3(tmp_path: Path) -> None:
    missing = tmp_path / "temporal"
    done = cli("run", str(PLANS / "game_master.yaml"), *TOOLS, "--temporal-cli", str(missing))
    assert done.returncode == 3
    assert one_error(done.stderr).startswith(f"No temporal binary at {missing} (the path you gave)")


# --- on a Temporal server -------------------------------------------------------------------


async def test_run_on_a_server_with_its_own_worker(temporal_target: str, workflow_id: str) -> None:
    code, out, err = await acli_subprocess(
        "run",
        str(PLANS / "party_round.yaml"),
        *TOOLS,
        "--address",
        temporal_target,
        "--workflow-id",
        workflow_id,
    )
    assert code == 0, err
    result = json.loads(out)
    assert result["returned"]["narrate"] == {
        "text": "The ogre staggers, 23 damage dealt, 36 hp left."
    }
    assert f"plan {workflow_id} on {temporal_target}" in err
    assert "6 ok" in err


async def test_a_failed_durable_step_exits_1(
    tmp_path: Path, temporal_target: str, workflow_id: str
) -> None:
    code, out, err = await acli(
        "run", plan_file(tmp_path, FAILING), *TOOLS, "--address", temporal_target
    )
    assert code == 1, err
    ledger: list[dict[str, Any]] = json.loads(out)["ledger"]
    assert ledger[0]["status"] == "failed" and ledger[0]["attempts"] == 3  # retries=2
    assert "step 'lookup' failed: KeyError" in err


async def test_run_on_an_embedded_dev_server() -> None:
    code, out, err = await acli(
        "run", str(PLANS / "game_master.yaml"), *TOOLS, "-i", "monster=ogre", "--embedded"
    )
    assert code == 0, err
    assert json.loads(out)["returned"]["damage"] == {"hp_after": 53, "defeated": False}
    assert "on a dev server started for this run at 127.0.0.1:" in err


def test_a_missing_input_is_reported_with_the_plan_s_problems() -> None:
    """`triage --local` without ticket_id reported the approval problem alone; the missing
    input came only after it was fixed."""
    done = cli("run", str(PLANS / "triage.yaml"), *TOOLS, "--local")
    assert done.returncode == 2, done.stderr
    assert "2 problems:" in done.stderr
    assert "missing input 'ticket_id'. Fix: pass --input ticket_id=VALUE" in done.stderr
    assert "tool 'refund_payment' cannot be planned" in done.stderr


# --- saved plans (--plans DIR) --------------------------------------------------------------

SKIRMISH = str(PLANS / "callers" / "skirmish.yaml")
SAVED = ("--plans", str(PLANS / "saved"))
SIZED_UP = {"target": "goblin", "total_damage": 12, "hp_after": 0, "defeated": True}


def test_run_local_registers_saved_plans_from_a_directory() -> None:
    done = cli("run", SKIRMISH, *TOOLS, *SAVED, "--local")
    assert done.returncode == 0, done.stderr
    returned = json.loads(done.stdout)["returned"]
    assert [r["stats"]["name"] for r in returned["sized"]["results"]] == ["goblin", "skeleton"]
    assert returned["total"] == SIZED_UP


def test_a_plan_calling_a_saved_plan_not_registered_exits_2() -> None:
    done = cli("run", SKIRMISH, *TOOLS, "--local")
    assert done.returncode == 2
    assert "unknown tool 'plan__size_up'" in done.stderr


async def test_run_on_a_server_runs_saved_plans_as_child_plans(
    temporal_target: str, workflow_id: str
) -> None:
    code, out, err = await acli(
        "run", SKIRMISH, *TOOLS, *SAVED, "--address", temporal_target, "--workflow-id", workflow_id
    )
    assert code == 0, err
    assert json.loads(out)["returned"]["total"] == SIZED_UP
