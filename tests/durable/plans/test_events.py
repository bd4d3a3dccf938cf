"""Step events: one vocabulary from both runners; durably a Workflow Stream a caller can
resume; replay and a worker killed mid-plan publish nothing twice."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from temporalio.client import Client
from temporalio.strands_agents import StrandsPlugin

from activities.scripts import DEMO_SCRIPTS, MORALE_PROMPT
from durable_plan import plan_worker, start_plan
from durable_plan.local import execute_plan
from durable_plan.run.events import EventQueue, PlanEvent
from durable_plan.temporal.client.subscribe import conversation_events
from durable_plan.temporal.client.tracing import read_spans
from durable_plan.testing import ScriptedModel
from durable_plan.tools.registry import ToolRegistry
from tests.durable.faults.test_crash import STEPS, wait_for_kill_point
from tests.support.crash_tools import crash_plan, crash_registry
from tests.support.crash_worker import SPANS_ENV
from tests.support.worker_processes import kill_and_replace, worker_processes
from worker import build_worker
from workflows.game_master import GameMasterInput, GameMasterWorkflow


async def add(a: int, b: int) -> dict[str, int]:
    return {"sum": a + b}


async def nap(seconds: float) -> dict[str, float]:
    await asyncio.sleep(seconds)
    return {"slept": seconds}


async def fail(reason: str) -> None:
    raise ValueError(reason)


def registry() -> ToolRegistry:
    reg = ToolRegistry()
    reg.add(add)
    reg.add(nap)
    reg.add(fail, retries=0)
    return reg


PLAN: dict[str, Any] = {
    "steps": [
        {"id": "a", "tool": "add", "args": {"a": 1, "b": 2}},
        {"id": "b", "tool": "add", "args": {"b": 10}, "bind": {"a": "steps.a.sum"}},
        {
            "id": "m",
            "tool": "map",
            "args": {
                "over": [1, 2, 3],
                "do": {"tool": "add", "args": {"b": 1}, "bind": {"a": "item"}},
            },
        },
        {"id": "c", "tool": "fail", "args": {"reason": "no"}, "after": ["b"]},
        {"id": "d", "tool": "add", "args": {"a": 0, "b": 0}, "after": ["c"]},
    ],
    "on_error": "continue",
}


def shape(events: list[PlanEvent]) -> dict[str | None, list[tuple[Any, ...]]]:
    """What must be the same in both runners: each step's events in order, with kinds and
    statuses (not times; steps that run at once may interleave differently)."""
    by_step: dict[str | None, list[tuple[Any, ...]]] = {}
    for e in events:
        by_step.setdefault(e.step, []).append((e.kind, e.tool, e.status, e.item, e.error))
    for lines in by_step.values():
        # Items run at once and may end in either order: between their step's start and
        # finish, in any order.
        items = sorted(line for line in lines if line[0] == "item_finished")
        if items:
            first = next(n for n, line in enumerate(lines) if line[0] == "item_finished")
            rest = [line for line in lines if line[0] != "item_finished"]
            lines[:] = rest[:first] + items + rest[first:]
    return by_step


async def test_in_process_events_through_a_queue() -> None:
    queue = EventQueue()
    events = [
        e async for e in queue.run(execute_plan(PLAN, registry(), on_event=queue, plan_id="p1"))
    ]
    result = queue.result
    assert result is not None
    kinds = [e.kind for e in events]
    assert kinds[0] == "plan_started" and kinds[-1] == "plan_finished"
    assert {e.plan for e in events} == {"p1"}
    finished = {e.step: e.status for e in events if e.kind == "step_finished"}
    assert finished == {"a": "ok", "b": "ok", "m": "ok", "c": "failed", "d": "skipped"}
    assert [e.item for e in events if e.kind == "item_finished"] == [0, 1, 2]
    assert events[-1].status == "failed" and not result.ok
    started = [e.step for e in events if e.kind == "step_started"]
    assert started == ["a", "m", "b", "c"]  # a and m have no dependencies


async def test_durable_events_match_in_process(client: Client, task_queue: str) -> None:
    local: list[PlanEvent] = []
    await execute_plan(PLAN, registry(), on_event=local.append)
    async with plan_worker(client, task_queue=task_queue, registry=registry()):
        handle = await start_plan(client, PLAN, task_queue=task_queue, registry=registry())
        durable = [e async for e in handle.events()]
        await handle.result()
        # Resuming after a "disconnect" (a closed plan's events are read by query, which
        # a worker answers): the rest, from the next offset, nothing twice.
        rest = [e async for e in handle.events(from_offset=3)]
    assert shape(durable) == shape(local)
    assert durable[0].kind == "plan_started" and durable[-1].kind == "plan_finished"
    assert [e.offset for e in durable] == list(range(len(durable)))
    assert {e.plan for e in durable} == {handle.id}
    assert [e.offset for e in rest] == list(range(3, len(durable)))


# -- a worker killed mid-plan: every event once, in order; every span once ------------------


async def test_a_worker_killed_mid_plan_publishes_nothing_twice(
    client: Client,
    temporal_target: str,
    task_queue: str,
    workflow_id: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    spans_file = tmp_path / "spans.jsonl"
    monkeypatch.setenv(SPANS_ENV, str(spans_file))
    log = tmp_path / "side-effects.jsonl"
    async with worker_processes(temporal_target, task_queue, log, tmp_path) as spawn:
        first = await spawn()
        handle = await start_plan(
            client,
            crash_plan(fast="c1"),
            task_queue=task_queue,
            registry=crash_registry(),
            workflow_id=workflow_id,
            retry_initial_interval_s=0.2,
        )
        seen: list[PlanEvent] = []

        async def subscribe() -> None:
            async for event in handle.events():
                seen.append(event)

        subscriber = asyncio.create_task(subscribe())
        _second, result = await kill_and_replace(
            spawn, first, handle, log, wait_for_kill_point(handle, log, "c2")
        )
        await asyncio.wait_for(subscriber, 30)
    assert result.ok, result.ledger
    assert [e.offset for e in seen] == list(range(len(seen))), "contiguous offsets"
    finishes = [e.step for e in seen if e.kind == "step_finished"]
    assert sorted(finishes) == sorted(STEPS), f"each step's finish once: {finishes}"
    assert finishes.index("a") < finishes.index("b") < finishes.index("d") < finishes.index("e")
    assert seen[0].kind == "plan_started" and seen[-1].kind == "plan_finished"
    assert len(seen) == 2 + 2 * len(STEPS)
    c2 = next(e for e in seen if e.kind == "step_finished" and e.step == "c2")
    assert c2.attempts == 2, "the killed step's second attempt finished it"

    # Spans from both workers: one plan span and one span per step, none twice, all in
    # one trace (the killed worker exported what had ended; the new one replayed the
    # rest without ending any of it again).
    spans = read_spans(spans_file)
    plan_spans = [s for s in spans if s["name"] == "plan"]
    step_spans = [
        s["attributes"].get("durable_plan.step.id") for s in spans if s["name"].startswith("step ")
    ]
    assert len(plan_spans) == 1, plan_spans
    assert sorted(step_spans) == sorted(STEPS), step_spans
    assert len({s["span_id"] for s in spans}) == len(spans), "no span exported twice"
    ours = [s for s in spans if s["name"] == "plan" or s["name"].startswith("step ")]
    assert len({s["trace_id"] for s in ours}) == 1
    by_step = {
        s["attributes"]["durable_plan.step.id"]: s for s in spans if s["name"].startswith("step ")
    }
    assert by_step["c2"]["attributes"]["durable_plan.attempts"] == 2
    assert all(s["parent_id"] == plan_spans[0]["span_id"] for s in by_step.values())
    # The activities the plan started are traced under their steps.
    runs = [s for s in spans if s["name"].startswith("RunActivity")]
    step_ids = {s["span_id"] for s in by_step.values()}
    starts = {s["span_id"]: s for s in spans if s["name"].startswith("StartActivity")}
    assert runs and all(
        starts.get(r["parent_id"], {}).get("parent_id") in step_ids for r in runs
    ), [(r["name"], r["parent_id"]) for r in runs]


# -- a conversation's plans, followed by its caller ---------------------------------------


async def test_a_conversation_caller_sees_its_plans_steps_and_what_they_cost(
    temporal_target: str, task_queue: str
) -> None:
    """The game master's conversation announces its plan; the caller follows the plan's
    steps, the agent step's rounds included, before the answer; the answer carries the
    tokens of the conversation and of the agent step."""
    model = {"scripted": lambda: ScriptedModel(scripts=DEMO_SCRIPTS)}
    client = await Client.connect(temporal_target, plugins=[StrandsPlugin(models=model)])
    seen: list[PlanEvent] = []
    async with build_worker(client, task_queue):
        handle = await client.start_workflow(
            GameMasterWorkflow.run,
            GameMasterInput(prompt=MORALE_PROMPT),
            id=f"gm-events-{task_queue}",
            task_queue=task_queue,
        )

        async def follow() -> None:
            async for event in conversation_events(client, handle.id):
                seen.append(event)

        follower = asyncio.create_task(follow())
        output = await handle.result()
        await asyncio.wait_for(follower, 20)
    finished = [e.step for e in seen if e.kind == "step_finished"]
    assert "morale" in finished and seen[-1].kind == "plan_finished"
    rounds = [e for e in seen if e.kind == "agent_round" and e.step == "morale"]
    assert [e.round for e in rounds] == list(range(1, len(rounds) + 1)) and rounds
    assert all(e.usage and e.usage["total"] > 0 for e in rounds)
    assert {e.plan for e in seen} == {f"{handle.id}/plan/{seen[0].plan.rsplit('/', 1)[-1]}"}
    morale = next(e for e in seen if e.kind == "step_finished" and e.step == "morale")
    assert morale.usage == {
        k: sum(e.usage[k] for e in rounds if e.usage) for k in ("input", "output", "total")
    }
    assert output.agent_step_tokens == morale.usage
    assert output.conversation_tokens and output.conversation_tokens["total"] > 0


# -- spans and metrics in-process: the same sink the workflows use --------------------------


async def test_in_process_spans_and_metrics_from_the_events() -> None:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from durable_plan.run.telemetry_sink import TelemetrySink

    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    meter = MeterProvider(metric_readers=[reader]).get_meter("test")
    sink = TelemetrySink(tracer_provider.get_tracer("test"), meter)
    result = await execute_plan(PLAN, registry(), on_event=sink, plan_id="p-spans")
    spans = {s.name: s for s in exporter.get_finished_spans()}
    assert set(spans) == {"plan", "step a", "step b", "step m", "step c"}
    plan = spans["plan"]
    assert plan.attributes is not None and plan.attributes["durable_plan.plan.id"] == "p-spans"
    assert plan.status.status_code.name == "ERROR"
    for name in ("step a", "step b", "step m", "step c"):
        span = spans[name]
        assert span.parent is not None and span.parent.span_id == plan.context.span_id
        assert span.attributes is not None and span.attributes["durable_plan.tool"]
    c = spans["step c"]
    assert c.status.status_code.name == "ERROR" and "no" in (c.status.description or "")
    assert [e.name for e in c.events] == ["exception"]
    assert [e.attributes["index"] for e in spans["step m"].events if e.attributes] == [0, 1, 2]
    assert any(e.name == "step d skipped" for e in plan.events), "a skipped step marks the plan"
    assert not result.ok

    data = reader.get_metrics_data()
    assert data is not None
    points: dict[str, list[Any]] = {}
    for rm in data.resource_metrics:
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                points[metric.name] = list(metric.data.data_points)
    started = {p.attributes["tool"]: p.value for p in points["durable_plan.steps.started"]}
    assert started == {"add": 2, "map": 1, "fail": 1}
    assert [p.value for p in points["durable_plan.steps.failed"]] == [1]
    assert [p.value for p in points["durable_plan.plans.started"]] == [1]
    finished = {p.attributes["status"]: p.value for p in points["durable_plan.plans.finished"]}
    assert finished == {"failed": 1}
    assert sum(p.count for p in points["durable_plan.step.duration"]) == 4


async def test_the_cli_table_follows_the_events_to_the_final_ledger() -> None:
    """``show --watch`` and ``run`` draw each event's ledger (``follow_events``): the last
    drawing is the plan's ledger."""
    from durable_plan.cli.event_watch import follow_events

    drawn: list[list[dict[str, Any]]] = []

    async def no_query() -> None:
        return None

    queue = EventQueue()
    plan = asyncio.ensure_future(execute_plan(PLAN, registry(), on_event=queue))
    await follow_events(aiter(queue), no_query, drawn.append)
    result = await plan
    last = {line["id"]: line["phase"] for line in drawn[-1]}
    assert last == {o.id: o.status for o in result.ledger}
    assert any(line["phase"] == "running" for lines in drawn for line in lines)


async def test_a_plan_without_events_publishes_none(client: Client, task_queue: str) -> None:
    async with plan_worker(client, task_queue=task_queue, registry=registry()):
        handle = await start_plan(
            client, PLAN, task_queue=task_queue, registry=registry(), stream_events=False
        )
        await handle.result()
        assert [e async for e in handle.events()] == []


async def test_a_plan_that_ends_as_a_whole_says_so_once_in_both_runners(
    client: Client, task_queue: str
) -> None:
    """Cancelled mid-step: plan_finished(cancelled) in-process and durably, the running
    step's span ended with it; a rejected plan: plan_finished(rejected), nothing started."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from durable_plan.language.errors import PlanRejected
    from durable_plan.run.telemetry_sink import TelemetrySink

    plan = {
        "steps": [
            {"id": "a", "tool": "add", "args": {"a": 1, "b": 1}},
            {"id": "b", "tool": "nap", "args": {"seconds": 2}, "after": ["a"]},
        ]
    }
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    sink = TelemetrySink(provider.get_tracer("test"), None)
    local: list[PlanEvent] = []

    def both(event: PlanEvent) -> None:
        local.append(event)
        sink(event)

    running = asyncio.ensure_future(execute_plan(plan, registry(), on_event=both))
    while not any(e.kind == "step_started" and e.step == "b" for e in local):
        await asyncio.sleep(0.01)
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    assert [(e.kind, e.status) for e in local if e.kind == "plan_finished"] == [
        ("plan_finished", "cancelled")
    ]
    spans = {s.name: s for s in exporter.get_finished_spans()}
    assert set(spans) == {"plan", "step a", "step b"}, "no span left open"
    assert spans["step b"].status.status_code.name == "ERROR"

    rejected: list[PlanEvent] = []
    with pytest.raises(PlanRejected):
        await execute_plan(
            {"steps": [{"id": "x", "tool": "nope"}]}, registry(), on_event=rejected.append
        )
    assert [(e.kind, e.status) for e in rejected] == [("plan_finished", "rejected")]

    async with plan_worker(client, task_queue=task_queue, registry=registry()):
        handle = await start_plan(client, plan, task_queue=task_queue, registry=registry())
        seen: list[PlanEvent] = []

        async def follow() -> None:
            async for event in handle.events():
                seen.append(event)
                if event.kind == "step_started" and event.step == "b":
                    await handle.handle.cancel()

        await asyncio.wait_for(follow(), 30)
    ends = [(e.kind, e.status) for e in seen if e.kind == "plan_finished"]
    assert ends == [("plan_finished", "cancelled")], seen


_EVENT_VALUES = {
    "step": st.text(max_size=5),
    "tool": st.text(max_size=5),
    "level": st.integers(0, 9),
    "status": st.sampled_from(["ok", "failed"]),
    "duration_ms": st.floats(0, 10),
    "attempts": st.integers(1, 3),
    "error": st.text(max_size=5),
    "usage": st.fixed_dictionaries({"total": st.integers(0, 9)}),
    "detail": st.fixed_dictionaries({"n": st.integers(0, 9)}),
}


@given(st.fixed_dictionaries({}, optional=_EVENT_VALUES))
def test_an_event_made_fast_is_the_event_the_constructor_makes(values: dict[str, Any]) -> None:
    made = PlanEvent.made("step_finished", "p", 1.5, dict(values))
    built = PlanEvent(kind="step_finished", plan="p", at=1.5, **values)
    assert made == built and made.to_wire() == built.to_wire()
    assert list(made.to_wire())[:3] == ["kind", "plan", "at"]
    with pytest.raises(TypeError, match="no field 'nope'"):
        PlanEvent.made("step_finished", "p", 1.5, {"nope": 1})
