"""What the Temporal web UI shows for a plan: a summary per step, a summary and details per plan.

The UI already shows each activity's type (the tool's name), so a step's summary says what the
type does not: the step id, its level, and where its arguments come from
(``attack · level 1 · armour ← steps.lookup.armour``). A plan workflow gets a one-line static
summary (its steps by level) and Markdown details (a table of the steps with their
dependencies, bindings and conditions), so a plan can be read in the UI without its input.

How much of it a plan carries is ``Visibility.ui_metadata``, because every byte of it is in
the plan's history (issue 31): "summary" (the default) gives the plan its one-line summary
and nothing per step (the UI names each activity by its step id and tool already);
"details" adds the table (about 100 bytes per step, once); "full" adds each step's summary
on its activity (about 70 bytes per step, per call). Inputs written before the option ran
with "full", and replay so.

Pure functions of a `CheckedPlan`: safe in workflow code, computed once per plan (a step's
summary is a dictionary lookup; a map item's is one string concatenation).
"""

from __future__ import annotations

from collections.abc import Mapping

from durable_plan.check import CheckedPlan, CheckedStep
from durable_plan.expressions import Expression
from durable_plan.language.step_path import StepPathError, parse

__all__ = [
    "DEFAULT_UI_METADATA",
    "MAX_DETAIL_ROWS",
    "MAX_SUMMARY_CHARS",
    "UI_METADATA",
    "StepSummaries",
    "agent_step_summary",
    "check_ui_metadata",
    "plan_details",
    "plan_metadata",
    "plan_summary",
    "step_summaries",
    "step_summary",
]

UI_METADATA = ("summary", "details", "full")
"""What the web UI gets, each adding to the one before (``Visibility.ui_metadata``)."""
DEFAULT_UI_METADATA = "summary"
MAX_SUMMARY_CHARS = 200
"""The UI shows a summary on one line; longer text is cut with an ellipsis."""
MAX_DETAIL_ROWS = 64
MAX_EXPRESSION_CHARS = 60
SEP = " · "


def _cut(text: str, limit: int) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _bindings(bind: Mapping[str, Expression]) -> str:
    return ", ".join(f"{name} ← {_cut(e.source, MAX_EXPRESSION_CHARS)}" for name, e in bind.items())


def _tail(level: int, bind: Mapping[str, Expression], when: Expression | None) -> str:
    parts = [f"level {level}"]
    if bind:
        parts.append(_bindings(bind))
    if when is not None:
        parts.append(f"when {_cut(when.source, MAX_EXPRESSION_CHARS)}")
    return SEP.join(parts)


def step_summary(cs: CheckedStep) -> str:
    """``<id> · level <n> · <arg> ← <expression>, ... · when <condition>``, one line."""
    return _cut(f"{cs.id}{SEP}{_tail(cs.level, cs.bind, cs.when)}", MAX_SUMMARY_CHARS)


class StepSummaries:
    """Every activity summary of one plan, built once when the plan starts.

    A map or reduce item (``rolls/do.3``) gets its step's body summary after its own id.
    """

    def __init__(self, checked: CheckedPlan) -> None:
        self._steps = {sid: step_summary(cs) for sid, cs in checked.steps.items()}
        self._bodies = {
            sid: _tail(cs.level, cs.body.bind, cs.body.when) + f"{SEP}item of {sid}"
            for sid, cs in checked.steps.items()
            if cs.body is not None
        }

    def of(self, step_id: str) -> str | None:
        """The summary of a step or a map item, None for an id the plan does not have."""
        found = self._steps.get(step_id)
        if found is not None:
            return found
        try:
            path = parse(step_id)
        except StepPathError:
            return None
        body = self._bodies.get(path.step) if path.index is not None else None
        return None if body is None else _cut(f"{step_id}{SEP}{body}", MAX_SUMMARY_CHARS)


def plan_summary(checked: CheckedPlan) -> str:
    """One line: the number of steps and levels, then the steps level by level.

    ``plan: 3 steps in 3 levels: lookup → attack → damage (final)``; steps of one level are
    separated by commas.
    """
    steps = len(checked.steps)
    levels = len(checked.levels)
    flags = [flag for flag in ("final",) if checked.plan.final]
    if checked.plan.on_error != "fail_fast":
        flags.append(f"on_error {checked.plan.on_error}")
    suffix = f" ({', '.join(flags)})" if flags else ""
    head = f"plan: {steps} step{'s' * (steps != 1)} in {levels} level{'s' * (levels != 1)}: "
    body = " → ".join(", ".join(level) for level in checked.levels)
    room = MAX_SUMMARY_CHARS - len(head) - len(suffix)
    return head + _cut(body, max(room, 8)) + suffix


def _cell(text: str) -> str:
    """A Markdown table cell: one line, pipes escaped, code-formatted when not empty."""
    line = _cut(text, 120).replace("|", "\\|")
    return f"`{line}`" if line else ""


def plan_details(checked: CheckedPlan) -> str:
    """Markdown: what the plan returns and how it handles failures, then one table row per
    step in level order (tool, dependencies, bindings, condition); at most 64 rows."""
    plan = checked.plan
    returns = ", ".join(checked.returns) if plan.returns is not None else "every step"
    lines = [
        f"**{len(checked.steps)} steps in {len(checked.levels)} levels**; returns {returns}; "
        f"on_error {plan.on_error}" + ("; final" if plan.final else ""),
        "",
        "| level | step | tool | after | bind | when |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    ordered = [checked.steps[sid] for level in checked.levels for sid in level]
    for cs in ordered[:MAX_DETAIL_ROWS]:
        tool = cs.step.tool
        if cs.body is not None:
            tool = f"{tool} of {cs.body.tool}"
        bind = dict(cs.bind)
        if cs.body is not None:
            bind.update({f"do.{k}": v for k, v in cs.body.bind.items()})
        after = ", ".join(cs.ordered_deps or sorted(cs.deps))
        cells = [
            str(cs.level),
            _cell(cs.id),
            _cell(tool),
            _cell(after),
            _cell(_bindings(bind)),
            _cell(cs.when.source if cs.when is not None else ""),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    if len(ordered) > MAX_DETAIL_ROWS:
        lines.append(f"\n… and {len(ordered) - MAX_DETAIL_ROWS} more steps")
    return "\n".join(lines)


def agent_step_summary(step_id: str, level: int, prompt: str) -> str:
    """An agent step's child workflow: ``agent step morale · level 3 · <prompt>``."""
    return _cut(f"agent step {step_id}{SEP}level {level}{SEP}{prompt}", MAX_SUMMARY_CHARS)


def check_ui_metadata(value: object) -> str:
    """The option as given, or a ``ValueError`` naming the choices (before anything starts)."""
    if value not in UI_METADATA:
        raise ValueError(
            f"ui_metadata: {value!r} is not one of {', '.join(map(repr, UI_METADATA))} "
            "(summary: the plan's one-line summary; details: and a table of its steps; "
            "full: and each step's summary on its activity)"
        )
    return str(value)


def plan_metadata(checked: CheckedPlan, ui_metadata: str) -> tuple[str, str | None]:
    """The plan workflow's ``static_summary`` (always) and ``static_details`` (from
    "details" on; None: none)."""
    details = plan_details(checked) if ui_metadata != "summary" else None
    return plan_summary(checked), details


def step_summaries(checked: CheckedPlan, ui_metadata: str) -> StepSummaries | None:
    """The activities' summaries of a plan that asked for them ("full"), else None."""
    return StepSummaries(checked) if ui_metadata == "full" else None
