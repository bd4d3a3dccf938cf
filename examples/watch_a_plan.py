"""Watch a plan as it runs: its step events in-process and durably (resumed after a
"disconnect"), and its spans through OpenTelemetry.

.venv/bin/durable-plan dev                      # terminal 1 (or TEMPORAL_ADDRESS=host:port)
.venv/bin/python examples/watch_a_plan.py
"""

import tempfile
from pathlib import Path

from monster_tools import ATTACK_PLAN, TOOLS

from durable_plan import (
    JsonLinesExporter,
    connect,
    execute_plan,
    plan_worker,
    run_script,
    start_plan,
    tracing_plugin,
)
from durable_plan.run.events import EventQueue
from durable_plan.temporal.client.tracing import read_spans


async def main() -> None:
    # In-process: the same events, through a callback you can iterate.
    queue = EventQueue()
    async for event in queue.run(execute_plan(ATTACK_PLAN, TOOLS, on_event=queue)):
        print("in-process:", event.kind, event.step or "", event.status or "")

    # Durably, with traces: the replay-safe tracer provider, set before connecting. Any
    # OTLP collector takes the place of the file: OTLPSpanExporter(endpoint=...).
    spans = Path(tempfile.mkdtemp()) / "spans.jsonl"
    client = await connect(plugins=[tracing_plugin(JsonLinesExporter(spans), batch=False)])
    async with plan_worker(client, task_queue="watch", registry=TOOLS):
        handle = await start_plan(client, ATTACK_PLAN, task_queue="watch", registry=TOOLS)
        seen = []
        async for event in handle.events():  # ends after plan_finished
            seen.append(event)
            if event.kind == "step_finished":
                print(f"durable: {event.offset} {event.step} {event.status}")
        await handle.result()
        # After a disconnect, the rest from the next offset: nothing twice, nothing lost.
        rest = [e async for e in handle.events(from_offset=3)]
        print("resumed at 3:", [e.offset for e in rest] == [e.offset for e in seen[3:]])
    names = sorted(s["name"] for s in read_spans(spans) if s["name"].startswith(("plan", "step")))
    print("spans:", names)


if __name__ == "__main__":
    run_script(main())
