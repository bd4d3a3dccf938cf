"""What each step's result looks like, as far as the check can know before it runs.

A tool step's result has its tool's declared shape (``ToolSpec.output_schema``); the
step kinds' results are ours, so their shapes are known exactly: an agent step's
``{"output", "iterations", "tools_called", "final"}`` with ``output`` as its
``output_schema`` says (a model's schema: compacted under the same bounds as a server's),
a map's ``{"count", "results", "failed", "not_taken"}`` whose slots are its body's results
(or ``{"not_taken"}`` / ``{"error"}`` / ``{"skipped"}``), a reduce's ``{"count",
"result"}`` where the result is the body's, or ``initial`` when there were no items.
Unknown (None): an exit, a tool without a declared shape, a tool the catalogue lacks.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from durable_plan.check.catalog import ToolCatalog
from durable_plan.check.shapes.compact import compact_shape, literal_shape
from durable_plan.check.shapes.walk import Rooted
from durable_plan.language.agent_step import AGENT_TOOL
from durable_plan.language.control_steps import MAP, REDUCE
from durable_plan.language.plan import Step

_INTEGER = {"type": "integer"}


@dataclass(frozen=True)
class ResultShape:
    """A step's result shape and who decides it, for messages ("look_up_monster returns")."""

    shape: Rooted
    source: str


def step_result_shape(step: Step, catalog: ToolCatalog | None) -> ResultShape | None:
    """The shape of ``step``'s result, or None when nothing is known of it."""
    if step.tool in (MAP, REDUCE):
        body: Any = step.args.get("do")
        mapping = isinstance(body, Mapping)
        inner = _call_shape(body.get("tool"), body.get("args"), catalog) if mapping else None
        part: Any = inner.shape if inner is not None else {}
        if step.tool == MAP:
            return ResultShape(Rooted(_map_result(part), None), "a map step returns")
        if "initial" in step.bind:
            initial: dict[str, Any] = {}  # bound: known only when it runs
        elif "initial" in step.args:
            initial = literal_shape(step.args["initial"])
        else:
            initial = {"type": "null"}
        return ResultShape(Rooted(_reduce_result(part, initial), None), "a reduce step returns")
    return _call_shape(step.tool, step.args, catalog)


def _call_shape(tool: Any, args: Any, catalog: ToolCatalog | None) -> ResultShape | None:
    if tool == AGENT_TOOL:
        schema = args.get("output_schema") if isinstance(args, Mapping) else None
        return ResultShape(Rooted(agent_result(schema), None), "an agent step returns")
    if catalog is None or not isinstance(tool, str):
        return None
    spec = catalog.tools.get(tool)
    if spec is None or spec.output_schema is None:
        return None
    return ResultShape(Rooted(spec.output_schema, spec.output_schema), f"{tool} returns")


def agent_result(output_schema: Any) -> dict[str, Any]:
    """An agent step's result; ``output`` as the step's ``output_schema`` says (or ``{}``,
    which any object schema without required fields allows)."""
    output = compact_shape(output_schema) if isinstance(output_schema, Mapping) else None
    return _closed(
        {
            "output": Rooted(output, output) if output is not None else {"type": "object"},
            "iterations": _INTEGER,
            "tools_called": {"type": "array"},
            "final": {"type": "boolean"},
            "usage": {},
        }
    )


def _map_result(body: Any) -> dict[str, Any]:
    slot = {
        "anyOf": [
            body,
            _closed({"not_taken": {"type": "string"}}),
            _closed({"error": {"type": "string"}}),
            _closed({"skipped": {"type": "string"}}),
        ]
    }
    return _closed(
        {
            "count": _INTEGER,
            "results": {"type": "array", "items": slot},
            "failed": _INTEGER,
            "not_taken": _INTEGER,
        }
    )


def _reduce_result(body: Any, initial: dict[str, Any]) -> dict[str, Any]:
    return _closed({"count": _INTEGER, "result": {"anyOf": [body, initial]}})


def _closed(properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "additionalProperties": False}
