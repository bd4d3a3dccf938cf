"""Sandbox tools outside Temporal and their pieces: a plain agent's plans run them in the
agent's own sandbox; the chain scope a durable call sends; the SDK's failure semantics."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from strands import Agent
from strands.sandbox.errors import SandboxTimeoutError

from durable_plan.language.options import ToolOptions
from durable_plan.strands.plugin import WorkflowPlanPlugin
from durable_plan.temporal.wire.messages import StepRequest
from durable_plan.temporal.wire.tool_table import table_from_wire, table_to_wire
from durable_plan.testing import ScriptedModel
from durable_plan.tools.sandbox_tools import (
    SANDBOX_PATH_NOT_FOUND_ERROR_TYPE,
    SANDBOX_TIMEOUT_ERROR_TYPE,
    SandboxFailure,
    _failure,
    invoke_sandbox_tool,
    vended_tools,
)
from tests.support.sandbox_support import SANDBOX_TOOLS, DirSandbox, sandbox_scripts


def tool_results(agent: Agent) -> list[dict[str, Any]]:
    return [b["toolResult"] for m in agent.messages for b in m["content"] if "toolResult" in b]


async def test_a_plain_agents_plan_runs_in_the_agents_own_sandbox(tmp_path: Path) -> None:
    agent = Agent(
        model=ScriptedModel(scripts=sandbox_scripts()),
        sandbox=DirSandbox(tmp_path),
        plugins=[WorkflowPlanPlugin(["*"], registry=SANDBOX_TOOLS)],
        callback_handler=None,
    )
    await agent.invoke_async("edit in a plan")
    _created, plan, cat = tool_results(agent)
    assert plan["status"] == "success", plan
    returned = next(b["json"] for b in plan["content"] if "json" in b)["returned"]
    assert returned["run"] == {"output": "2\n", "error": "", "exit_code": 0}
    assert returned["lines"] == {"path": "/notes.txt", "lines": 2}
    assert "gamma" in json.dumps(cat["content"])
    assert (tmp_path / "notes.txt").read_text() == "alpha\ngamma\n"


async def test_a_sandbox_tool_without_a_sandbox_fails_saying_so() -> None:
    shell = vended_tools("work")[0].tool
    with pytest.raises(SandboxFailure, match="runs in a sandbox and this call has none"):
        await invoke_sandbox_tool(shell, "sandbox_shell", {"command": "true"}, {})


def test_the_sdks_failure_semantics() -> None:
    """A timeout is retried under the owner's policy; a missing path and a bad argument are
    not (the same call gets the same answer); what Strands' shell wraps is judged by its cause."""
    timeout = _failure("sandbox_shell", SandboxTimeoutError(5))
    assert timeout.retryable and timeout.kind == SANDBOX_TIMEOUT_ERROR_TYPE
    missing = _failure("count_lines", FileNotFoundError("/x"))
    assert not missing.retryable and missing.kind == SANDBOX_PATH_NOT_FOUND_ERROR_TYPE
    wrapped = RuntimeError("shell failed")
    wrapped.__cause__ = FileNotFoundError("/y")
    assert not _failure("sandbox_shell", wrapped).retryable
    assert not _failure("sandbox_file_editor", ValueError("not absolute")).retryable
    assert _failure("sandbox_shell", OSError("disk")).retryable


def test_the_chain_travels_in_the_step_request_never_in_its_args() -> None:
    scope = {"namespace": "default", "workflow_id": "conv", "first_execution_run_id": "r1"}
    request = StepRequest("s", {"command": "ls"}, sandbox={**scope, "path": "s"})
    wire = request.to_compact_wire("run")
    assert wire["args"] == {"command": "ls"} and wire["sandbox"]["workflow_id"] == "conv"
    assert (
        StepRequest.from_wire(json.loads(json.dumps(wire)), "s", "run").sandbox == wire["sandbox"]
    )
    # A request of any other tool carries none (its wire form is as it was).
    assert "sandbox" not in StepRequest("s", {}).to_compact_wire("run")


def test_a_sandbox_tools_options_round_trip_and_others_stay_byte_identical() -> None:
    table = {"sandbox_shell": SANDBOX_TOOLS.get("sandbox_shell").options, "f": ToolOptions()}
    wire = table_to_wire(table)
    assert wire["sandbox_shell"]["sandbox"] == "work" and "sandbox" not in wire["f"]
    assert table_from_wire(wire, compact=True)["sandbox_shell"].sandbox == "work"
    assert not SANDBOX_TOOLS.get("sandbox_shell").options.may_run_local


async def test_a_calls_streamed_output_is_bounded(tmp_path: Path) -> None:
    """A plan's command is the model's, and each published chunk lands in the conversation's
    history: past ``MAX_STREAMED_CHARS`` one notice ends the stream (the result keeps all)."""
    from strands.sandbox.types import StreamChunk
    from temporalio.testing import ActivityEnvironment

    from durable_plan.temporal.activities.sandbox_calls import MAX_STREAMED_CHARS, _Relay
    from tests.support.sandbox_support import DirSandbox

    published: list[Any] = []

    async def emit_a_lot() -> None:
        relay = _Relay(DirSandbox(tmp_path), None, "work", "run")  # type: ignore[arg-type]
        relay.publish = published.append
        for _ in range(40):
            relay._emit(StreamChunk(data="y\n" * 5000))

    await ActivityEnvironment().run(emit_a_lot)
    data = "".join(event.chunk.data for event in published)
    assert len(data) < MAX_STREAMED_CHARS + 200
    assert published[-1].chunk.data.endswith("not streamed: see the result]")
    assert [event.sequence for event in published] == list(range(len(published)))
