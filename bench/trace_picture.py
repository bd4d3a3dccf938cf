"""One durable plan's trace, exported and drawn: the README's picture of what OpenTelemetry
receives.

    python -m bench.trace_picture [-o docs/trace.svg] [--spans spans.jsonl]

Starts its own dev server, turns tracing on the way an application does
(``tracing_plugin(exporter)`` before connecting), runs the demo's morale plan (four
steps over three levels, then an agent step of three model rounds and two tool calls)
durably, exports every span to a JSON-lines file (``JsonLinesExporter``) and renders
them as a waterfall SVG: one row per span, indented under its parent, bars on one time
axis. The spans are the ones any OTLP collector would receive from the same setup.
"""

from __future__ import annotations

import argparse
import asyncio
import html
import tempfile
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from temporalio.client import Client
from temporalio.strands_agents import StrandsPlugin

from activities.game_master import GAME_TOOLS
from activities.scripts import MORALE_PLAN
from durable_plan import JsonLinesExporter, start_plan, tracing_plugin
from durable_plan.server.connection import exit_now
from durable_plan.server.devserver import DevServer
from durable_plan.temporal.client.tracing import read_spans
from worker import build_worker, model_factories

SHOWN_PREFIXES = ("plan", "step ", "agent round", "tool call", "RunActivity", "RunWorkflow")
ROW_H = 18
LABEL_W = 300
BAR_W = 620
COLOURS = {
    "plan": "#4c72b0",
    "step": "#55a868",
    "agent": "#c44e52",
    "tool": "#dd8452",
    "Run": "#8c8c8c",
}


async def record(spans_file: Path) -> str:
    plugin = tracing_plugin(JsonLinesExporter(spans_file), batch=False)
    with DevServer(headless=True) as server:
        client = await Client.connect(
            server.target, plugins=[StrandsPlugin(models=model_factories()), plugin]
        )
        task_queue = f"trace-{uuid.uuid4().hex[:8]}"
        async with build_worker(client, task_queue):
            handle = await start_plan(
                client, MORALE_PLAN, task_queue=task_queue, registry=GAME_TOOLS, model="scripted"
            )
            result = await handle.result()
            assert result.ok, result.ledger
    return handle.id


def waterfall(spans: Sequence[dict[str, Any]], plan_id: str) -> str:
    """The plan's trace as SVG: rows in tree order (children after their parent, by
    start), bars scaled to the plan span."""
    plan = next(
        s
        for s in spans
        if s["name"] == "plan" and s["attributes"].get("durable_plan.plan.id") == plan_id
    )
    trace = [s for s in spans if s["trace_id"] == plan["trace_id"]]
    shown = [s for s in trace if s["name"].startswith(SHOWN_PREFIXES)]
    ids = {s["span_id"] for s in shown}
    children: dict[str | None, list[dict[str, Any]]] = {}
    by_id = {s["span_id"]: s for s in trace}
    for span in shown:
        parent = span["parent_id"]
        while parent is not None and parent not in ids:  # skip hidden spans (StartActivity)
            parent = by_id.get(parent, {}).get("parent_id")
        children.setdefault(parent, []).append(span)
    rows: list[tuple[int, dict[str, Any]]] = []

    def walk(parent: str | None, depth: int) -> None:
        for span in sorted(children.get(parent, []), key=lambda s: s["start_ns"]):
            rows.append((depth, span))
            walk(span["span_id"], depth + 1)

    walk(None, 0)
    t0 = min(s["start_ns"] for _, s in rows)
    t1 = max(s["end_ns"] for _, s in rows)
    scale = BAR_W / max(t1 - t0, 1)
    height = ROW_H * (len(rows) + 2)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{LABEL_W + BAR_W + 90}" '
        f'height="{height}" font-family="monospace" font-size="11">',
        '<rect width="100%" height="100%" fill="white"/>',
        f'<text x="4" y="12">trace of plan {html.escape(plan_id)}: {(t1 - t0) / 1e6:.0f} ms</text>',
    ]
    for n, (depth, span) in enumerate(rows):
        y = ROW_H * (n + 1) + 4
        x = LABEL_W + (span["start_ns"] - t0) * scale
        w = max((span["end_ns"] - span["start_ns"]) * scale, 1.0)
        colour = next((c for k, c in COLOURS.items() if span["name"].startswith(k)), "#999")
        if span["status"] == "ERROR":
            colour = "#d62728"
        label = html.escape(span["name"])
        ms = (span["end_ns"] - span["start_ns"]) / 1e6
        out.append(f'<text x="{4 + depth * 12}" y="{y + 12}">{label}</text>')
        out.append(
            f'<rect x="{x:.1f}" y="{y + 2}" width="{w:.1f}" height="{ROW_H - 5}" fill="{colour}"/>'
        )
        out.append(f'<text x="{x + w + 4:.1f}" y="{y + 12}">{ms:.1f} ms</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


async def main_async(args: argparse.Namespace) -> None:
    spans_file = Path(args.spans or Path(tempfile.mkdtemp()) / "spans.jsonl")
    plan_id = await record(spans_file)
    spans = read_spans(spans_file)
    svg = waterfall(spans, plan_id)
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(svg, encoding="utf-8")
    ours = [s for s in spans if s["name"].startswith(("plan", "step ", "agent", "tool call"))]
    print(f"{len(spans)} spans exported ({len(ours)} of durable-plan); {spans_file}")
    print(f"picture: {args.output}")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.trace_picture", description=__doc__)
    parser.add_argument("-o", "--output", default="docs/trace.svg")
    parser.add_argument("--spans", help="where the spans go (default: a temporary file)")
    asyncio.run(main_async(parser.parse_args(argv)))


if __name__ == "__main__":
    exit_now(main())
