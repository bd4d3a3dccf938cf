"""Everything that can be known about a plan before a side effect.

``check_plan`` turns raw input (a dict, a JSON string or a ``Plan``) into a
``CheckedPlan`` or raises ``PlanRejected`` listing *every* problem it found,
each naming the step, the field and the fix. A bad plan therefore costs one
repair round trip and runs nothing. The result carries everything the runners
need (dependency sets, parsed expressions, levels), so neither runner ever
re-derives the graph.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from pydantic import ValidationError

from durable_plan.check.base import _UNION_TAGS, MAX_PROBLEMS
from durable_plan.check.catalog import ToolCatalog, ToolSpec
from durable_plan.check.checked import CheckedPlan, CheckedStep
from durable_plan.check.dataflow import _Parsed
from durable_plan.check.graph import _find_cycles, _levels
from durable_plan.check.plan_errors import describe_schema_error, salvage_step
from durable_plan.check.saved_plans import check_saved_plan_calls
from durable_plan.check.shapes.checks import ShapeChecks
from durable_plan.language.errors import PlanRejected, StepError
from durable_plan.language.json_text import compact_json
from durable_plan.language.plan import (
    DEFAULT_MAX_STEPS,
    Plan,
    Step,
    plan_field_names,
    rare_field_text,
)
from durable_plan.language.plan_limits import (
    MAX_PLAN_BYTES,
    ValueTooLarge,
    error_path,
    plain_json,
)


def check_plan(
    raw: Plan | Mapping[str, Any] | str,
    *,
    catalog: ToolCatalog | Iterable[ToolSpec | str] | None = None,
    max_steps: int = DEFAULT_MAX_STEPS,
    durable: bool = False,
    prior: Collection[str] | None = None,
    inputs: Mapping[str, Any] | None = None,
    input_names: Collection[str] | None = None,
    checked_by_sender: bool = False,
) -> CheckedPlan:
    """Validate everything, then return the checked plan or raise ``PlanRejected``.

    ``catalog=None`` accepts any tool name (the invoker decides at run time);
    ``durable=True`` also refuses JSONata functions that would not replay.
    ``inputs`` (a plan file's values) makes ``inputs`` a second root expressions read;
    ``input_names`` (the names the file declares) makes reading any other one a problem.

    ``checked_by_sender``: the plan is the input of a plan workflow whose sender checked
    it as this does, against the same tool table (``checked_input``; the input says so:
    ``PlanInput.checked_by_sender``). Every rule the run relies on is checked
    again, since anyone who may start a workflow may write its input: the step count and
    size, the schema, ids, each step's tool (known, plannable, its arguments, the owner's
    rules, an agent step's bounds and schemas, a map's body), every expression (its size,
    its durable functions), the graph. Two checks are left to the sender: the walk of the
    raw JSON's values in a plan of a few KiB (``_Checker._admit_sent``: integers over 64
    bits, nesting past 100), and bindings against the tools' result shapes (static typing
    at its best effort: a value from a result of unknown shape is never typed). For a plan
    the full check accepts, the result is the same ``CheckedPlan``
    (tests/unit/check/test_sender_checked.py).
    """
    if catalog is not None and not isinstance(catalog, ToolCatalog):
        catalog = ToolCatalog.of(catalog)
    checker = _Checker(catalog, max_steps, durable, prior, checked_by_sender=checked_by_sender)
    if inputs is None:
        return checker.run(raw)
    checker.roots = ("inputs",)
    if input_names is not None:
        checker.declared_inputs = tuple(input_names)
    try:
        values = plain_json(dict(inputs))
    except StepError as exc:
        checker.add(
            "schema", f"the inputs are not plain JSON: {exc}", "pass JSON values", None, "inputs"
        )
        values = {}
    return replace(checker.run(raw), inputs=values)


_WALK_CHARGE_PER_CHAR = 4
"""The most ``plain_json`` charges per character of the compact text (a one-digit number and
its comma: 8 bytes for 2 characters)."""


def _in_plan_order(ids: frozenset[str], position: Mapping[str, int]) -> tuple[str, ...]:
    """``ids`` in the order their steps are listed (most steps wait for one or none)."""
    if len(ids) < 2:
        return tuple(ids)
    return tuple(sorted(ids, key=position.__getitem__))


class _Checker(ShapeChecks):
    """The whole check: admission, the plan's schema, ids, each step, the graph, the
    dataflow against return shapes."""

    def run(self, raw: Plan | Mapping[str, Any] | str) -> CheckedPlan:
        # Lighter for a plan its sender checked (``check_plan``): the admission and the
        # shapes only add problems, and change nothing of what the runners get.
        full = not self.checked_by_sender
        raw = self._admit(raw) if full else self._admit_sent(raw)
        plan, steps, returns, raw_ids = self._parse(raw)
        if len(steps) > self.max_steps:
            self._step_limit(len(steps))
        ids = self._check_ids(steps) | raw_ids
        parsed: dict[str, _Parsed] = {}
        self._expression_chars = 0
        for step in steps:
            # A duplicate is checked too: one problem must never hide another.
            self._check_tool(step)
            parsed.setdefault(step.id, self._check_expressions(step, ids))
        check_saved_plan_calls(steps, self.catalog, self.add, durable=self.durable)
        self._check_returns(returns, ids)
        deps = {sid: frozenset(p[2]) for sid, p in parsed.items()}
        self._check_cycles(deps)
        if full:
            self._check_shapes(steps, parsed)
        if self.problems or plan is None:
            raise PlanRejected(self.problems, list(self.rules.values()))
        levels_of = _levels(deps)
        position = {step.id: n for n, step in enumerate(plan.steps)}
        checked = {
            sid: CheckedStep(
                step=step,
                deps=deps[sid],
                bind=parsed[sid][0],
                when=parsed[sid][1],
                templates=parsed[sid][3],
                body=parsed[sid][4],
                level=levels_of[sid],
                ordered_deps=_in_plan_order(deps[sid], position),
                prior_reads=tuple(sorted(self.prior_reads[sid])) if sid in self.prior_reads else (),
            )
            for step in plan.steps
            for sid in [step.id]
        }
        levels: list[list[str]] = [[] for _ in range(max(levels_of.values()) + 1)]
        for step in plan.steps:  # one pass, in plan order: linear, not steps x depth
            levels[levels_of[step.id]].append(step.id)
        return CheckedPlan(plan=plan, steps=checked, levels=levels, durable=self.durable)

    def _admit(self, raw: Plan | Mapping[str, Any] | str) -> Plan | Mapping[str, Any] | str:
        """Refuse input whose size alone makes checking it expensive or unsafe.

        Everything after this is linear in a bounded input: at most
        ``MAX_PLAN_BYTES`` of JSON, nested at most ``MAX_JSON_DEPTH`` deep, with
        plain JSON values only, and at most ``max_steps`` steps. A 4,000-step plan
        is rejected here (over twice ``max_steps``) instead of being checked step by step
        (in a ``TemporalAgent`` the check runs in workflow code, under the 2 s
        deadlock detector).
        """
        if isinstance(raw, Plan):
            return raw
        if isinstance(raw, str | bytes):
            size = len(raw)
            if size > MAX_PLAN_BYTES:
                self._reject_size(size)
            try:
                raw = json.loads(raw)
            except (ValueError, RecursionError) as exc:
                reason = exc if isinstance(exc, ValueError) else "nested too deeply"
                self.add(
                    "schema",
                    f"the plan is not valid JSON ({reason})",
                    "send the plan as a JSON object",
                    None,
                    None,
                )
                raise PlanRejected(self.problems) from None
        if isinstance(raw, Mapping):
            self._admit_steps(raw.get("steps"))
            try:
                return dict(plain_json(raw, max_bytes=MAX_PLAN_BYTES))
            except StepError as exc:
                self._reject_value(exc, raw)
        return raw

    def _admit_sent(self, raw: Plan | Mapping[str, Any] | str) -> Plan | Mapping[str, Any] | str:
        """``_admit`` for a plan its sender checked: the step count and the size bound what
        the check spends as they bound the full check, and a plan of a few KiB (a quarter
        of the size limit) is not walked. What the walk alone refuses in such a plan is left
        to its sender: integers over 64 bits and values nested past 100 (the plan's schema
        still refuses NaN and infinities, and nesting past about 250)."""
        if not isinstance(raw, Mapping):
            return self._admit(raw)
        self._admit_steps(raw.get("steps"))
        try:
            size = len(compact_json(raw))
        except (TypeError, ValueError, RecursionError):
            return self._admit(raw)
        # The walk charges a value more than its text (a number 8 bytes, ``1,`` is 2): at most
        # four times the compact text, never fewer bytes (its escapes are ASCII). So a plan
        # the walk could refuse for its size is walked: the bound is the full check's.
        return raw if _WALK_CHARGE_PER_CHAR * size <= MAX_PLAN_BYTES else self._admit(raw)

    def _admit_steps(self, steps: Any) -> None:
        # Slightly over the limit, every other problem is still worth reporting (one
        # repair round trip); far over it, checking each step is wasted work.
        if isinstance(steps, list) and len(steps) > 2 * self.max_steps:
            self._step_limit(len(steps))
            raise PlanRejected(self.problems)

    def _step_limit(self, count: int) -> None:
        self.add(
            "step_limit",
            f"the plan has {count} steps; the limit is {self.max_steps}",
            "split the work into several plans, or call some tools directly",
            None,
            "steps",
        )

    def _reject_size(self, size: int) -> None:
        self.add(
            "limit",
            f"the plan is over {size // 1024} KiB; the limit is {MAX_PLAN_BYTES // 1024} KiB",
            "pass large data by reference (an id or a path a tool can read), not in args",
            None,
            None,
        )
        raise PlanRejected(self.problems)

    def _reject_value(self, exc: StepError, raw: Mapping[str, Any]) -> None:
        if isinstance(exc, ValueTooLarge):
            self._reject_size(MAX_PLAN_BYTES + 1)
        parts = error_path(exc).split(".") if error_path(exc) else []
        step: str | None = None
        if len(parts) >= 2 and parts[0] == "steps" and parts[1].isdigit():
            index = int(parts[1])
            steps = raw.get("steps")
            item = steps[index] if isinstance(steps, list) and index < len(steps) else None
            sid = item.get("id") if isinstance(item, Mapping) else None
            step = sid if isinstance(sid, str) and len(sid) <= 40 else f"#{index + 1}"
            parts = parts[2:]
        where = ".".join(parts)
        if len(where) > 60:
            where = where[:57] + "..."
        self.add(
            "limit",
            str(exc),
            "send plain JSON: strings, finite numbers within 64 bits, booleans, null, lists "
            "and objects with string keys, nested at most 100 deep",
            step,
            where or None,
        )
        raise PlanRejected(self.problems)

    def _parse(
        self, raw: Plan | Mapping[str, Any] | str
    ) -> tuple[Plan | None, list[Step], Any, set[str]]:
        """The plan if valid; else the individually valid steps and every step id seen."""
        if isinstance(raw, Plan):
            return raw, list(raw.steps), raw.returns, set()
        if isinstance(raw, str):
            try:
                raw = json.loads(raw)
            except json.JSONDecodeError as exc:
                self.add(
                    "schema",
                    f"the plan is not valid JSON ({exc})",
                    "send the plan as a JSON object",
                    None,
                    None,
                )
                raise PlanRejected(self.problems) from None
        if not isinstance(raw, Mapping):
            self.add(
                "schema",
                f"the plan must be an object, got {type(raw).__name__}",
                'send {"steps": [...]}',
                None,
                None,
            )
            raise PlanRejected(self.problems)
        try:
            plan = Plan.model_validate(raw)
            return plan, list(plan.steps), plan.returns, set()
        except ValidationError as exc:
            self._schema_problems(exc, raw)
        # Salvage the steps that are valid on their own, so one typo does not
        # hide every other problem in the plan.
        raw_steps = raw.get("steps")
        steps: list[Step] = []
        if isinstance(raw_steps, list):
            for item in raw_steps:
                salvaged = salvage_step(item)
                if salvaged is not None:
                    steps.append(salvaged)
        returns = raw.get("returns")
        valid_returns = (
            returns
            if isinstance(returns, list) and all(isinstance(r, str) for r in returns)
            else None
        )
        raw_ids = {
            item["id"]
            for item in (raw_steps if isinstance(raw_steps, list) else [])
            if isinstance(item, Mapping) and isinstance(item.get("id"), str)
        }
        return None, steps, valid_returns, raw_ids

    def _schema_problems(self, exc: ValidationError, raw: Mapping[str, Any]) -> None:
        names = plan_field_names()
        raw_steps = raw.get("steps")
        for err in exc.errors():
            if len(self.problems) >= MAX_PROBLEMS:
                break  # no more are listed (each would cost a "did you mean" search)
            loc = list(err["loc"])
            step_name: str | None = None
            kind = "plan"
            if len(loc) >= 2 and loc[0] == "steps" and isinstance(loc[1], int):
                kind = "step"
                index = loc[1]
                item = raw_steps[index] if isinstance(raw_steps, list) else None
                sid = item.get("id") if isinstance(item, Mapping) else None
                step_name = sid if isinstance(sid, str) and sid else f"#{index + 1}"
                loc = loc[2:]
            # JsonValue's union members show up as path parts ("args.x.float"): drop them.
            loc = [p for p in loc if p not in _UNION_TAGS]
            fld = ".".join(str(p) for p in loc) or None
            etype = err["type"]
            message, fix = describe_schema_error(etype, err, fld, names[kind])
            # The sent schema leaves the rare fields out: say here what such a field is.
            fix = rare_field_text(kind, fld or "") or fix
            self.add("schema", message, fix, step_name, fld)

    def _check_ids(self, steps: Sequence[Step]) -> set[str]:
        seen: set[str] = set()
        for step in steps:
            if step.id in seen:
                self.add(
                    "duplicate_id",
                    f"step id '{step.id}' is used more than once",
                    "give every step its own id",
                    step.id,
                    "id",
                )
            seen.add(step.id)
        return seen

    def _check_cycles(self, deps: Mapping[str, frozenset[str]]) -> None:
        for cycle in _find_cycles(deps):
            path = " -> ".join([*cycle, cycle[0]])
            self.add(
                "cycle",
                f"dependency cycle {path} (each step waits for the next)",
                "remove one of these dependencies",
                cycle[0],
                self.edge_fields.get(cycle[0], {}).get(cycle[1 % len(cycle)], "bind"),
            )
