"""Breakpoints and step paths in-process: the same pauses, answers and ledger as durably
(``tests/durable/plans/test_breakpoints.py`` runs the same table on the dev server)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from durable_plan.language.step_path import StepPathError
from durable_plan.local.runner import execute_plan
from durable_plan.run.breakpoints import Pause, Pauses, PlanAborted
from durable_plan.run.events import EventQueue, PlanEvent
from tests.support.breakpoint_cases import (
    AGENT,
    CALLS,
    CHAIN,
    MAP,
    SAVED,
    registry,
    scripted,
)


async def run(
    plan: dict[str, Any], breakpoints: list[str], answers: dict[str, str]
) -> tuple[Any, list[Pause], list[PlanEvent]]:
    """Run ``plan`` answering each pause by its path (``answers``; default continue)."""
    CALLS.clear()
    seen: list[Pause] = []
    events: list[PlanEvent] = []

    async def on_pause(pause: Pause) -> Any:
        seen.append(pause)
        return answers.get(pause.path, "continue")

    result = await execute_plan(
        plan,
        registry(gated=False),
        model=scripted(),
        breakpoints=breakpoints,
        on_pause=on_pause,
        on_event=events.append,
    )
    return result, seen, events


async def test_a_plain_step_pauses_with_its_bound_arguments_and_scope() -> None:
    result, seen, events = await run(CHAIN, ["b"], {})
    [pause] = seen
    assert (pause.path, pause.tool, pause.args) == ("b", "charge", {"cents": 500})
    assert pause.scope == {"steps": {"a": {"n": 5}}}
    assert result.ok and CALLS[-1] in ("fetch 500", "fetch 7")
    kinds = [(e.kind, e.step, e.status) for e in events if e.kind in ("paused", "resumed")]
    assert kinds == [("paused", "b", None), ("resumed", "b", "continue")]


async def test_skip_ends_the_step_not_taken_and_prunes_its_dependents() -> None:
    result, _seen, _ = await run(CHAIN, ["b"], {"b": "skip"})
    statuses = {o.id: o.status for o in result.ledger}
    assert statuses == {"a": "ok", "b": "not_taken", "c": "not_taken", "d": "ok"}
    assert result.outcome("b").error == "skipped at a breakpoint"
    assert "charge 500" not in CALLS


async def test_abort_ends_the_plan_cancelled_with_its_ledger() -> None:
    events = EventQueue()
    CALLS.clear()

    async def on_pause(pause: Pause) -> Any:
        return "abort"

    with pytest.raises(PlanAborted) as raised:
        await execute_plan(
            CHAIN, registry(gated=False), breakpoints=["b"], on_pause=on_pause, on_event=events
        )
    assert raised.value.path == "b"
    phases = {line["id"]: line["phase"] for line in raised.value.ledger}
    assert phases["a"] == "ok" and phases["b"] != "ok" and "charge 500" not in CALLS
    finished = [e async for e in events if e.kind == "plan_finished"]
    assert finished[0].status == "cancelled" and "aborted at breakpoint b" in (
        finished[0].error or ""
    )


async def test_a_map_step_pauses_before_each_item_addressed_by_its_path() -> None:
    result, seen, events = await run(MAP, ["m"], {"m/do.1": "skip"})
    assert sorted(p.path for p in seen) == ["m/do.0", "m/do.1", "m/do.2"]
    assert {p.path: p.scope["item"] for p in seen if p.scope} == {
        "m/do.0": 1,
        "m/do.1": 2,
        "m/do.2": 3,
    }
    out = result.returned["m"]
    assert out["results"][1] == {"not_taken": "skipped at a breakpoint"}
    assert out["not_taken"] == 1 and sorted(CALLS) == ["charge 1", "charge 3"]
    items = [e.path for e in events if e.kind == "item_finished"]
    assert sorted(items) == ["m/do.0", "m/do.2"]  # type: ignore[type-var]


async def test_an_agent_step_pauses_each_tool_call_by_its_nested_path() -> None:
    result, seen, events = await run(AGENT, ["ag"], {"ag/agent.2/charge~2": "skip"})
    assert [p.path for p in seen] == [
        "ag/agent.1/fetch",
        "ag/agent.2/charge",
        "ag/agent.2/charge~2",
    ]
    assert seen[2].args == {"cents": 20} and seen[2].scope is None
    assert CALLS == ["fetch 1", "charge 10"]
    called = result.returned["ag"]["tools_called"]
    assert [c["path"] for c in called] == [
        "ag/agent.1/fetch",
        "ag/agent.2/charge",
        "ag/agent.2/charge~2",
    ]
    tool_calls = [e.path for e in events if e.kind == "agent_tool_call"]
    assert tool_calls == ["ag/agent.1/fetch", "ag/agent.2/charge", "ag/agent.2/charge~2"]


async def test_a_pattern_names_one_call_of_an_agent() -> None:
    _result, seen, _ = await run(AGENT, ["ag/agent.*/charge~2"], {})
    assert [p.path for p in seen] == ["ag/agent.2/charge~2"]


async def test_a_pauses_handle_answers_several_open_pauses_by_path() -> None:
    CALLS.clear()
    pauses = Pauses()
    task = asyncio.ensure_future(
        execute_plan(CHAIN, registry(gated=False), breakpoints=["a", "d"], on_pause=pauses)
    )
    first, second = await pauses.next(), await pauses.next()
    assert {first.path, second.path} == {"a", "d"} and CALLS == []
    assert {p.path for p in pauses.paused()} == {"a", "d"}
    with pytest.raises(ValueError, match="no call is paused at 'b'"):
        pauses.continue_("b")
    pauses.skip("d")
    pauses.continue_("a")
    result = await task
    assert {o.id: o.status for o in result.ledger}["d"] == "not_taken"


@pytest.mark.parametrize(
    ("breakpoints", "says"),
    [(["E1"], "expected a step id"), (["e1/a.b"], "can match no segment"), ("e1", "list")],
)
async def test_a_bad_breakpoint_is_refused_before_anything_runs(
    breakpoints: Any, says: str
) -> None:
    CALLS.clear()
    with pytest.raises((StepPathError, TypeError), match=says):
        await execute_plan(CHAIN, registry(gated=False), breakpoints=breakpoints, on_pause=Pauses())
    assert CALLS == []


async def test_breakpoints_without_anyone_to_answer_are_refused() -> None:
    with pytest.raises(ValueError, match="on_pause"):
        await execute_plan(CHAIN, registry(gated=False), breakpoints=["b"])


def test_a_conversations_breakpoints_are_checked_when_the_plugin_is_made() -> None:
    from durable_plan.strands.options import StorageRelay
    from durable_plan.strands.plugin import WorkflowPlanPlugin

    with pytest.raises(StepPathError, match="can match no segment"):
        WorkflowPlanPlugin(relay=StorageRelay(plan_options={"breakpoints": ["Charge"]}))
    plugin = WorkflowPlanPlugin(relay=StorageRelay(plan_options={"breakpoints": ["e1/agent.*"]}))
    assert plugin.plan_options == {"breakpoints": ["e1/agent.*"]}


async def test_spans_carry_each_calls_path() -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from durable_plan.run.telemetry_sink import TelemetrySink

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    sink = TelemetrySink(provider.get_tracer("test"), None)
    CALLS.clear()
    await execute_plan(AGENT, registry(gated=False), model=scripted(), on_event=sink)
    await execute_plan(MAP, registry(gated=False), on_event=sink)
    spans = exporter.get_finished_spans()
    calls = [
        dict(s.attributes or {}).get("durable_plan.step.path")
        for s in spans
        if s.name.startswith("tool call")
    ]
    assert calls == ["ag/agent.1/fetch", "ag/agent.2/charge", "ag/agent.2/charge~2"]
    rounds = [
        dict(s.attributes or {}).get("durable_plan.step.path")
        for s in spans
        if s.name.startswith("agent round")
    ]
    assert rounds == ["ag/agent.1", "ag/agent.2", "ag/agent.3"]
    [map_span] = [s for s in spans if s.name == "step m"]
    items = sorted(dict(e.attributes or {})["durable_plan.step.path"] for e in map_span.events)
    assert items == ["m/do.0", "m/do.1", "m/do.2"]


async def test_a_saved_plan_step_pauses_inside_before_each_of_its_calls() -> None:
    result, seen, events = await run(SAVED, ["s"], {"s/plan.second": "skip"})
    assert [(p.path, p.args) for p in seen] == [
        ("s/plan.first", {"cents": 40}),
        ("s/plan.second", {"cents": 41}),
    ]
    assert seen[1].scope == {"steps": {"first": {"charged": 40}}, "inputs": {"cents": 40}}
    assert CALLS == ["charge 40"]
    paused = [e.path for e in events if e.kind == "paused"]
    assert paused == ["s/plan.first", "s/plan.second"]
    # A pattern can name one step inside the saved plan.
    _result, seen, _ = await run(SAVED, ["s/plan.second"], {})
    assert [p.path for p in seen] == ["s/plan.second"]
    assert result.ok and result.returned["s"] == {}  # its returned step was skipped


async def test_abort_at_an_agent_call_ends_the_plan() -> None:
    CALLS.clear()

    async def on_pause(pause: Pause) -> Any:
        if pause.path == "ag/agent.2/charge~2":
            await asyncio.sleep(5)  # still paused when its sibling aborts the plan
        return "abort" if pause.path == "ag/agent.2/charge" else "continue"

    with pytest.raises(PlanAborted) as raised:
        await execute_plan(
            AGENT, registry(gated=False), model=scripted(), breakpoints=["ag"], on_pause=on_pause
        )
    assert raised.value.path == "ag/agent.2/charge"
    assert CALLS == ["fetch 1"]
