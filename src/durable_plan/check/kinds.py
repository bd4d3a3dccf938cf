"""Each step kind checks itself: a tool step (known, plannable, its arguments), an agent step,
a map or reduce (over, concurrency, and its body as a step), an exit."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from durable_plan.check.agent_args import AgentCatalogView, check_agent_args
from durable_plan.check.arguments import ArgumentChecks
from durable_plan.check.base import _UNION_TAGS
from durable_plan.language.agent_step import AGENT_RULES, AGENT_TOOL, MAX_ITERATIONS
from durable_plan.language.control_steps import (
    BODY_FIELDS,
    CONTROL,
    DEFAULT_CONCURRENCY,
    EXIT,
    EXIT_ARGS,
    KIND_RULES,
    LOOPS,
    MAP,
    MAP_ARGS,
    MAX_CONCURRENCY,
    REDUCE_ARGS,
)
from durable_plan.language.errors import APPROVAL_REFUSAL
from durable_plan.language.plan import Step, rare_field_text


class KindChecks(ArgumentChecks):
    """The step's ``tool``: which kind it is, and that kind's own rules."""

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
        if spec is None:
            plannable = self.catalog.plannable  # sorted: only a refusal lists them
            close = self._closest(step.tool, plannable)
            hint = f"did you mean '{close}'? " if close else ""
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
            max_rounds=catalog.max_agent_rounds if catalog is not None else MAX_ITERATIONS,
        )

        def report(code: Any, message: str, fix: str, fld: str) -> None:
            self.add(code, message, fix, step.id, fld)

        check_agent_args(step.args, step.bind, view, report, self._closest, self._listed_all)
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
                fix = rare_field_text("step", loc) or "see the plan schema"
                self.add("schema", str(err["msg"]), fix, step.id, f"args.do.{loc}")
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
            close = self._closest(name, names)
            hint = f"did you mean '{close}'? " if close else ""
            where = "bind" if name in step.bind else "args"
            self.add(
                "bad_argument",
                f"a {step.tool} step has no argument '{name}'",
                f"{hint}its arguments are: {', '.join(names)}",
                step.id,
                f"{where}.{name}",
            )
