"""A step's arguments from the results so far: ``when``, prompt templates and ``bind``.

The step and a map's or reduce's items bind the same way, through the one ``Binder`` of
their plan run, so a plan's expressions share one evaluation budget and one rule about
results stored by reference. Apart from the engine because binding is what a plan's
expressions do, and the engine is what the runners drive; nothing here decides what runs
next. No I/O and no clock: workflow code.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from durable_plan import expressions
from durable_plan.check import CheckedPlan, CheckedStep
from durable_plan.expressions.templates import Template
from durable_plan.language.agent_step import AGENT_TOOL
from durable_plan.language.control_steps import CONTROL
from durable_plan.language.errors import StepError
from durable_plan.language.plan_limits import ExpressionLimits, LimitExceeded, brief
from durable_plan.run.references import read_inside_message, unwrapped_reference_message
from durable_plan.run.reuse import PRIOR, Recall

__all__ = ["Binder"]


class Binder:
    """Evaluates one plan run's expressions over the results that run has so far.

    ``results`` and ``stored`` are the run's own (a step's result and whether it holds a
    stored reference), shared rather than copied, so a binding sees each result as soon as
    the run records it.
    """

    def __init__(
        self,
        checked: CheckedPlan,
        limits: ExpressionLimits,
        results: Mapping[str, Any],
        stored: set[str],
        recall: Recall | None,
        reads_references: Callable[[str], bool] | None,
    ) -> None:
        self._checked = checked
        self._budget = expressions.Budget(limits)
        self._results = results
        self._stored = stored
        self._recall = recall
        self._reads_references = reads_references

    def receives_references(self, tool: str) -> bool:
        """May a step (or a map item) calling ``tool`` be handed a stored result whole?

        The one rule, for steps and items: only a tool call whose runner reads the
        value; control steps and agent steps compute over their inputs in workflow code,
        which cannot see inside a reference (``references.py``)."""
        if tool in CONTROL or tool == AGENT_TOOL:
            return False
        return self._reads_references is None or self._reads_references(tool)

    def scope_of(self, cs: CheckedStep) -> dict[str, Any]:
        """What a step's expressions see: only its own dependencies, in plan order.

        jsonata walks its whole input on every evaluation, and a dynamic read
        (steps.*, declared through after) must see what it declared, not
        whichever other steps happen to have finished.
        """
        results = self._results
        scope: dict[str, Any] = {
            "steps": {dep: results[dep] for dep in cs.ordered_deps if dep in results}
        }
        if cs.prior_reads and self._recall is not None:
            scope[PRIOR] = self._recall.prior_scope(cs.prior_reads)
        inputs = self._checked.inputs
        if inputs is not None:
            scope["inputs"] = inputs  # a plan file's inputs (check_plan(inputs=...))
        return scope

    def bind_args(
        self,
        scope: Mapping[str, Any],
        when: expressions.Expression | None,
        bind: Mapping[str, expressions.Expression],
        templates: Mapping[str, Template],
        args: dict[str, Any],
        *,
        tool: str | None = None,
    ) -> dict[str, Any] | None:
        """``args`` with ``when``, templates and ``bind`` applied; None when ``when`` is false.

        Raises ``StepError`` naming the field (and the bound, for a limit).
        ``tool``: what the step calls, which decides whether a binding may pass a stored
        result whole (``receives_references``); None: it may not.
        """
        budget = self._budget
        passes_refs = tool is not None and self.receives_references(tool)
        unwrapped = None if passes_refs or tool in CONTROL or tool in (None, AGENT_TOOL) else tool
        field = "when"
        try:
            if when is not None:
                self._refuse_stored(when, scope, field, False)
                value = self._evaluate(when, scope, "when matched no value")
                if not isinstance(value, bool):
                    raise StepError(f"when must be true or false, got {brief(value, 40)}")
                if not value:
                    return None
            for name, template in templates.items():
                field = f"{name} placeholder"
                args[name] = self._render(template, scope, name, budget)
            for name, expr in bind.items():
                field = f"binding '{name}'"
                self._refuse_stored(expr, scope, field, passes_refs, unwrapped)
                args[name] = self._evaluate(expr, scope, f"binding '{name}' matched no value")
        except LimitExceeded as exc:
            raise StepError(f"{field}: {exc}; {_LIMIT_FIX}") from None
        return args

    def _refuse_stored(
        self,
        expr: expressions.Expression,
        scope: Mapping[str, Any],
        field: str,
        whole: bool,
        unwrapped: str | None = None,
    ) -> None:
        """Fail an expression that would read inside a result stored by reference: workflow
        code cannot see the value, and computing over the reference would be silently wrong.
        Passing one whole (``steps.<id>``, ``whole``) is allowed; nothing to do without any.
        ``unwrapped``: the tool the step calls cannot read a reference at all."""
        if not self._stored:
            return
        steps = scope.get("steps")
        if not isinstance(steps, dict):
            return
        reads = expr.refs if not expr.is_dynamic else frozenset(steps)
        for sid in sorted(reads & self._stored):
            if sid not in steps:
                continue
            if whole and expr.simple_path == (sid,):
                continue
            if unwrapped is not None and expr.simple_path == (sid,):
                raise StepError(unwrapped_reference_message(field, sid, unwrapped))
            raise StepError(read_inside_message(field, sid, steps[sid], passes_whole=whole))

    def _evaluate(
        self, expr: expressions.Expression, scope: Mapping[str, Any], missing_text: str
    ) -> Any:
        matched, value = expressions.evaluate(
            expr, scope, deterministic=self._checked.durable, budget=self._budget
        )
        missing = expressions.first_missing(expr, scope)
        if not matched or missing:
            hint = missing or expressions.explain_no_match(expr, scope)
            raise StepError(f"{missing_text}: {hint}")
        return value

    def _render(
        self, template: Template, scope: Mapping[str, Any], name: str, budget: expressions.Budget
    ) -> str:
        """A prompt with its placeholders filled in: text as is, other values as compact JSON.

        A placeholder that matches nothing fails the step, like a binding: a prompt
        silently missing its data would make the agent guess.
        """
        parts: list[str] = []
        for part in template:
            if isinstance(part, str):
                parts.append(part)
                continue
            self._refuse_stored(
                part, scope, f"placeholder {{{{ {part.source} }}}} in {name}", False
            )
            matched, value = expressions.evaluate(
                part, scope, deterministic=self._checked.durable, budget=budget
            )
            missing = expressions.first_missing(part, scope)
            if not matched or missing:
                hint = missing or expressions.explain_no_match(part, scope)
                raise StepError(
                    f"placeholder {{{{ {part.source} }}}} in {name} matched no value: {hint}"
                )
            parts.append(value if isinstance(value, str) else _compact(value))
        return "".join(parts)


_LIMIT_FIX = "compute less in the plan: return less from the tool, or do the work in a tool"


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
