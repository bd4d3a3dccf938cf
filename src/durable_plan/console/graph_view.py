"""A plan's DAG for the page: the nodes and edges of ``durable-plan graph``, placed.

The same reading of the plan as the CLI's picture (``cli.graph.nodes``/``edges``: the
dependencies the engine honours, ``when`` labels, ``join: any`` dashed, returned steps
heavy) and the same layout: levels left to right, a level's steps top to bottom. Each
edge also names the arguments it feeds (``armour ← steps.lookup.armour``), which is what
a person wants to know about an edge. The plan is checked from the workflow's recorded
input, as the workflow checked it.
"""

from __future__ import annotations

from typing import Any

from durable_plan.check import CheckedPlan
from durable_plan.cli.graph import edges, nodes
from durable_plan.console.bounds import cut_text
from durable_plan.temporal.wire.workflow_inputs import PlanInput
from durable_plan.temporal.workflows.plan_request import recorded_check, recorded_recall

COLUMN = 220
ROW = 74
NODE_W = 180
NODE_H = 52
MAX_LABEL = 80


def checked_from_input(raw: Any) -> CheckedPlan:
    """The plan as the workflow checked it (``PlanWorkflow._check``): its recorded tool
    table, models, prior steps and inputs."""
    request = PlanInput.from_wire(raw)
    return recorded_check(request, recorded_recall(request))


def _feeds(checked: CheckedPlan, source: str, target: str) -> list[str]:
    """The arguments of ``target`` (and of its map body) that read ``source``."""
    cs = checked.steps[target]
    bind = dict(cs.bind)
    if cs.body is not None:
        bind.update({f"do.{k}": v for k, v in cs.body.bind.items()})
    return [
        cut_text(f"{name} ← {expr.source}", MAX_LABEL) or ""
        for name, expr in bind.items()
        if source in expr.refs
    ]


def layout(checked: CheckedPlan) -> dict[str, Any]:
    """Nodes with their place (x, y), kind, level and tool; edges with their labels."""
    place: dict[str, tuple[int, int]] = {}
    for column, level in enumerate(checked.levels):
        for row, sid in enumerate(level):
            place[sid] = (column * COLUMN, row * ROW)
    out_nodes = []
    for node in nodes(checked):
        x, y = place.get(node.id, (0, 0))
        cs = checked.steps[node.id]
        out_nodes.append(
            {
                "id": node.id,
                "tool": cs.step.tool,
                "lines": [cut_text(line, MAX_LABEL) for line in node.lines[1:]],
                "kind": node.kind,
                "returned": node.returned,
                "level": cs.level,
                "x": x,
                "y": y,
            }
        )
    out_edges = [
        {
            "from": edge.source,
            "to": edge.target,
            "when": " ".join(edge.label),
            "dashed": edge.dashed,
            "binds": _feeds(checked, edge.source, edge.target),
        }
        for edge in edges(checked)
    ]
    height = max((len(level) for level in checked.levels), default=1) * ROW
    return {
        "nodes": out_nodes,
        "edges": out_edges,
        "width": max(len(checked.levels), 1) * COLUMN,
        "height": height,
        "node_w": NODE_W,
        "node_h": NODE_H,
    }


def layout_from_steps(steps: list[dict[str, Any]]) -> dict[str, Any]:
    """A graph without the plan (its input sealed, no keys): the steps the history or the
    events name, by level, without edges (the dependencies are in the sealed plan)."""
    levels: dict[int, list[str]] = {}
    for step in steps:
        levels.setdefault(int(step.get("level") or 0), []).append(str(step["id"]))
    out_nodes = []
    for column, level in enumerate(sorted(levels)):
        for row, sid in enumerate(levels[level]):
            tool = next((s.get("tool") for s in steps if s["id"] == sid), "")
            out_nodes.append(
                {
                    "id": sid,
                    "tool": tool,
                    "lines": [tool],
                    "kind": "tool",
                    "returned": False,
                    "level": level,
                    "x": column * COLUMN,
                    "y": row * ROW,
                }
            )
    height = max((len(v) for v in levels.values()), default=1) * ROW
    return {
        "nodes": out_nodes,
        "edges": [],
        "width": max(len(levels), 1) * COLUMN,
        "height": height,
        "node_w": NODE_W,
        "node_h": NODE_H,
    }
