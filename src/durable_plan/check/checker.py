"""Everything that can be known about a plan before a side effect.

``check_plan`` turns raw input (a dict, a JSON string or a ``Plan``) into a
``CheckedPlan`` or raises ``PlanRejected`` listing *every* problem it found,
each naming the step, the field and the fix. A bad plan therefore costs one
repair round trip and runs nothing. The result carries everything the runners
need (dependency sets, parsed expressions, levels), so neither runner ever
re-derives the graph.
"""

from __future__ import annotations

import contextlib
import difflib
import json
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import jsonschema
from pydantic import ValidationError

from durable_plan import expressions
from durable_plan.check.json_schema import validator_for
from durable_plan.expressions import Expression, ExpressionSyntaxError
from durable_plan.language.agent_step import (
    AGENT_RULES,
    AGENT_TOOL,
    TEMPLATED,
    AgentCatalogView,
    Template,
    check_agent_args,
    parse_template,
    template_expressions,
)
from durable_plan.language.control_steps import (
    ALL_BODY_NAMES,
    BODY_FIELDS,
    BODY_NAMES,
    CONTROL,
    DEFAULT_CONCURRENCY,
    EXIT,
    EXIT_ARGS,
    KIND_RULES,
    LOOPS,
    MAP,
    MAP_ARGS,
    MAX_CONCURRENCY,
    REDUCE,
    REDUCE_ARGS,
    CheckedBody,
)
from durable_plan.language.errors import APPROVAL_REFUSAL, PlanRejected, Problem, StepError
from durable_plan.language.limits import (
    MAX_EXPRESSION_CHARS,
    MAX_PLAN_BYTES,
    MAX_PLAN_EXPRESSION_CHARS,
    ValueTooLarge,
    error_path,
    plain_json,
    truncate_text,
)
from durable_plan.language.options import ToolOptions
from durable_plan.language.plan import DEFAULT_MAX_STEPS, Plan, Step, plan_field_names

MAX_PROBLEMS = 100
"""A rejection lists every problem, up to this many (a model fixes them in one pass)."""


@dataclass(frozen=True)
class ToolSpec:
    """What the checker knows about one tool: its input schema, or why it may not be planned."""

    name: str
    input_schema: Mapping[str, Any] | None = None
    refused: str | None = None
    options: ToolOptions | None = None
    """The owner's rules; a step's ``retries``, ``timeout_s`` and ``local`` may only
    tighten them. None (a bare catalog of names) checks no bounds."""


@dataclass(frozen=True)
class ToolCatalog:
    """The tools a plan may name. ``refused`` tools exist but may not be planned."""

    tools: Mapping[str, ToolSpec] = field(default_factory=dict)
    default_model: str | None = None
    """The model of an agent step that names none (the runner's default), if any."""
    models: Sequence[str] | None = None
    """Model-name patterns an agent step may name in ``model`` (the owner's allow-list;
    the default model needs no name). None: any name (plans checked before the list)."""

    @classmethod
    def of(cls, specs: Iterable[ToolSpec | str]) -> ToolCatalog:
        items = [s if isinstance(s, ToolSpec) else ToolSpec(s) for s in specs]
        return cls({s.name: s for s in items})

    @classmethod
    def from_options(
        cls, options: Mapping[str, ToolOptions], *, owner_rules: bool = True
    ) -> ToolCatalog:
        """Every named tool plannable, with its schema and rules (the durable tool table's view).

        ``owner_rules=False`` leaves the per-step bounds unchecked (replaying plans
        that started before they were enforced).
        """
        return cls(
            {
                name: ToolSpec(name, opts.input_schema, None, opts if owner_rules else None)
                for name, opts in options.items()
            }
        )

    @property
    def plannable(self) -> list[str]:
        return sorted(name for name, spec in self.tools.items() if spec.refused is None)


@dataclass(frozen=True)
class CheckedStep:
    """A step with its dependencies resolved and its expressions parsed."""

    step: Step
    deps: frozenset[str]
    bind: Mapping[str, Expression]
    when: Expression | None
    level: int
    ordered_deps: tuple[str, ...] = ()
    prior_reads: tuple[str, ...] = ()
    """Step ids of earlier plans it reads as ``prior.<id>`` (its map body's too), sorted."""
    templates: Mapping[str, Template] = field(default_factory=dict)
    """An agent step's ``prompt`` / ``system_prompt`` with their ``{{ }}`` placeholders."""
    body: CheckedBody | None = None
    """A map or reduce step's ``do``, checked."""
    """``deps`` in plan order: a step's ``steps`` scope is built in this order, never
    in a set's, whose order follows the process's hash seed (``$keys(steps)`` and
    ``steps.*[0]`` must answer the same on every worker)."""

    @property
    def id(self) -> str:
        return self.step.id


@dataclass(frozen=True)
class CheckedPlan:
    """A plan that passed every check; the only input the runners accept."""

    plan: Plan
    steps: Mapping[str, CheckedStep]
    levels: list[list[str]]
    durable: bool
    inputs: dict[str, Any] | None = None
    """A plan file's input values, checked against its schema by the caller: expressions
    read them as ``inputs.<name>``. None: the plan has no inputs and ``inputs`` is unknown."""

    @property
    def returns(self) -> list[str]:
        return list(self.plan.returns) if self.plan.returns is not None else list(self.steps)


def check_plan(
    raw: Plan | Mapping[str, Any] | str,
    *,
    catalog: ToolCatalog | Iterable[ToolSpec | str] | None = None,
    max_steps: int = DEFAULT_MAX_STEPS,
    durable: bool = False,
    prior: Collection[str] | None = None,
    inputs: Mapping[str, Any] | None = None,
) -> CheckedPlan:
    """Validate everything, then return the checked plan or raise ``PlanRejected``.

    ``catalog=None`` accepts any tool name (the invoker decides at run time);
    ``durable=True`` also refuses JSONata functions that would not replay.
    ``inputs`` (a plan file's values) makes ``inputs`` a second root expressions read.
    """
    if catalog is not None and not isinstance(catalog, ToolCatalog):
        catalog = ToolCatalog.of(catalog)
    checker = _Checker(catalog, max_steps, durable, prior)
    if inputs is None:
        return checker.run(raw)
    checker.roots = ("inputs",)
    try:
        values = plain_json(dict(inputs))
    except StepError as exc:
        checker.add(
            "schema", f"the inputs are not plain JSON: {exc}", "pass JSON values", None, "inputs"
        )
        values = {}
    return replace(checker.run(raw), inputs=values)


class _Checker:
    def __init__(
        self,
        catalog: ToolCatalog | None,
        max_steps: int,
        durable: bool,
        prior: Collection[str] | None = None,
    ) -> None:
        self.catalog = catalog
        self.max_steps = max_steps
        self.durable = durable
        self.problems: list[Problem] = []
        self.roots: tuple[str, ...] = ()
        """Names besides ``steps`` that expressions may read at the root (``inputs``)."""
        self._prefix = ""
        # step id -> dependency id -> the field that creates the edge (for cycle reports)
        self.edge_fields: dict[str, dict[str, str]] = {}
        self.prior = prior  # None: no conversation, nothing to read as prior
        self.prior_reads: dict[str, set[str]] = {}
        self.rules: dict[str, str] = {}
        """How to write each step kind a problem was found in, sent with the rejection."""

    def add(self, code: Any, message: str, fix: str, step: str | None, fld: str | None) -> None:
        if self._prefix:
            fld = f"{self._prefix}.{fld}" if fld else self._prefix
        # A problem may echo what the model sent (a field name, a value): keep it short.
        cut = truncate_text
        self.problems.append(
            Problem(
                code,
                cut(message, 600),
                cut(fix, 600),
                cut(step, 80) if step else step,
                cut(fld, 120) if fld else fld,
            )
        )
        if len(self.problems) > MAX_PROBLEMS:
            del self.problems[MAX_PROBLEMS:]

    @contextlib.contextmanager
    def _rules_on_problems(self, kind: str, rules: str) -> Iterator[None]:
        """A problem found meanwhile sends ``rules`` (how to write ``kind``) with the rejection."""
        before = len(self.problems)
        try:
            yield
        finally:
            if len(self.problems) > before:
                self.rules.setdefault(kind, rules)

    @contextlib.contextmanager
    def _within(self, prefix: str) -> Iterator[None]:
        """Problems found meanwhile name fields under ``prefix`` (a map's ``args.do``)."""
        outer, self._prefix = self._prefix, prefix
        try:
            yield
        finally:
            self._prefix = outer

    def run(self, raw: Plan | Mapping[str, Any] | str) -> CheckedPlan:
        raw = self._admit(raw)
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
        self._check_returns(returns, ids)
        deps = {sid: frozenset(p[2]) for sid, p in parsed.items()}
        self._check_cycles(deps)
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
                ordered_deps=tuple(sorted(deps[sid], key=position.__getitem__)),
                prior_reads=tuple(sorted(self.prior_reads.get(sid, ()))),
            )
            for step in plan.steps
            for sid in [step.id]
        }
        levels: list[list[str]] = [[] for _ in range(max(levels_of.values()) + 1)]
        for step in plan.steps:  # one pass, in plan order: linear, not steps x depth
            levels[levels_of[step.id]].append(step.id)
        return CheckedPlan(plan=plan, steps=checked, levels=levels, durable=self.durable)

    # -- admission: bounded work before any real check ------------------------

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

    # -- schema ---------------------------------------------------------------

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
                salvaged = _salvage_step(item)
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
            message, fix = _describe_schema_error(etype, err, fld, names[kind])
            self.add("schema", message, fix, step_name, fld)

    # -- per-step checks --------------------------------------------------------

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

    def _check_tool(self, step: Step) -> None:
        if step.tool == AGENT_TOOL:
            with self._rules_on_problems(AGENT_TOOL, AGENT_RULES):
                self._check_agent_step(step)
            return
        if step.tool in LOOPS:
            with self._rules_on_problems(step.tool, KIND_RULES[step.tool]):
                self._check_loop(step)
            return
        if step.tool == EXIT:
            with self._rules_on_problems(EXIT, KIND_RULES[EXIT]):
                self._check_exit(step)
            return
        if self.catalog is None:
            return
        spec = self.catalog.tools.get(step.tool)
        plannable = self.catalog.plannable
        if spec is None:
            close = difflib.get_close_matches(step.tool, plannable, n=1)
            hint = f"did you mean '{close[0]}'? " if close else ""
            listed = ", ".join(plannable) or "none"
            self.add(
                "unknown_tool",
                f"unknown tool '{step.tool}'",
                f"{hint}plannable tools: {listed}",
                step.id,
                "tool",
            )
            return
        if spec.refused is not None:
            self.add(
                "not_plannable",
                f"tool '{step.tool}' cannot be planned: {spec.refused}",
                f"call '{step.tool}' directly, outside the plan"
                + (" (the person is asked then)" if spec.refused == APPROVAL_REFUSAL else ""),
                step.id,
                "tool",
            )
            return
        if spec.input_schema is not None:
            self._check_arguments(step, spec.input_schema)
        if spec.options is not None:
            self._check_owner_rules(step, spec.options)

    def _check_agent_step(self, step: Step) -> None:
        catalog = self.catalog
        view = AgentCatalogView(
            plannable=catalog.plannable if catalog is not None else None,
            default_model=catalog.default_model if catalog is not None else None,
            model_required=catalog is not None,
            models=catalog.models if catalog is not None else None,
            refused={n: t.refused for n, t in catalog.tools.items() if t.refused}
            if catalog is not None
            else None,
        )

        def report(code: Any, message: str, fix: str, fld: str) -> None:
            self.add(code, message, fix, step.id, fld)

        check_agent_args(step.args, step.bind, view, report)
        if step.local:
            report(
                "owner_rule",
                "an agent step cannot run as a local activity",
                "remove local",
                "local",
            )
        if step.retries is not None:
            report(
                "bad_argument",
                "an agent step is not retried as a whole (each model round and tool call is)",
                "remove retries",
                "retries",
            )

    def _check_loop(self, step: Step) -> None:
        names = MAP_ARGS if step.tool == MAP else REDUCE_ARGS
        self._unknown_args(step, names)
        if "over" not in step.args and "over" not in step.bind:
            self.add(
                "bad_argument",
                f"a {step.tool} step needs 'over': the list to go through",
                'bind it: "bind": {"over": "steps.<id>.<list>"}',
                step.id,
                "bind.over",
            )
        elif "over" in step.args and not isinstance(step.args["over"], list):
            self.add(
                "bad_argument",
                "'over' must be a list",
                "bind it, or give a list",
                step.id,
                "args.over",
            )
        concurrency = step.args.get("concurrency", DEFAULT_CONCURRENCY)
        if (
            isinstance(concurrency, bool)
            or not isinstance(concurrency, int)
            or not (1 <= concurrency <= MAX_CONCURRENCY)
        ):
            self.add(
                "bad_argument",
                f"concurrency must be a whole number from 1 to {MAX_CONCURRENCY}",
                f"use 1..{MAX_CONCURRENCY} (default {DEFAULT_CONCURRENCY})",
                step.id,
                "args.concurrency",
            )
        for name, fix in (("local", "remove local"), ("retries", "set retries in do")):
            if getattr(step, name) not in (None, False):
                self.add("bad_argument", f"a {step.tool} step has no '{name}'", fix, step.id, name)
        body = self._body_step(step)
        if body is None:
            return
        with self._within("args.do"):
            if body.tool in CONTROL:
                self.add(
                    "bad_argument",
                    f"a {step.tool} body cannot be a '{body.tool}' step",
                    "run the inner loop as a second plan, after this one",
                    step.id,
                    "tool",
                )
            else:
                self._check_tool(body)

    def _body_step(self, step: Step) -> Step | None:
        """The ``do`` template as a step (for the tool checks), or None if unusable."""
        raw = step.args.get("do")
        if not isinstance(raw, Mapping) or not isinstance(raw.get("tool"), str):
            self.add(
                "bad_argument",
                f"a {step.tool} step needs 'do': the step to run for each item, with a tool",
                '"do": {"tool": "<tool>", "bind": {"<arg>": "item.<field>"}}',
                step.id,
                "args.do",
            )
            return None
        for key in sorted(set(raw) - set(BODY_FIELDS)):
            self.add(
                "bad_argument",
                f"'do' has no field '{key}'",
                f"its fields are: {', '.join(BODY_FIELDS)}",
                step.id,
                f"args.do.{key}",
            )
        try:
            return Step.model_validate(
                {"id": step.id, **{k: v for k, v in raw.items() if k in BODY_FIELDS}}
            )
        except ValidationError as exc:
            for err in exc.errors():
                loc = ".".join(str(p) for p in err["loc"] if p not in _UNION_TAGS)
                self.add(
                    "schema", str(err["msg"]), "see the plan schema", step.id, f"args.do.{loc}"
                )
            return None

    def _check_exit(self, step: Step) -> None:
        self._unknown_args(step, EXIT_ARGS)
        status = step.args.get("status", "success")
        if status not in ("success", "error"):
            self.add(
                "bad_argument",
                "an exit's status is 'success' or 'error'",
                'write "status": "error" to end the plan as failed',
                step.id,
                "args.status",
            )
        message = step.args.get("message")
        if "message" not in step.bind and not (isinstance(message, str) and message):
            self.add(
                "bad_argument",
                "an exit step needs a message saying why the plan ends",
                'add "message": "..."',
                step.id,
                "args.message",
            )

    def _unknown_args(self, step: Step, names: tuple[str, ...]) -> None:
        for name in sorted((set(step.args) | set(step.bind)) - set(names)):
            close = difflib.get_close_matches(name, names, n=1)
            hint = f"did you mean '{close[0]}'? " if close else ""
            where = "bind" if name in step.bind else "args"
            self.add(
                "bad_argument",
                f"a {step.tool} step has no argument '{name}'",
                f"{hint}its arguments are: {', '.join(names)}",
                step.id,
                f"{where}.{name}",
            )

    def _check_owner_rules(self, step: Step, owner: ToolOptions) -> None:
        """A plan may tighten what the tool's owner registered, never loosen it."""
        if step.retries is not None and step.retries > owner.retries:
            self.add(
                "owner_rule",
                f"retries {step.retries} is more than the {owner.retries} that tool "
                f"'{step.tool}' allows",
                f"ask for at most {owner.retries} retries, or leave retries out",
                step.id,
                "retries",
            )
        if step.timeout_s is not None and step.timeout_s > owner.timeout_s:
            self.add(
                "owner_rule",
                f"timeout_s {step.timeout_s:g} is longer than the {owner.timeout_s:g} s that "
                f"tool '{step.tool}' allows",
                f"ask for at most {owner.timeout_s:g} s, or leave timeout_s out",
                step.id,
                "timeout_s",
            )
        if step.local and not owner.may_run_local:
            self.add(
                "owner_rule",
                f"tool '{step.tool}' may not run as a local activity (its owner did not allow it)",
                "remove local",
                step.id,
                "local",
            )

    def _check_arguments(self, step: Step, schema: Mapping[str, Any]) -> None:
        props = schema.get("properties")
        props = props if isinstance(props, Mapping) else {}
        open_ended = schema.get("additionalProperties", not props) is not False
        given = set(step.args) | set(step.bind)
        for name in sorted(set(step.args) & set(step.bind)):
            self.add(
                "bad_argument",
                f"argument '{name}' is given in both args and bind",
                "keep it in one of them",
                step.id,
                f"bind.{name}",
            )
        for name in sorted(given - set(props)):
            if open_ended:
                continue
            close = difflib.get_close_matches(name, list(props), n=1)
            hint = f"did you mean '{close[0]}'? " if close else ""
            fld = f"bind.{name}" if name in step.bind else f"args.{name}"
            self.add(
                "bad_argument",
                f"tool '{step.tool}' has no argument '{name}'",
                f"{hint}its arguments are: {', '.join(props) or 'none'}",
                step.id,
                fld,
            )
        required = schema.get("required") or []
        for name in required:
            if name not in given:
                self.add(
                    "bad_argument",
                    f"tool '{step.tool}' needs argument '{name}'",
                    f"add '{name}' to args or bind",
                    step.id,
                    "args",
                )
        for name, value in step.args.items():
            prop = props.get(name)
            if not isinstance(prop, Mapping):
                continue
            # A pydantic-model parameter's schema points into the tool schema's $defs.
            sub = dict(prop)
            for key in ("$defs", "definitions"):
                if key in schema and key not in sub:
                    sub[key] = schema[key]
            error = _schema_error(value, sub)
            if error is not None:
                self.add(
                    "bad_argument",
                    f"argument '{name}' is invalid: {_brief_text(error.message)}",
                    f"pass a value matching {_short(_resolve_ref(prop, schema), 300)}",
                    step.id,
                    f"args.{name}",
                )

    def _check_expressions(self, step: Step, ids: set[str]) -> _Parsed:
        deps: set[str] = set()
        dynamic_fields: list[str] = []
        bind, when = self._parse_bind_when(step, step, "", ids, deps, dynamic_fields, ())
        templates = self._check_templates(step, ids, deps, dynamic_fields)
        body = self._check_body_expressions(step, ids, deps, dynamic_fields)
        for ref in step.after:
            if ref == step.id:
                self.add(
                    "self_reference",
                    "lists itself in after",
                    "remove its own id from after",
                    step.id,
                    "after",
                )
            elif ref not in ids:
                self.add(
                    "dangling_reference",
                    f"waits for '{ref}', but no step has that id",
                    _suggest(ref, ids, "list ids of other steps"),
                    step.id,
                    "after",
                )
            else:
                deps.add(ref)
                self.edge_fields.setdefault(step.id, {}).setdefault(ref, "after")
        if dynamic_fields and not step.after:
            self.add(
                "dynamic_reference",
                f"reads steps it does not name: {'; '.join(dynamic_fields)}",
                "list the steps it needs in after, or read them by name (steps.<id>)",
                step.id,
                dynamic_fields[0].split(" ")[0],
            )
        return bind, when, deps, templates, body

    def _parse_bind_when(
        self,
        step: Step,
        source_of: Step,
        prefix: str,
        ids: set[str],
        deps: set[str],
        dynamic_fields: list[str],
        allowed: tuple[str, ...],
    ) -> tuple[dict[str, Expression], Expression | None]:
        """Parse and analyse ``source_of``'s bind and when (a step's, or a map body's)."""
        bind: dict[str, Expression] = {}
        when: Expression | None = None
        for fld, source in expressions.iter_sources(source_of.bind, source_of.when):
            full = prefix + fld
            if not self._admit_expression(step, full, source):
                continue
            try:
                expr = expressions.parse(source)
            except ExpressionSyntaxError as exc:
                self._syntax(step, full, source, exc)
                continue
            self._analyse(step, full, expr, ids, deps, dynamic_fields, allowed)
            if fld == "when":
                when = expr
            else:
                bind[fld.removeprefix("bind.")] = expr
        return bind, when

    def _syntax(self, step: Step, fld: str, source: str, exc: Exception) -> None:
        self.add(
            "syntax",
            f"JSONata syntax error in {_short(source, 200)}: {exc}",
            'write JSONata: = not ==, $not(...) not !, quote strings "like this"',
            step.id,
            fld,
        )

    def _check_body_expressions(
        self, step: Step, ids: set[str], deps: set[str], dynamic_fields: list[str]
    ) -> CheckedBody | None:
        """A map or reduce body's expressions: they read results (the loop step's
        dependencies) and ``item`` / ``index`` / ``accumulator``."""
        if step.tool not in LOOPS:
            return None
        raw = step.args.get("do")
        try:
            body = (
                Step.model_validate({"id": step.id, **dict(raw)})
                if isinstance(raw, Mapping)
                else None
            )
        except ValidationError:
            return None  # reported by the tool checks
        if body is None:
            return None
        allowed = BODY_NAMES[step.tool]
        bind, when = self._parse_bind_when(
            step, body, "args.do.", ids, deps, dynamic_fields, allowed
        )
        templates = self._check_templates(body, ids, deps, dynamic_fields, "args.do.", allowed)
        return CheckedBody(
            tool=body.tool,
            args=dict(body.args),
            bind=bind,
            when=when,
            templates=templates,
            timeout_s=body.timeout_s,
            retries=body.retries,
        )

    def _check_templates(
        self,
        step: Step,
        ids: set[str],
        deps: set[str],
        dynamic_fields: list[str],
        prefix: str = "",
        allowed: tuple[str, ...] = (),
    ) -> dict[str, Template]:
        """An agent step's prompt placeholders read results like bindings do."""
        templates: dict[str, Template] = {}
        if step.tool != AGENT_TOOL:
            return templates
        for name in TEMPLATED:
            text = step.args.get(name)
            fld = f"{prefix}args.{name}"
            if not isinstance(text, str) or not self._admit_expression(step, fld, text):
                continue
            try:
                template = parse_template(text)
            except ExpressionSyntaxError as exc:
                self._syntax(step, fld, text, exc)
                continue
            for expr in template_expressions(template):
                self._analyse(step, fld, expr, ids, deps, dynamic_fields, allowed)
            templates[name] = template
        return templates

    def _analyse(
        self,
        step: Step,
        fld: str,
        expr: Expression,
        ids: set[str],
        deps: set[str],
        dynamic_fields: list[str],
        allowed: tuple[str, ...] = (),
    ) -> None:
        """Functions, bare names and references of one parsed expression."""
        edge_fields = self.edge_fields.setdefault(step.id, {})
        self._check_functions(step, fld, expr)
        self._check_bare_names(step, fld, expr, allowed)
        for ref in sorted(expr.refs):
            if ref == step.id:
                self.add(
                    "self_reference",
                    f"reads steps.{ref}, its own result",
                    "a step cannot read itself: read an earlier step",
                    step.id,
                    fld,
                )
            elif ref not in ids:
                self.add(
                    "dangling_reference",
                    f"reads steps.{ref}, but no step has id '{ref}'",
                    _suggest(ref, ids, "use the id of an earlier step"),
                    step.id,
                    fld,
                )
            else:
                deps.add(ref)
                edge_fields.setdefault(ref, fld)
        if expr.prior_paths or expr.prior_dynamic:
            self._check_prior(step, fld, expr)
        if expr.is_dynamic:
            dynamic_fields.append(f"{fld} ({', '.join(expr.dynamic)})")

    def _check_prior(self, step: Step, fld: str, expr: Expression) -> None:
        """Reads of earlier plans' results: by name, and only of steps that ended ok."""
        for text in dict.fromkeys(expr.prior_dynamic):
            self.add(
                "prior_reference",
                f"reads {text} without naming one step",
                "read one earlier step by name: prior.<id>, e.g. prior.lookup.name",
                step.id,
                fld,
            )
        for ref in sorted(expr.prior_refs):
            if self.prior is None:
                self.add(
                    "prior_reference",
                    f"reads prior.{ref}, but no earlier plan's results are available here "
                    "(prior is for a plan submitted after others in one conversation)",
                    f"run '{ref}' as a step of this plan and read steps.{ref}",
                    step.id,
                    fld,
                )
            elif ref not in self.prior:
                known = ", ".join(sorted(self.prior)) or "none yet"
                self.add(
                    "prior_reference",
                    f"reads prior.{ref}, but no earlier plan in this conversation has a step "
                    f"'{ref}' that ended ok (failed, skipped and not taken steps leave no result)",
                    f"run '{ref}' as a step of this plan and read steps.{ref}; results that "
                    f"can be read as prior: {known}",
                    step.id,
                    fld,
                )
            else:
                self.prior_reads.setdefault(step.id, set()).add(ref)

    def _admit_expression(self, step: Step, fld: str, source: str) -> bool:
        """Bound parsing cost: each expression and all of them together."""
        if len(source) > MAX_EXPRESSION_CHARS:
            self.add(
                "limit",
                f"the expression is {len(source)} characters; the limit is {MAX_EXPRESSION_CHARS}",
                "write a shorter expression, or compute the value in a tool",
                step.id,
                fld,
            )
            return False
        self._expression_chars += len(source)
        if self._expression_chars > MAX_PLAN_EXPRESSION_CHARS:
            if self._expression_chars - len(source) <= MAX_PLAN_EXPRESSION_CHARS:
                self.add(
                    "limit",
                    f"the plan's expressions are over {MAX_PLAN_EXPRESSION_CHARS} characters "
                    "together (the rest were not checked)",
                    "use fewer or shorter expressions, or split the work into several plans",
                    step.id,
                    fld,
                )
            return False
        return True

    def _check_bare_names(
        self, step: Step, fld: str, expr: Expression, allowed: tuple[str, ...] = ()
    ) -> None:
        for name in dict.fromkeys(expr.bare_names):
            if name in allowed or name in self.roots:
                continue
            if name in ALL_BODY_NAMES:
                kind = REDUCE if name == "accumulator" else MAP
                self.rules.setdefault(kind, KIND_RULES[kind])
                self.add(
                    "unknown_name",
                    f"reads '{name}', which exists only inside the 'do' of a map or reduce "
                    "(accumulator: reduce only)",
                    "move the expression into do's bind or when",
                    step.id,
                    fld,
                )
                continue
            arg = fld.removeprefix("bind.") if fld.startswith("bind.") else "name"
            self.add(
                "unknown_name",
                f"reads '{name}', but expressions see only steps, so it can never match",
                f'for the text {name!r}, put it in args ("args": {{"{arg}": "{name}"}}) or quote '
                f"it (\"'{name}'\"); for a result, write steps.<id>.{name}",
                step.id,
                fld,
            )

    def _check_functions(self, step: Step, fld: str, expr: Expression) -> None:
        forbidden = set(expressions.ALWAYS_FORBIDDEN)
        if self.durable:
            forbidden |= expressions.NONDETERMINISTIC
        for name in sorted(expr.functions & forbidden):
            if name == "eval":
                fix = "write the expression out directly; $eval is disabled"
            else:
                fix = "durable plans must replay identically: pass the value in args"
            self.add("forbidden_function", f"${name} is not allowed", fix, step.id, fld)

    def _check_returns(self, returns: Any, ids: set[str]) -> None:
        for ref in returns or []:
            if ref not in ids:
                self.add(
                    "returns",
                    f"returns '{ref}', but no step has that id",
                    _suggest(ref, ids, "list step ids"),
                    None,
                    "returns",
                )

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


_Parsed = tuple[
    dict[str, Expression], Expression | None, set[str], dict[str, Template], CheckedBody | None
]

_UNION_TAGS = frozenset(
    {"str", "int", "float", "bool", "list", "dict", "list[...]", "dict[str,...]"}
)


def _describe_schema_error(
    etype: str, err: Any, fld: str | None, fields: list[str]
) -> tuple[str, str]:
    last = fld.split(".")[-1] if fld else ""
    if etype == "extra_forbidden":
        close = difflib.get_close_matches(last, fields, n=1)
        fix = f"did you mean '{close[0]}'?" if close else f"remove it; fields: {', '.join(fields)}"
        return f"unknown field '{last}'", fix
    if etype == "missing":
        return f"required field '{last}' is missing", f"add '{last}'"
    if etype == "string_pattern_mismatch":
        return (
            f"{err['input']!r} is not a valid step id",
            "start with a lowercase letter; use lowercase letters, digits and '_' "
            "(at most 32 characters)",
        )
    if etype == "too_short" and fld == "steps":
        return "the plan has no steps", "add at least one step"
    if etype == "string_type" and fld is not None and fld.startswith("bind."):
        name = fld.removeprefix("bind.")
        given = _short(err.get("input"))
        return (
            f"bind values are JSONata expressions (strings); '{name}' is {given}",
            f'put literal values in args: "args": {{"{name}": {given}}}',
        )
    return f"{err['msg']} (got {_short(err.get('input'))})", "see the plan schema"


def _salvage_step(item: Any) -> Step | None:
    """The step without its invalid fields (already reported), or None if id/tool are bad."""
    if not isinstance(item, Mapping):
        return None
    candidate = dict(item)
    for _ in range(2):
        try:
            return Step.model_validate(candidate)
        except ValidationError as exc:
            bad = {str(err["loc"][0]) for err in exc.errors() if err["loc"]}
            if bad & {"id", "tool"} or not bad:
                return None
            candidate = {k: v for k, v in candidate.items() if k not in bad}
    return None


def _short(value: Any, limit: int = 60) -> str:
    try:
        text = json.dumps(value, default=str)
    except (ValueError, RecursionError):  # an integer of thousands of digits, a deep value
        return "a value too large to show"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _resolve_ref(prop: Mapping[str, Any], schema: Mapping[str, Any]) -> Any:
    """``{"$ref": "#/$defs/M"}`` -> the definition itself, for a fix the model can follow."""
    ref = prop.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/"):
        target: Any = schema
        for part in ref[2:].split("/"):
            target = target.get(part) if isinstance(target, Mapping) else None
        if isinstance(target, Mapping):
            return dict(target)
    return dict(prop)


def _brief_text(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _suggest(ref: str, ids: Iterable[str], fallback: str) -> str:
    close = difflib.get_close_matches(ref, sorted(ids), n=1)
    return f"did you mean '{close[0]}'?" if close else fallback


def _find_cycles(deps: Mapping[str, frozenset[str]]) -> list[list[str]]:
    """Each distinct cycle once, as a path, found by an iterative depth-first search."""
    white, grey, black = 0, 1, 2
    color = dict.fromkeys(deps, white)
    cycles: list[list[str]] = []
    seen: set[tuple[str, ...]] = set()
    for root in deps:
        if color[root] != white:
            continue
        stack: list[tuple[str, list[str]]] = [(root, sorted(deps[root]))]
        path = [root]
        color[root] = grey
        while stack:
            node, todo = stack[-1]
            if not todo:
                color[node] = black
                stack.pop()
                path.pop()
                continue
            nxt = todo.pop(0)
            if nxt not in color:
                continue
            if color[nxt] == grey:
                cycle = path[path.index(nxt) :]
                key = _rotate(cycle)
                if key not in seen:
                    seen.add(key)
                    cycles.append(list(key))
            elif color[nxt] == white:
                color[nxt] = grey
                stack.append((nxt, sorted(deps[nxt])))
                path.append(nxt)
    return cycles


def _rotate(cycle: list[str]) -> tuple[str, ...]:
    start = cycle.index(min(cycle))
    return tuple(cycle[start:] + cycle[:start])


def _levels(deps: Mapping[str, frozenset[str]]) -> dict[str, int]:
    """Longest-path depth of each step (Kahn's order); the graph is acyclic here."""
    level: dict[str, int] = {}
    remaining = {sid: set(d) for sid, d in deps.items()}
    dependents: dict[str, list[str]] = {sid: [] for sid in deps}
    for sid, d in deps.items():
        for dep in d:
            dependents[dep].append(sid)
    frontier = [sid for sid, d in remaining.items() if not d]
    for sid in frontier:
        level[sid] = 0
    while frontier:
        nxt: list[str] = []
        for sid in frontier:
            for child in dependents[sid]:
                level[child] = max(level.get(child, 0), level[sid] + 1)
                remaining[child].discard(sid)
                if not remaining[child]:
                    nxt.append(child)
        frontier = nxt
    return level


def _schema_error(value: Any, schema: Mapping[str, Any]) -> jsonschema.ValidationError | None:
    """The most relevant error of ``value`` against a tool's argument schema, if any. The
    owner's schema: a regex RE2 cannot run, or a schema jsonschema cannot use, is left to
    the tool at run time (``json_schema``: RE2, bounded evaluation)."""
    validator = validator_for(schema, strict_patterns=False)
    return None if validator is None else validator.first_error(value)
