"""What a newcomer meets first, on the real dev server.

One-line errors from ``client.py`` / ``worker.py`` (no server, no namespace, a failed
conversation, with the root cause also in the workflow's failure), a plan started with no
worker polling its queue, what the web UI shows for plans and steps, and the compose stack's
pinned images.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest
import yaml
from temporalio.client import Client, WorkflowFailureError
from temporalio.service import RPCError

import worker as worker_script
from activities.game_master import GAME_TOOLS
from activities.scripts import ATTACK_PLAN, MORALE_PROMPT, ROUND_PLAN, ROUND_PROMPT
from durable_plan import plan_worker, run_plan, start_plan
from durable_plan.check import check_plan
from durable_plan.server.connection import default_ui_url, workflow_url
from durable_plan.server.devserver import free_port
from durable_plan.strands.plugin import WorkflowPlanPlugin
from durable_plan.temporal.client.pollers import SEEN_FOR_S, worker_seen
from durable_plan.temporal.client.start import NoWorkerError, NoWorkerWarning
from durable_plan.temporal.workflows.failures import root_message
from durable_plan.temporal.workflows.ui_summary import (
    MAX_DETAIL_ROWS,
    MAX_SUMMARY_CHARS,
    StepSummaries,
    plan_details,
    plan_summary,
)
from workflows.game_master import GameMasterInput, GameMasterWorkflow

ROOT = Path(__file__).resolve().parents[2]


# -- one-line errors from the scripts --------------------------------------------------------


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args],
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
    )


def _one_line(stdout: str, stderr: str) -> str:
    assert "Traceback" not in stdout + stderr, stdout + stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    return lines[0]


@pytest.mark.parametrize("script", ["client.py", "worker.py"])
def test_no_server_is_one_line_with_the_fix(script: str) -> None:
    address = f"127.0.0.1:{free_port()}"  # nothing listens there
    proc = _run(script, "--address", address)
    assert proc.returncode == 3, proc  # the durable-plan command's code for "no server"
    line = _one_line(proc.stdout, proc.stderr)
    assert line.startswith(f"{script}: no Temporal server answers at {address}"), line
    assert "(connection refused)" in line
    assert "`durable-plan dev`" in line and "temporal server start-dev`" in line
    assert "--address / TEMPORAL_ADDRESS" in line


def test_client_reads_temporal_address() -> None:
    """client.py used to ignore TEMPORAL_ADDRESS (the worker honoured it)."""
    address = f"127.0.0.1:{free_port()}"
    proc = _run("client.py", env={"TEMPORAL_ADDRESS": address})
    assert proc.returncode == 3
    assert f"no Temporal server answers at {address}" in _one_line(proc.stdout, proc.stderr)


def test_a_missing_namespace_is_one_line(temporal_target: str) -> None:
    proc = _run("worker.py", "--address", temporal_target, "--namespace", "no-such-namespace")
    assert proc.returncode == 2
    line = _one_line(proc.stdout, proc.stderr)
    assert f"the Temporal server at {temporal_target} has no namespace 'no-such-namespace'" in line
    assert "temporal operator namespace create" in line


async def _client_py(*args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "client.py",
        *args,
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def _failure_of(client: Client, line: str) -> str:
    """The failed conversation's workflow failure message: what the web UI shows."""
    found = re.search(r"conversation (game-master-[0-9a-f]+) failed", line)
    assert found, line
    with pytest.raises(WorkflowFailureError) as info:
        await client.get_workflow_handle(found.group(1)).result()
    cause = info.value.cause
    assert cause is not None
    return str(getattr(cause, "message", cause))


async def test_an_unknown_prompt_prints_its_root_cause(
    temporal_target: str, task_queue: str
) -> None:
    """`client.py --prompt` without --live: the scripted model has no script for it."""
    client = await worker_script.connect(temporal_target)
    async with worker_script.build_worker(client, task_queue):
        code, out, err = await _client_py(
            "--address", temporal_target, "--task-queue", task_queue, "--prompt", "hello there"
        )
    assert code == 1, (out, err)
    line = _one_line(out, err)
    assert "failed: ScriptError: ScriptedModel 'scripted': no script for the first prompt" in line
    assert "'hello there'" in line
    failure = await _failure_of(client, line)
    assert failure.startswith("the agent failed: ScriptError: ScriptedModel 'scripted': no script")


async def test_live_without_credentials_prints_its_root_cause(
    temporal_target: str, task_queue: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`client.py --live` against a worker that has no AWS credentials (checked offline:
    botocore fails before any request when no credential source exists)."""
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(ROOT / "no-such-credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(ROOT / "no-such-config"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    client = await worker_script.connect(temporal_target)
    async with worker_script.build_worker(client, task_queue):
        code, out, err = await _client_py(
            "--address", temporal_target, "--task-queue", task_queue, "--live"
        )
    assert code == 1, (out, err)
    line = _one_line(out, err)
    assert line.endswith("failed: NoCredentialsError: Unable to locate credentials"), line
    assert (await _failure_of(client, line)) == (
        "the agent failed: NoCredentialsError: Unable to locate credentials"
    )


async def test_client_says_when_no_worker_polls(temporal_target: str, task_queue: str) -> None:
    """It says so in one line, then waits for a worker (started here after the notice)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "client.py",
        "--address",
        temporal_target,
        "--task-queue",
        task_queue,
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stderr is not None and proc.stdout is not None
    notice = (await asyncio.wait_for(proc.stderr.readline(), 60)).decode()
    assert f"no worker polls task queue '{task_queue}' on {temporal_target}" in notice
    assert f"python worker.py --address {temporal_target} --task-queue {task_queue}" in notice
    client = await worker_script.connect(temporal_target)
    async with worker_script.build_worker(client, task_queue):
        out = (await asyncio.wait_for(proc.stdout.read(), 60)).decode()
        assert await proc.wait() == 0
    assert "model round trips: 1 (a plain loop needs 4)" in out


def test_root_message_reads_the_innermost_cause() -> None:
    try:
        try:
            raise KeyError("deep")
        except KeyError as inner:
            raise RuntimeError("wrapper\nwith lines") from inner
    except RuntimeError as outer:
        assert root_message(outer) == "KeyError: 'deep'"
    assert root_message(ValueError("a\n  b")) == "ValueError: a b"
    assert len(root_message(ValueError("x" * 5000))) == 1000


def test_ui_links(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TEMPORAL_UI_URL", raising=False)
    assert default_ui_url("127.0.0.1:7233") == "http://127.0.0.1:8233"
    assert default_ui_url("temporal.example.com:7233") is None  # no guess for a remote server
    monkeypatch.setenv("TEMPORAL_UI_URL", "http://localhost:8080/")
    assert default_ui_url("127.0.0.1:7233") == "http://localhost:8080"
    monkeypatch.setenv("TEMPORAL_UI_URL", "")
    assert default_ui_url("127.0.0.1:7233") is None
    assert workflow_url("http://ui", "default", "gm-1/plan/tooluse_0") == (
        "http://ui/namespaces/default/workflows/gm-1%2Fplan%2Ftooluse_0"
    )


# -- a plan with no worker -------------------------------------------------------------------

LOOKUP = {"steps": [{"id": "look", "tool": "look_up_monster", "args": {"name": "ogre"}}]}


async def test_start_plan_warns_when_no_worker_polls(client: Client, task_queue: str) -> None:
    with pytest.warns(NoWorkerWarning, match=f"no worker polls task queue '{task_queue}'"):
        handle = await start_plan(client, LOOKUP, task_queue=task_queue, registry=GAME_TOOLS)
    # The plan waits rather than fails: a worker started later runs it.
    async with plan_worker(client, task_queue=task_queue, registry=GAME_TOOLS):
        result = await asyncio.wait_for(handle.result(), 30)
    assert result.ok


async def test_start_plan_raises_when_asked_and_starts_nothing(
    client: Client, task_queue: str, workflow_id: str
) -> None:
    with pytest.raises(NoWorkerError, match="the plan waits until one does: run plan_worker"):
        await start_plan(
            client,
            LOOKUP,
            task_queue=task_queue,
            registry=GAME_TOOLS,
            workflow_id=workflow_id,
            if_no_worker="raise",
        )
    with pytest.raises(RPCError):
        await client.get_workflow_handle(workflow_id).describe()


async def test_ignore_starts_quietly(client: Client, task_queue: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", NoWorkerWarning)
        handle = await start_plan(
            client, LOOKUP, task_queue=task_queue, registry=GAME_TOOLS, if_no_worker="ignore"
        )
    await handle.handle.terminate("test: nobody will run it")


async def test_a_worker_started_just_before_counts(client: Client, task_queue: str) -> None:
    """A worker in this process, started a moment before the plan: no warning, no error."""
    async with plan_worker(client, task_queue=task_queue, registry=GAME_TOOLS):
        with warnings.catch_warnings():
            warnings.simplefilter("error", NoWorkerWarning)
            first = await run_plan(client, LOOKUP, task_queue=task_queue, registry=GAME_TOOLS)
        second = await run_plan(
            client, LOOKUP, task_queue=task_queue, registry=GAME_TOOLS, if_no_worker="raise"
        )
    assert first.ok and second.ok


async def test_a_polled_queue_is_remembered_an_empty_one_asked_again(
    client: Client, task_queue: str
) -> None:
    """One ``DescribeTaskQueue`` per plan was one request more than a bare start: a yes is
    remembered for ``SEEN_FOR_S``, a no is asked again (a worker started since is seen)."""
    service = client.workflow_service
    asked: list[str] = []
    real = service.describe_task_queue

    async def counted(request: Any, *args: Any, **kwargs: Any) -> Any:
        asked.append(request.task_queue.name)
        return await real(request, *args, **kwargs)

    service.describe_task_queue = counted  # type: ignore[method-assign]
    try:
        empty = f"{task_queue}-empty"
        assert not await worker_seen(client, empty)
        assert not await worker_seen(client, empty)
        assert asked.count(empty) >= 2, "a no is not remembered"
        async with plan_worker(client, task_queue=task_queue, registry=GAME_TOOLS):
            with warnings.catch_warnings():
                warnings.simplefilter("error", NoWorkerWarning)
                first = await run_plan(client, LOOKUP, task_queue=task_queue, registry=GAME_TOOLS)
                after_first = asked.count(task_queue)  # 1, or more while the worker starts
                more = [
                    await run_plan(client, LOOKUP, task_queue=task_queue, registry=GAME_TOOLS)
                    for _ in range(2)
                ]
        assert first.ok and all(r.ok for r in more)
        assert after_first >= 1
        assert asked.count(task_queue) == after_first, "the plans after the first ask nothing"
        # Another client (another process's view) asks for itself.
        other = await Client.connect(client.service_client.config.target_host)
        assert await worker_seen(other, task_queue)
    finally:
        del service.describe_task_queue
    assert SEEN_FOR_S >= 10


# -- what the web UI shows -------------------------------------------------------------------


def test_plan_summary_and_details() -> None:
    checked = check_plan(ATTACK_PLAN)
    assert plan_summary(checked) == "plan: 3 steps in 3 levels: lookup → attack → damage (final)"
    details = plan_details(checked)
    assert details.startswith("**3 steps in 3 levels**; returns every step; on_error fail_fast")
    assert "| 1 | `attack` | `roll_attack` | `lookup` | `armour ← steps.lookup.armour` |  |" in (
        details
    )
    rounds = plan_details(check_plan(ROUND_PLAN))
    assert "| 2 | `rolls` | `map of roll_check` | `chars` |" in rounds
    assert "do.character ← item.name" in rounds


def test_step_summaries_say_what_the_tool_name_does_not() -> None:
    summaries = StepSummaries(check_plan(ROUND_PLAN))
    assert summaries.of("log") == "log · level 0"
    assert summaries.of("chars") == "chars · level 1 · over ← steps.log.actions"
    assert summaries.of("rolls/do.2") == (
        "rolls/do.2 · level 2 · character ← item.name, attack_bonus ← item.attack_bonus"
        " · item of rolls"
    )
    assert summaries.of("nope") is None and summaries.of("log/do.1") is None
    branch = StepSummaries(
        check_plan(
            {
                "steps": [
                    {"id": "a", "tool": "t"},
                    {"id": "b", "tool": "t", "when": "steps.a.x = 1"},
                ]
            }
        )
    )
    assert branch.of("b") == "b · level 1 · when steps.a.x = 1"


def test_large_plans_stay_within_bounds() -> None:
    steps = [{"id": f"s{i}", "tool": "t", "bind": {"x": "'" + "y" * 180 + "'"}} for i in range(80)]
    checked = check_plan({"steps": steps}, max_steps=100)
    assert len(plan_summary(checked)) <= MAX_SUMMARY_CHARS
    assert all(len(StepSummaries(checked).of(f"s{i}") or "") <= 200 for i in range(80))
    details = plan_details(checked)
    assert details.count("\n| ") == MAX_DETAIL_ROWS + 2  # the header, its separator, the rows
    assert details.endswith("… and 16 more steps")
    pipes = plan_details(check_plan({"steps": [{"id": "a", "tool": "t", "when": "'a|b' = 'a|b'"}]}))
    assert "`'a\\|b' = 'a\\|b'`" in pipes


def _activity_summaries(history: Any) -> dict[str, str]:
    return {
        e.activity_task_scheduled_event_attributes.activity_id: (
            json.loads(e.user_metadata.summary.data) if e.user_metadata.summary.data else ""
        )
        for e in history.events
        if e.HasField("activity_task_scheduled_event_attributes")
    }


async def test_the_ui_shows_plans_and_steps(client: Client, task_queue: str) -> None:
    """By default the plan's summary only (each byte of UI metadata is history); "details"
    adds the table, "full" each step's summary on its activity."""
    shown: dict[str, Any] = {}
    async with plan_worker(client, task_queue=task_queue, registry=GAME_TOOLS):
        for ui in (None, "details", "full"):
            extra = {} if ui is None else {"ui_metadata": ui}
            handle = await start_plan(
                client, ATTACK_PLAN, task_queue=task_queue, registry=GAME_TOOLS, **extra
            )
            await handle.result()
            description = await handle.handle.describe()
            shown[str(ui)] = (
                await description.static_summary(),
                await description.static_details(),
                _activity_summaries(await handle.handle.fetch_history()),
            )
    summary = plan_summary(check_plan(ATTACK_PLAN))
    assert shown["None"] == (summary, None, {"lookup": "", "attack": "", "damage": ""})
    assert shown["details"][0] == summary
    assert "| 2 | `damage` | `apply_damage` |" in (shown["details"][1] or "")
    assert shown["details"][2] == {"lookup": "", "attack": "", "damage": ""}
    assert shown["full"][1] == shown["details"][1]
    assert shown["full"][2] == {
        "lookup": "lookup · level 0",
        "attack": "attack · level 1 · armour ← steps.lookup.armour",
        "damage": "damage · level 2 · monster ← steps.lookup.name, damage ← steps.attack.damage",
    }


async def test_a_wrong_ui_option_is_refused_before_anything_starts(client: Client) -> None:
    with pytest.raises(ValueError, match="ui_metadata: 'all' is not one of 'summary'"):
        await start_plan(
            client, ATTACK_PLAN, task_queue="nowhere", registry=GAME_TOOLS, ui_metadata="all"
        )
    with pytest.raises(ValueError, match="ui_metadata"):
        WorkflowPlanPlugin(registry=GAME_TOOLS, plan_options={"ui_metadata": True})


async def test_the_ui_shows_the_agents_plans_and_agent_steps(
    temporal_target: str, task_queue: str
) -> None:
    """The plugin's child plans and an agent step's child workflow carry summaries too."""
    client = await worker_script.connect(temporal_target)
    async with worker_script.build_worker(client, task_queue):
        ids = []
        for prompt in (ROUND_PROMPT, MORALE_PROMPT):
            handle = await client.start_workflow(
                GameMasterWorkflow.run,
                GameMasterInput(prompt=prompt),
                id=f"ui-{task_queue}-{len(ids)}",
                task_queue=task_queue,
            )
            await handle.result()
            ids.append(f"{handle.id}/plan/tooluse_0_0")
    round_plan = client.get_workflow_handle(ids[0])
    assert await (await round_plan.describe()).static_summary() == (
        "plan: 6 steps in 6 levels: log → chars → rolls → hits → tally → narrate (final)"
    )
    summaries = _activity_summaries(await round_plan.fetch_history())
    assert summaries["rolls/do.0"].startswith("rolls/do.0 · level 2 · character ← item.name")
    morale = client.get_workflow_handle(f"{ids[1]}/agent/morale")
    summary = await (await morale.describe()).static_summary()
    assert summary is not None
    assert summary.startswith("agent step morale · level 3 · Morale check for the goblin, now at")


# -- the compose stack -----------------------------------------------------------------------

EXACT_TAG = re.compile(r"^\d+\.\d+(\.\d+)?(-[a-z0-9.]+)?$")


def _image(reference: str) -> tuple[str, str]:
    """``name:${VAR:-default}`` -> (name, default): the tag used when VAR is unset."""
    name, _, tag = reference.partition(":")
    found = re.fullmatch(r"\$\{[A-Z_]+:-([^}]+)\}", tag)
    return name, found.group(1) if found else tag


def test_compose_images_are_pinned_and_match_the_docs() -> None:
    stack = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services: dict[str, dict[str, Any]] = stack["services"]
    images = {name: _image(s["image"]) for name, s in services.items() if "image" in s}
    assert set(images) == {
        "postgresql",
        "temporal-schema",
        "temporal",
        "temporal-namespace",
        "temporal-ui",
    }
    for service, (image, tag) in images.items():
        assert EXACT_TAG.match(tag), f"{service}: {image}:{tag} is not an exact release"
    # The schema tool and the server are one version.
    assert images["temporal"][1] == images["temporal-schema"][1] == images["temporal-namespace"][1]
    guide = (ROOT / "docs" / "guides" / "deployment.md").read_text()
    deployment = guide[guide.index("## Deployment beyond one machine") :]
    for service, (image, tag) in images.items():
        assert f"| `{service}` | `{image}:{tag}` |" in deployment, service
    # The worker: built here, pointed at the server by the same variable the scripts read.
    worker = services["worker"]
    assert worker["build"] == "."
    assert "TEMPORAL_ADDRESS=temporal:7233" in worker["environment"]
    assert worker["command"] == ["python", "worker.py"]
    dockerfile = (ROOT / "Dockerfile").read_text()
    base = re.search(r"^FROM (\S+)", dockerfile, re.MULTILINE)
    assert base, dockerfile
    image, tag = _image(base.group(1))
    assert image == "python" and re.match(r"^3\.11\.\d+-", tag), base.group(1)
    assert f"`{base.group(1)}`" in deployment
    # Every file the stack mounts exists.
    for service in services.values():
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith("./"):
                assert (ROOT / source).exists(), volume
