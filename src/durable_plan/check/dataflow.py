"""A step's expressions: each parsed once, what it reads (the dependency edges, ``prior.<id>``
reads), and the mistakes models make often (a bare word, a literal in bind, a function that
would not replay), with the fix."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from durable_plan import expressions
from durable_plan.check.checked import CheckedBody
from durable_plan.check.kinds import KindChecks
from durable_plan.expressions import Expression, ExpressionSyntaxError
from durable_plan.expressions.templates import Template, parse_template, template_expressions
from durable_plan.language.agent_step import AGENT_TOOL, TEMPLATED
from durable_plan.language.control_steps import (
    ALL_BODY_NAMES,
    BODY_NAMES,
    KIND_RULES,
    LOOPS,
    MAP,
    REDUCE,
)
from durable_plan.language.plan import Step
from durable_plan.language.plan_limits import (
    MAX_EXPRESSION_CHARS,
    MAX_PLAN_EXPRESSION_CHARS,
    brief,
)

_Parsed = tuple[
    dict[str, Expression], Expression | None, set[str], dict[str, Template], CheckedBody | None
]


class DataflowChecks(KindChecks):
    """Bindings, conditions, templates and map bodies; ``returns``."""

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
                    self._suggest(ref, ids, "list ids of other steps"),
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
            f"JSONata syntax error in {brief(source, 200)}: {exc}",
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
                    self._suggest(ref, ids, "use the id of an earlier step"),
                    step.id,
                    fld,
                )
            else:
                deps.add(ref)
                edge_fields.setdefault(ref, fld)
        if expr.prior_paths or expr.prior_dynamic:
            self._check_prior(step, fld, expr)
        if expr.input_reads and self.declared_inputs is not None:
            self._check_inputs(step, fld, expr.input_reads, self.declared_inputs)
        if expr.is_dynamic:
            dynamic_fields.append(f"{fld} ({', '.join(expr.dynamic)})")

    def _check_inputs(
        self, step: Step, fld: str, reads: tuple[str, ...], declared: tuple[str, ...]
    ) -> None:
        """A plan file's ``inputs.<name>``: only the names it declares (a misspelt input is a
        problem here, not a step failure at run time)."""
        listed = ", ".join(declared) if declared else "none"
        for name in reads:
            if name in declared:
                continue
            fix = (
                f"declare it under inputs.properties, or read one of: {listed}"
                if declared
                else f"declare the inputs: `inputs: {{type: object, properties: {{{name}: ...}}}}`"
            )
            self.add(
                "unknown_input",
                f"reads inputs.{name}, but the file declares no input '{name}' (declared: "
                f"{listed})",
                fix,
                step.id,
                fld,
            )

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
        if not expr.bare_names:
            return
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
        if not expr.functions:
            return  # a plain path: nothing to refuse
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
                    self._suggest(ref, ids, "list step ids"),
                    None,
                    "returns",
                )
