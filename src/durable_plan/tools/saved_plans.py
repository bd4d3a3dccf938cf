"""Saved plans as tools: a plan file its owner registers, called as ``plan__<name>``.

A saved plan is a plan (``steps``, ``returns``, ...) with a declared ``inputs`` schema, as
the command line's plan files have (``check/plan_file``). Registering it
(``ToolRegistry.add_plan``) checks it once, against the registry's tools as they are then:
a broken saved plan never registers, and the error is the check's, located in the file.
It then is a tool like any other to the check and to a model: its input schema is the
plan's inputs, its return shape an object of its returned steps' result shapes, so a
caller's arguments and reads are checked before anything runs. What it runs is the plan
itself, carried in its options (``ToolOptions.saved_plan``): a run that calls it runs a
nested plan (in-process ``local/saved_plans.py``, durably a child ``PlanWorkflow``), never
an activity. Only the owner registers saved plans: nothing in the plan language can.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from durable_plan.check import ToolCatalog
from durable_plan.check.plan_file.checking import check_plan_file
from durable_plan.check.plan_file.inputs import inputs_schema_problems
from durable_plan.check.plan_file.reading import load_plan_file
from durable_plan.check.plan_file.records import META_FIELDS, PlanFile, PlanFileError
from durable_plan.check.saved_plans import PLAN_TOOL_PREFIX
from durable_plan.check.shapes.compact import compact_shape
from durable_plan.check.shapes.results import step_result_shape
from durable_plan.language.options import ToolOptions
from durable_plan.language.plan import Plan
from durable_plan.tools.registered_tool import Tool

PLAN_FILE_SUFFIXES = (".yaml", ".yml", ".json")
DEFAULT_PLAN_TIMEOUT_S = 3600.0
"""The most a saved plan's call may take as a whole (its steps keep their own timeouts);
the owner may set less or more at registration (``add_plan(timeout_s=...)``)."""
NO_INPUTS: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}
"""The input schema of a saved plan that declares no inputs: it takes no arguments."""

_NAME = re.compile(r"^[a-z][a-z0-9_]{0,57}$")

SavedPlanSource = str | Path | Plan | Mapping[str, Any]


def saved_plan_tool(
    source: SavedPlanSource,
    catalog: ToolCatalog,
    *,
    name: str | None = None,
    description: str | None = None,
    timeout_s: float | None = None,
) -> Tool:
    """The tool ``plan__<name>`` for the saved plan ``source`` (a plan file's path, a
    ``Plan``, or a plan file's content as a mapping), checked against ``catalog``;
    ``PlanFileError`` names every problem (a broken saved plan never registers)."""
    pf = _plan_file(source, name)
    plain = name if name is not None else Path(pf.path).stem.replace("-", "_").lower()
    if not _NAME.match(plain):
        raise ValueError(
            f"saved plan name {plain!r}: use lowercase letters, digits and _, starting with a "
            "letter, at most 58 characters (add_plan(name=...))"
        )
    if not isinstance(pf.plan.get("returns"), list) or not pf.plan["returns"]:
        raise PlanFileError(
            [
                pf.problem(
                    "a saved plan must declare `returns`: the steps whose results its callers get",
                    "add `returns: [<step id>, ...]`",
                    path=("returns",),
                )
            ]
        )
    checked = check_plan_file(pf, catalog=catalog, durable=True)
    schema = dict(pf.inputs_schema) if pf.inputs_schema is not None else dict(NO_INPUTS)
    returned: dict[str, Any] = {}
    for sid in checked.returns:
        shape = step_result_shape(checked.steps[sid].step, catalog)
        returned[sid] = _plain_shape(shape.shape.node if shape is not None else None)
    output = compact_shape(
        {"type": "object", "properties": returned, "additionalProperties": False}
    )
    tool_name = f"{PLAN_TOOL_PREFIX}{plain}"
    text = (
        description
        or pf.description
        or (
            f"Runs the saved plan '{plain}' and returns the results of its steps "
            f"{', '.join(checked.returns)}."
        )
    )
    options = ToolOptions(
        timeout_s=timeout_s if timeout_s is not None else DEFAULT_PLAN_TIMEOUT_S,
        retries=0,  # never retried as a whole: its steps retry under their own rules
        input_schema=schema,
        description=text,
        kind="plan",
        output_schema=output,
        saved_plan={"plan": pf.plan, "inputs": schema},
    )
    return Tool(tool_name, text, schema, "plan", None, options)


def _plain_shape(node: Any) -> Any:
    """A returned step's shape as plain JSON for the tool table, or ``{}`` (unknown): one
    with local references would resolve them against another root here, and a step kind's
    shape may embed its body's (a map's), which is not plain JSON."""
    try:
        text = json.dumps(node)
    except (TypeError, ValueError):
        return {}
    return node if node is not None and "$ref" not in text else {}


def plan_files(directory: str | Path) -> list[Path]:
    """The plan files of ``directory`` (not its subdirectories), in name order."""
    folder = Path(directory)
    if not folder.is_dir():
        raise ValueError(f"{folder}: not a directory of plan files")
    return sorted(p for p in folder.iterdir() if p.is_file() and p.suffix in PLAN_FILE_SUFFIXES)


def _plan_file(source: SavedPlanSource, name: str | None) -> PlanFile:
    if isinstance(source, str | Path):
        return load_plan_file(source)
    label = f"<saved plan {name or '?'}>"
    data: Mapping[str, Any] = (
        source.model_dump(mode="json", exclude_defaults=True)
        if isinstance(source, Plan)
        else source
    )
    plan = {k: v for k, v in data.items() if k not in META_FIELDS}
    draft = PlanFile(label, plan)
    schema = data.get("inputs")
    problems = inputs_schema_problems(draft, schema) if schema is not None else []
    text = data.get("description")
    return PlanFile(
        label,
        plan,
        description=text if isinstance(text, str) else None,
        inputs_schema=dict(schema) if isinstance(schema, Mapping) else None,
        problems=tuple(problems),
    )
