"""A gated tool call inside an agent step, decided from the command line.

An agent step runs in its own child workflow, ``<plan id>/agent/<step id>``, and its tool
calls' approval gates live there. `show` and `approve` refused that workflow ("is a
AgentStepWorkflow, not a plan"), so such a call could not be decided from a shell although
the README says to decide it on the child. Now `show` on the plan points at the child,
`show` on the child lists the call with its arguments and digest, and `approve` on the
child answers it. The plan runs on a worker in this process with a scripted model (the
command line has no models); the commands run as subprocesses, as a person runs them.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client
from temporalio.strands_agents import StrandsPlugin

from durable_plan import plan_worker, start_plan
from durable_plan.testing import ScriptedModel, TurnLike, call
from durable_plan.testing.scripted_model import output
from durable_plan.tools.registry import ToolRegistry

ROOT = Path(__file__).resolve().parents[2]
SUMMONED: list[str] = []


async def summon(name: str) -> dict[str, Any]:
    """Summon help (a person approves each call).

    Args:
        name: who summons
    """
    SUMMONED.append(name)
    return {"summoned": True}


REGISTRY = ToolRegistry()
REGISTRY.add(summon, requires_approval=True)
ANSWER = {
    "type": "object",
    "required": ["flees", "reason"],
    "properties": {"flees": {"type": "boolean"}, "reason": {"type": "string"}},
}
SCRIPTS: dict[str, list[TurnLike]] = {
    "the goblin needs help": [
        call("summon", name="goblin"),
        output({"flees": False, "reason": "helped"}),
    ],
    "the goblin asks twice": [
        call("summon", name="goblin"),
        output({"flees": True, "reason": "nobody came"}),
    ],
}


def agent_plan(prompt: str) -> dict[str, Any]:
    args = {"prompt": prompt, "output_schema": ANSWER, "tools": ["summon"]}
    return {"steps": [{"id": "morale", "tool": "agent", "args": args}]}


@pytest.fixture(scope="module")
async def agent_client(temporal_target: str) -> AsyncIterator[Client]:
    plugin = StrandsPlugin(models={"scripted": lambda: ScriptedModel(scripts=SCRIPTS)})
    yield await Client.connect(temporal_target, plugins=[plugin])


async def cli(*args: str) -> tuple[int, str, str]:
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


async def until_a_call_awaits(child_id: str, address: str) -> str:
    """`show CHILD` until a tool call awaits approval; returns that output."""
    deadline = time.monotonic() + 60
    out = err = ""
    while time.monotonic() < deadline:
        code, out, err = await cli("show", child_id, "--address", address)
        if code == 0 and "awaits approval" in out:
            return out
        await asyncio.sleep(0.3)
    raise AssertionError(f"no tool call awaited approval:\n{out}\n{err}")


def answer_line(shown: str) -> list[str]:
    """The words of the `answer:` line's command (the part before its hint)."""
    line = next(text for text in shown.splitlines() if text.startswith("    answer:"))
    return line.removeprefix("    answer:").split("   (or")[0].split()


async def test_show_and_approve_a_tool_call_inside_an_agent_step(
    agent_client: Client, temporal_target: str, task_queue: str
) -> None:
    SUMMONED.clear()
    address = ("--address", temporal_target)
    async with plan_worker(agent_client, task_queue=task_queue, registry=REGISTRY):
        handle = await start_plan(
            agent_client,
            agent_plan("the goblin needs help"),
            task_queue=task_queue,
            registry=REGISTRY,
            model="scripted",
        )
        child_id = f"{handle.id}/agent/morale"
        shown = await until_a_call_awaits(child_id, temporal_target)
        lines = shown.splitlines()
        assert lines[0] == f"agent step {child_id}: running, round 1"
        assert lines[1] == "tools called: none yet"
        assert lines[2] == "tool call morale/agent.1/summon awaits approval:"
        assert lines[3] == '    arguments: {"name": "goblin"}'
        digest = lines[4].removeprefix("    digest:    ")
        words = answer_line(shown)
        assert words == [
            "durable-plan",
            "approve",
            child_id,
            "morale/agent.1/summon",
            "--digest",
            digest,
            "--address",
            temporal_target,
        ]
        # The plan's own ledger names the call and the command that answers it, on the child.
        code, plan_view, err = await cli("show", handle.id, *address)
        assert code == 0, err
        assert "morale (agent step): tool call morale/agent.1/summon awaits approval:" in plan_view
        assert "1 tool call awaiting approval" in plan_view
        assert answer_line(plan_view) == words
        code, out, _ = await cli("show", child_id, "--json", *address)
        state = json.loads(out)
        assert state["status"] == "running" and state["awaiting"][0]["args_digest"] == digest
        assert SUMMONED == []

        # A wrong call id is refused in one line; the right one, with its digest, is taken.
        code, _, err = await cli("approve", child_id, "morale/agent.1/summon~9", *address)
        assert code == 1
        assert err.strip() == (
            "durable-plan: refused: step 'morale/agent.1/summon~9' is not awaiting approval "
            "(awaiting: morale/agent.1/summon)"
        )
        code, out, err = await cli(*words[1:])
        assert (code, out.strip()) == (0, "morale/agent.1/summon: approved"), err
        result = await asyncio.wait_for(handle.result(), 60)
    assert SUMMONED == ["goblin"]
    assert result.returned["morale"]["output"] == {"flees": False, "reason": "helped"}

    code, out, err = await cli("show", child_id, *address)
    assert code == 0, err
    assert out.splitlines() == [
        f"agent step {child_id}: completed",
        "tools called: summon (round 1)",
        'iterations: 2, final: true, output: {"flees": false, "reason": "helped"}',
    ]
    code, _, err = await cli("approve", child_id, "morale/agent.1/summon", *address)
    assert code == 1
    assert err.strip() == (
        f"durable-plan: refused: agent step {child_id} is completed; no tool call awaits approval"
    )


async def test_decide_rejects_a_tool_call_inside_an_agent_step(
    agent_client: Client, temporal_target: str, task_queue: str
) -> None:
    SUMMONED.clear()
    address = ("--address", temporal_target)
    async with plan_worker(agent_client, task_queue=task_queue, registry=REGISTRY):
        handle = await start_plan(
            agent_client,
            agent_plan("the goblin asks twice"),
            task_queue=task_queue,
            registry=REGISTRY,
            model="scripted",
        )
        child_id = f"{handle.id}/agent/morale"
        await until_a_call_awaits(child_id, temporal_target)
        code, out, err = await cli(
            "decide",
            child_id,
            "morale/agent.1/summon",
            "--reject",
            "--reason",
            "not today",
            *address,
        )
        assert (code, out.strip()) == (0, "morale/agent.1/summon: rejected"), err
        result = await asyncio.wait_for(handle.result(), 60)
    assert SUMMONED == []  # the tool never ran: the loop got the rejection instead
    assert result.returned["morale"]["output"]["reason"] == "nobody came"
