"""The scripted model drives the real Strands agent loop, in-process and in a Temporal workflow."""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import timedelta
from typing import Any

import pytest
from pydantic import BaseModel
from temporalio import workflow
from temporalio.client import Client
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from strands import Agent, tool
    from strands.hooks import AfterToolsEvent
    from strands.types.exceptions import EventLoopException

from durable_plan.testing import (
    SKIPPED,
    ScriptedModel,
    ScriptError,
    ScriptExhaustedError,
    ToolCall,
    TurnLike,
    call,
    model_calls,
    output,
    say,
    turn,
)

# --------------------------------------------------------------------------------------------
# Tools
# --------------------------------------------------------------------------------------------

CALLS: list[tuple[str, dict[str, Any]]] = []


@tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: First addend.
        b: Second addend.
    """
    CALLS.append(("add", {"a": a, "b": b}))
    return a + b


@tool
async def slow_echo(text: str) -> str:
    """Echo the text after a short pause.

    Args:
        text: Text to echo.
    """
    await asyncio.sleep(0.2)
    CALLS.append(("slow_echo", {"text": text}))
    return text


@pytest.fixture(autouse=True)
def _clear_calls() -> None:
    CALLS.clear()


def _agent(model: ScriptedModel, **kwargs: Any) -> Agent:
    return Agent(model=model, tools=[add, slow_echo], callback_handler=None, **kwargs)


# --------------------------------------------------------------------------------------------
# In-process, plain strands.Agent
# --------------------------------------------------------------------------------------------


def test_tool_call_then_answer() -> None:
    model = ScriptedModel([call("add", a=2, b=3), say("2 + 3 = 5")])
    agent = _agent(model)

    result = agent("What is 2 + 3?")

    assert CALLS == [("add", {"a": 2, "b": 3})]
    assert str(result).strip() == "2 + 3 = 5"
    assert result.stop_reason == "end_turn"
    assert result.metrics.cycle_count == 2
    tool_use = agent.messages[1]["content"][0]["toolUse"]
    assert tool_use == {"toolUseId": "tooluse_0_0", "name": "add", "input": {"a": 2, "b": 3}}
    tool_result = agent.messages[2]["content"][0]["toolResult"]
    assert tool_result["status"] == "success"
    assert tool_result["content"] == [{"text": "5"}]


async def test_parallel_tool_calls_in_one_turn() -> None:
    model = ScriptedModel(
        [
            turn(
                say("Three at once."),
                call("slow_echo", text="x"),
                call("slow_echo", text="y"),
                ToolCall("add", {"a": 1, "b": 1}, tool_use_id="mine"),
            ),
            "done",
        ]
    )
    agent = _agent(model)

    started = time.monotonic()
    result = await agent.invoke_async("go")
    elapsed = time.monotonic() - started

    assert sorted(name for name, _ in CALLS) == ["add", "slow_echo", "slow_echo"]
    assert elapsed < 0.35, "the two slow tools should run concurrently"
    assert result.metrics.cycle_count == 2
    content = agent.messages[1]["content"]
    assert content[0] == {"text": "Three at once."}
    ids = [block["toolUse"]["toolUseId"] for block in content[1:]]
    assert ids == ["tooluse_0_0", "tooluse_0_1", "mine"]
    results = {b["toolResult"]["toolUseId"] for b in agent.messages[2]["content"]}
    assert results == {"tooluse_0_0", "tooluse_0_1", "mine"}


def test_script_exhaustion_fails_loudly_naming_the_position() -> None:
    agent = _agent(ScriptedModel([call("add", a=1, b=2), "three"]))
    agent("first")

    with pytest.raises(ScriptExhaustedError, match=r"position 2 .* only 2 turn"):
        agent("second")


def test_position_follows_the_conversation_not_the_instance() -> None:
    model = ScriptedModel([call("add", a=1, b=1), "two"])
    first, second = _agent(model), _agent(model)

    assert str(first("a")).strip() == "two"
    assert str(second("b")).strip() == "two"  # the shared model kept no position
    assert len(CALLS) == 2


def test_scripts_are_selected_by_first_prompt() -> None:
    model = ScriptedModel(
        scripts={
            "add numbers": [call("add", a=4, b=4), "eight"],
            "say hi": ["hi"],
        }
    )
    assert str(_agent(model)("please add numbers now")).strip() == "eight"
    assert str(_agent(model)("say hi")).strip() == "hi"

    with pytest.raises(ScriptError, match="no script for the first prompt"):
        _agent(model)("something else")

    ambiguous = ScriptedModel(scripts={"add": ["a"], "numbers": ["b"]})
    with pytest.raises(ScriptError, match="matches several scripts"):
        _agent(ambiguous)("add numbers")


def test_skipped_slot_after_a_hook_ended_the_turn() -> None:
    ended: list[bool] = []

    def end_after_tools(event: AfterToolsEvent) -> None:
        if not ended:  # only in the first invocation
            ended.append(True)
            event.end_turn = "ended by hook"

    model = ScriptedModel([call("add", a=1, b=2), SKIPPED, "second answer"])
    agent = _agent(model)
    agent.add_hook(end_after_tools, AfterToolsEvent)

    first = agent("one")
    assert str(first).strip() == "ended by hook"
    assert first.metrics.cycle_count == 1

    assert str(agent("two")).strip() == "second answer"

    # A model error after a tool round reaches the caller wrapped in EventLoopException.
    with pytest.raises(EventLoopException) as caught:
        _agent(ScriptedModel([call("add", a=1, b=2), SKIPPED]))("no hook this time")
    assert isinstance(caught.value.__cause__, ScriptError)
    assert "empty turn (SKIPPED) at position 1" in str(caught.value.__cause__)


class Verdict(BaseModel):
    desk: str
    urgent: bool


def test_structured_output_through_the_strands_tool() -> None:
    model = ScriptedModel(["thinking...", output({"desk": "treasury", "urgent": True})])
    agent = _agent(model, structured_output_model=Verdict)

    result = agent("triage")

    assert result.structured_output == Verdict(desk="treasury", urgent=True)
    assert result.metrics.cycle_count == 2


async def test_legacy_structured_output_api() -> None:
    model = ScriptedModel([output({"desk": "ops", "urgent": False})])
    events = [
        e
        async for e in model.structured_output(
            Verdict, [{"role": "user", "content": [{"text": "q"}]}]
        )
    ]
    assert events[-1]["output"] == Verdict(desk="ops", urgent=False)

    with pytest.raises(ScriptError, match="0 output"):
        async for _ in ScriptedModel(["text"]).structured_output(
            Verdict, [{"role": "user", "content": [{"text": "q"}]}]
        ):
            pass


async def test_stream_event_shapes_and_latency() -> None:
    model = ScriptedModel([turn("hello", call("add", a=1, b=2))], latency_s=0.05)
    model.update_config(model_id="demo")
    assert model.get_config()["model_id"] == "demo"

    started = time.monotonic()
    events = [e async for e in model.stream([{"role": "user", "content": [{"text": "hi"}]}])]
    assert time.monotonic() - started >= 0.05

    assert events[0] == {"messageStart": {"role": "assistant"}}
    assert events[1] == {"contentBlockDelta": {"contentBlockIndex": 0, "delta": {"text": "hello"}}}
    assert events[3]["contentBlockStart"]["start"]["toolUse"] == {
        "toolUseId": "tooluse_0_0",
        "name": "add",
    }
    assert events[4]["contentBlockDelta"]["delta"]["toolUse"]["input"] == '{"a":1,"b":2}'
    assert events[-2] == {"messageStop": {"stopReason": "tool_use"}}
    usage = events[-1]["metadata"]["usage"]
    assert usage["totalTokens"] == usage["inputTokens"] + usage["outputTokens"]


# --------------------------------------------------------------------------------------------
# Inside a TemporalAgent workflow (real dev server, real invoke_model activities)
# --------------------------------------------------------------------------------------------


@tool
async def wf_add(a: int, b: int) -> int:
    """Add two integers (runs in workflow code, so it must be async).

    Args:
        a: First addend.
        b: Second addend.
    """
    return a + b


@workflow.defn
class ScriptedAgentWorkflow:
    @workflow.run
    async def run(self, prompt: str) -> dict[str, Any]:
        from temporalio.strands_agents import TemporalAgent

        agent = TemporalAgent(
            model="scripted",
            start_to_close_timeout=timedelta(seconds=30),
            retry_policy=RetryPolicy(maximum_attempts=2),
            tools=[wf_add],
            callback_handler=None,
        )
        result = await agent.invoke_async(prompt)
        return {
            "text": str(result).strip(),
            "cycles": result.metrics.cycle_count,
            "tool_results": [
                block["toolResult"]
                for message in agent.messages
                for block in message["content"]
                if "toolResult" in block
            ],
        }


TEMPORAL_SCRIPTS: dict[str, list[TurnLike]] = {
    "sum": [turn(call("wf_add", a=1, b=2), call("wf_add", a=10, b=20)), "3 and 30"],
}


async def test_scripted_model_inside_temporal_agent(temporal_target: str, task_queue: str) -> None:
    from temporalio.strands_agents import StrandsPlugin

    from tests.support.helpers import running_worker

    # StrandsPlugin(models=...) goes on the client only (see FIELD-NOTES).
    plugin = StrandsPlugin(models={"scripted": lambda: ScriptedModel(scripts=TEMPORAL_SCRIPTS)})
    client = await Client.connect(temporal_target, plugins=[plugin])
    workflow_id = f"scripted-{uuid.uuid4().hex[:8]}"

    async with running_worker(client, task_queue=task_queue, workflows=[ScriptedAgentWorkflow]):
        result = await client.execute_workflow(
            ScriptedAgentWorkflow.run,
            "sum",
            id=workflow_id,
            task_queue=task_queue,
            execution_timeout=timedelta(seconds=60),
        )

    assert result["text"] == "3 and 30"
    assert result["cycles"] == 2
    assert [r["toolUseId"] for r in result["tool_results"]] == ["tooluse_0_0", "tooluse_0_1"]
    assert [r["content"] for r in result["tool_results"]] == [[{"text": "3"}], [{"text": "30"}]]
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    assert model_calls(history) == 2
