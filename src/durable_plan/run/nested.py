"""A saved plan's call as a nested plan: what both runners share about it.

A step calling ``plan__<name>`` (``tools/saved_plans.py``) runs the saved plan as a plan of
its own: in-process a nested run of the same engine (``local/saved_plans.py``), durably a
child ``PlanWorkflow`` (``temporal/workflows/saved_plan_child.py``). Both take the call's
arguments to the plan's inputs, check the plan against the caller's catalogue (the caller's
plannable patterns and the owner's rules hold inside), and turn its result into the step's:
the saved plan's returned results, or a failure naming the inner step's path and error.
Each rule is written here once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from durable_plan.check import CheckedPlan, ToolCatalog, check_plan
from durable_plan.check.json_schema import validator_for
from durable_plan.check.saved_plans import MAX_PLAN_DEPTH, is_saved_plan, saved_plan_of
from durable_plan.language.agent_step import AGENT_TOOL
from durable_plan.language.errors import PlanRejected, StepFailure
from durable_plan.language.plan import DEFAULT_MAX_STEPS, PlanResult
from durable_plan.language.plan_limits import truncate_text
from durable_plan.language.step_path import (
    Segment,
    StepPath,
    StepPathError,
    parse,
    rooted,
)
from durable_plan.run.engine import PlanRun
from durable_plan.run.reuse import Recall, Remembered

__all__ = [
    "MAX_PLAN_DEPTH",
    "Nesting",
    "calls_from_agent",
    "check_saved_call",
    "is_saved_plan",
    "learned_within",
    "recall_within",
    "saved_plan_inputs",
    "saved_plan_outcome",
]

SAVED_PLAN_FAILED = "saved plan "
"""How a saved plan's failure starts, so a failure passed up through several saved plans
keeps the innermost path instead of repeating each level's."""


@dataclass(frozen=True)
class Nesting:
    """Where a (nested) plan runs inside the plan that was submitted, and what it carries
    down: the in-process twin of the durable inputs' ``path_prefix`` and ``breakpoints``."""

    path_prefix: str = ""
    """The path of the call that runs this plan (``e4``, ``e1/do.3``): its steps' paths are
    ``<prefix>/plan.<step id>``; empty for the plan submitted."""
    breakpoints: tuple[str, ...] = ()
    """The caller's breakpoint patterns (``language/step_path.py``): they name full paths,
    so a nested plan holds the same ones."""

    @property
    def depth(self) -> int:
        """Saved plans this run is inside (0: the plan submitted)."""
        return parse(self.path_prefix).depth + 1 if self.path_prefix else 0

    def inner(self, call_path: str) -> Nesting:
        """The nesting of the saved plan that the call at ``call_path`` (a path in this
        plan: its step id, or an item's or an agent round's path) runs."""
        return Nesting(rooted(self.path_prefix, call_path), self.breakpoints)

    def step_path(self, step_id: str) -> str:
        """The full path of this plan's step (or call) ``step_id``."""
        return rooted(self.path_prefix, step_id)

    def check_depth(self, tool: str) -> None:
        """``StepFailure`` when this nesting (the saved plan ``tool``'s run) passes
        ``MAX_PLAN_DEPTH``: the caller's check refuses that, so only a hand-written input
        gets here; both runners refuse it with these words."""
        if self.depth > MAX_PLAN_DEPTH:
            raise StepFailure(
                f"{tool} at {self.path_prefix}: saved plans nest at most {MAX_PLAN_DEPTH} "
                "deep; flatten one level (run its steps in the plan that calls it)"
            )


def saved_plan_inputs(
    tool: str, saved: Mapping[str, Any], args: Mapping[str, Any]
) -> dict[str, Any]:
    """The saved plan's inputs from the call's arguments: the schema's defaults filled in,
    then the whole checked against the schema (bound arguments are known only now);
    ``StepFailure`` names each argument that does not fit."""
    schema = saved.get("inputs")
    if not isinstance(schema, Mapping):
        schema = {"type": "object", "properties": {}}
    values = dict(args)
    properties = schema.get("properties")
    if isinstance(properties, Mapping):
        for name, prop in properties.items():
            if name not in values and isinstance(prop, Mapping) and "default" in prop:
                values[name] = prop["default"]
    validator = validator_for(schema)
    if validator is None:  # registration refused such a schema; a hand-written table may not
        raise StepFailure(f"{tool}: its inputs schema is not usable")
    errors = sorted(validator.errors(values), key=lambda e: [str(p) for p in e.path])
    if errors:
        listed = "; ".join(
            f"{'.'.join(str(p) for p in e.path) or 'arguments'}: {truncate_text(e.message, 200)}"
            for e in errors[:5]
        )
        raise StepFailure(f"{tool}: the arguments do not fit its inputs: {listed}")
    return values


def check_saved_call(
    tool: str,
    catalog: ToolCatalog,
    values: Mapping[str, Any],
    nesting: Nesting,
    *,
    durable: bool,
    max_steps: int = DEFAULT_MAX_STEPS,
) -> CheckedPlan:
    """The saved plan ``tool`` checked for this call, under the caller's catalogue; a
    rejection (the catalogue changed since it registered) or a nesting past
    ``MAX_PLAN_DEPTH`` (a hand-written input: the caller's check refuses it) is the step's
    failure, before anything of it runs."""
    nesting.check_depth(tool)
    saved = saved_plan_of(catalog, tool)
    inputs = saved.get("inputs")
    properties = inputs.get("properties") if isinstance(inputs, Mapping) else None
    try:
        return check_plan(
            saved.get("plan") or {},
            catalog=replace(catalog, plan_depth=nesting.depth),
            max_steps=max_steps,
            durable=durable,
            inputs=dict(values),
            input_names=list(properties) if isinstance(properties, Mapping) else [],
        )
    except PlanRejected as exc:
        raise StepFailure(f"{tool} cannot run here: {exc}") from None


def saved_plan_outcome(tool: str, nesting: Nesting, result: PlanResult) -> Any:
    """The step's result: the saved plan's returned results; ``StepFailure`` when the
    saved plan did not end ok, naming the inner step's full path and its error."""
    if result.ok:
        return dict(result.returned)
    failed = result.failures[0] if result.failures else None
    if failed is not None and failed.error and failed.error.startswith(SAVED_PLAN_FAILED):
        raise StepFailure(failed.error)  # the innermost saved plan's words, path and all
    if failed is not None:
        where, error = nesting.step_path(failed.id), failed.error or "failed"
    elif result.exited is not None:
        where = nesting.step_path(str(result.exited.get("step")))
        error = f"exited with status error: {result.exited.get('message', '')}"
    else:
        skipped = next((o for o in result.ledger if o.status == "skipped"), None)
        where = nesting.step_path(skipped.id) if skipped is not None else nesting.path_prefix
        error = (skipped.error if skipped is not None else None) or "skipped"
    raise StepFailure(truncate_text(f"{SAVED_PLAN_FAILED}{tool} failed at {where}: {error}"))


def recall_within(recall: Recall | None, call_path: str) -> Recall | None:
    """What a saved plan called at ``call_path`` may reuse: the caller's remembered steps
    of that call's earlier runs (``<call_path>/plan.<step>``), named as the saved plan's own
    run names them; None when the caller remembers nothing (outside a conversation)."""
    if recall is None:
        return None
    entries = []
    for entry in recall.entries.values():
        inner = _inside(call_path, entry.step)
        if inner is not None:
            entries.append(replace(entry, step=inner))
    return Recall(entries, plan=recall.plan, reusable=recall.reusable, max_bytes=recall.max_bytes)


def learned_within(call_path: str, learned: Iterable[Remembered]) -> list[Remembered]:
    """What a saved plan called at ``call_path`` learned, named by the caller's paths."""
    return [replace(entry, step=rooted(call_path, entry.step)) for entry in learned]


def _inside(call_path: str, path: str) -> str | None:
    """``path`` as the run of the saved plan called at ``call_path`` names it, or None
    when it is not inside that call."""
    try:
        outer, full = parse(call_path), parse(path)
    except StepPathError:
        return None
    n = len(outer.segments)
    if len(full.segments) <= n or full.segments[:n] != outer.segments:
        return None
    first = full.segments[n]
    if first.kind != "saved_step":
        return None
    return str(StepPath((Segment("step", first.value), *full.segments[n + 1 :])))


def calls_from_agent(caller: PlanRun, call_path: str) -> bool:
    """Whether the call at ``call_path`` of ``caller`` is an agent step's:
    such calls are the model's, never reused, in-process as durably (an agent step's child
    has no memory)."""
    try:
        top = parse(call_path).step
    except StepPathError:
        return True
    cs = caller.checked.steps.get(top)
    if cs is None:
        return True
    return AGENT_TOOL in (cs.step.tool, cs.body.tool if cs.body is not None else None)
