"""Dataflow against return shapes: every path a plan reads into a step's result, and every
bound value's type, held against what that step returns, before anything runs.

``steps.lookup.ac`` when ``look_up_monster`` returns ``{name, hp, armour}`` would fail the
step that reads it, after ``lookup`` ran (and whatever side effect it had); here it is a
problem naming the step, the field, what exists there and the likely fix, with every such
problem at once. A binding whose declared type cannot be the parameter's (a string field
into an integer argument, a literal of the wrong type) is one too. Only what a declared
shape rules out is refused (``walk``); unknown shapes and paths the analysis cannot
follow pass, as before.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from durable_plan.check.arguments import _resolve_ref, _schema_error
from durable_plan.check.base import MAX_PROBLEMS
from durable_plan.check.checked import CheckedBody
from durable_plan.check.dataflow import DataflowChecks, _Parsed
from durable_plan.check.shapes.constructed import ConstructedTypes, Read, constructed_problem
from durable_plan.check.shapes.results import ResultShape, step_result_shape
from durable_plan.check.shapes.text import listing
from durable_plan.check.shapes.walk import (
    Reached,
    Rooted,
    RuledOut,
    ShapeWalker,
    null_by_default,
    type_words,
    types_overlap,
)
from durable_plan.expressions import Expression
from durable_plan.expressions.templates import Template, template_expressions
from durable_plan.language.agent_step import AGENT_TOOL
from durable_plan.language.control_steps import CONTROL, MAP, REDUCE
from durable_plan.language.plan import Step
from durable_plan.language.plan_limits import brief

_SHAPED_KINDS = frozenset({AGENT_TOOL, MAP, REDUCE})
"""Step kinds whose results have a shape of ours, whatever the catalogue says."""
_SEARCH_DEPTH = 3
"""How deep a misplaced field is looked for ("it is at steps.order.customer.email")."""
MAX_SUGGESTION_COMPARISONS = 4_000
"""Field names compared for "did you mean" in one plan (difflib, about 20 us each): past
it, a problem lists the fields instead. A plan of many wrong paths into a wide shape must
not cost seconds of workflow code."""


class ShapeChecks(DataflowChecks):
    """Paths into results against the results' shapes; bound values against parameters."""

    def _check_shapes(self, steps: Sequence[Step], parsed: Mapping[str, _Parsed]) -> None:
        counts: dict[str, int] = {}
        for step in steps:
            counts[step.id] = counts.get(step.id, 0) + 1
        # A duplicated id is already a problem, and which result it reads is unclear.
        by_id = {s.id: s for s in steps if counts[s.id] == 1}
        self._shapes: dict[str, ResultShape | None] = {}
        self._by_id = by_id
        self._walker = ShapeWalker()
        self._seen_paths: set[tuple[str, str, tuple[str, ...]]] = set()
        # Many steps read the same field of one result, and a binding is walked twice
        # (its path, then its type): each walk is done once per plan.
        self._walks: dict[tuple[str, ...], Reached | RuledOut] = {}
        self._wanted: dict[tuple[str, str], frozenset[str]] = {}
        self._present: dict[tuple[str, ...], bool] = {}
        self._comparisons_left = MAX_SUGGESTION_COMPARISONS
        # No tool declares a shape and no step is of a kind whose result is ours: only
        # literals in bind are left to check (most plans of tools without shapes).
        if self.catalog is not None and not self.catalog.return_shapes:
            return  # checked as before return shapes (a history recorded before them)
        shaped = (self.catalog is not None and self.catalog.has_shapes) or any(
            s.tool in _SHAPED_KINDS for s in steps
        )
        if not shaped and self.catalog is None:
            return
        for step in steps:
            if step.id not in by_id or step.id not in parsed:
                continue
            bind, when, _, templates, body = parsed[step.id]
            if shaped:
                for fld, expr, arg in _expressions(bind, when, templates, body):
                    for path in expr.shape_paths:
                        if _required(path, expr):
                            self._check_path(step, fld, path, arg)
            if step.tool not in CONTROL and step.tool != AGENT_TOOL:
                self._check_bound_types(step, step.tool, bind, "bind.", shaped)
            if body is not None and body.tool not in CONTROL and body.tool != AGENT_TOOL:
                self._check_bound_types(step, body.tool, body.bind, "args.do.bind.", shaped)

    def _shape_of(self, step_id: str) -> ResultShape | None:
        if step_id not in self._shapes:
            step = self._by_id.get(step_id)
            self._shapes[step_id] = (
                step_result_shape(step, self.catalog) if step is not None else None
            )
        return self._shapes[step_id]

    def _walk(self, result: ResultShape, path: tuple[str, ...]) -> Reached | RuledOut:
        """``path[1:]`` through the result of step ``path[0]`` (once per plan)."""
        walked = self._walks.get(path)
        if walked is None:
            walked = self._walks[path] = self._walker.walk(result.shape, path[1:])
        return walked

    def _check_path(self, step: Step, fld: str, path: tuple[str, ...], arg: str | None) -> None:
        if len(path) < 2 or path[0] == step.id or len(self.problems) >= MAX_PROBLEMS:
            return  # (past MAX_PROBLEMS the plan is refused anyway, and no more are listed)
        key = (step.id, fld, path)
        if key in self._seen_paths:
            return
        self._seen_paths.add(key)
        result = self._shape_of(path[0])
        if result is None:
            return
        walked = self._walk(result, path)
        if isinstance(walked, RuledOut):
            message, fix = self._describe(path, walked, result, arg)
            self.add("no_field", message, fix, step.id, fld)

    def _describe(
        self, path: tuple[str, ...], ruled: RuledOut, result: ResultShape, arg: str | None
    ) -> tuple[str, str]:
        """What exists where the path stops, and the most likely fix."""
        at = ruled.at + 1  # index in path (path[0] is the step id)
        name = path[at]
        where = "steps." + ".".join(path[:at])
        listed = listing(ruled.fields)
        if ruled.fields and not ruled.kinds:
            has = (
                f"{result.source} {listed}"
                if at == 1 and not ruled.items
                else f"{'its items have' if ruled.items else 'it has'} {listed}"
            )
            message = f"{where} has no field '{name}': {has}"
        elif ruled.kinds and not ruled.fields:
            what = type_words(ruled.kinds)
            items = "a list of items that are each " if ruled.items else ""
            message = f"{where} is {items}{what}, which has no field '{name}'"
        elif ruled.fields:
            message = (
                f"{where} has no field '{name}': it is {type_words(ruled.kinds)}, or an object "
                f"with {listed}"
            )
        else:
            message = f"{where} cannot have a field '{name}'"
        return message, self._fix(path, at, ruled, arg, where, result)

    def _fix(
        self,
        path: tuple[str, ...],
        at: int,
        ruled: RuledOut,
        arg: str | None,
        where: str,
        result: ResultShape,
    ) -> str:
        name, rest = path[at], path[at + 1 :]
        tail = "".join(f".{n}" for n in rest)
        fields = list(ruled.fields)
        close = self._close(name, fields, 0.5)
        if close:
            return f"did you mean '{close[0]}'? ({where}.{close[0]}{tail})"
        if rest and self._walk_from(ruled, rest) is not None:
            return f"read {where}{tail} (without '{name}')"
        if at >= 2:  # a name too many before it: steps.a.stats.name for steps.a.name
            shorter = (*path[1 : at - 1], *path[at:])
            if isinstance(self._walker.walk(result.shape, shorter), Reached):
                return f"read steps.{'.'.join((path[0], *shorter))} (without '{path[at - 1]}')"
        deeper = self._find_field(list(ruled.alternatives), name)
        if deeper is not None:
            return f"it is at {where}.{'.'.join(deeper)}{tail}"
        # The argument it binds often names the field meant ("armour": "steps.lookup.ac").
        by_arg = self._close(arg, fields, 0.8) if arg else []
        if by_arg and not rest:
            return f"did you mean '{by_arg[0]}'? ({where}.{by_arg[0]})"
        if fields:
            return f"read one of its fields: {listing(ruled.fields)}"
        return f"read {where} itself"

    def _close(self, name: str, fields: list[str], cutoff: float) -> list[str]:
        """The field most like ``name``, within the plan's budget of comparisons."""
        if len(fields) > self._comparisons_left:
            return []
        self._comparisons_left -= len(fields)
        return difflib.get_close_matches(name, fields, n=1, cutoff=cutoff)

    def _walk_from(self, ruled: RuledOut, rest: tuple[str, ...]) -> Reached | RuledOut | None:
        """``rest`` from where the path stopped: does it exist there (one level too deep)?"""
        outcomes = [self._walker.walk(alt, rest) for alt in ruled.alternatives]
        reached = [o for o in outcomes if isinstance(o, Reached)]
        return reached[0] if reached else None

    def _find_field(self, alts: list[Rooted], name: str) -> tuple[str, ...] | None:
        """Where ``name`` is, a few objects deeper (the field one level too shallow)."""
        frontier: list[tuple[tuple[str, ...], Rooted]] = [((), a) for a in alts]
        for _ in range(_SEARCH_DEPTH):
            found: list[tuple[tuple[str, ...], Rooted]] = []
            for prefix, alt in frontier:
                for field, child in self._walker.fields_of([alt]):
                    if field == name and prefix:
                        return (*prefix, field)
                    found += [((*prefix, field), c) for c in self._walker.expand_known(child)]
            frontier = found[:200]
        return None

    def _check_bound_types(
        self, step: Step, tool: str, bind: Mapping[str, Expression], prefix: str, shaped: bool
    ) -> None:
        """A bound value whose declared type cannot be the argument's (``shaped``: some
        result has a known shape, else only literals are checked)."""
        spec = self.catalog.tools.get(tool) if self.catalog is not None else None
        schema = spec.input_schema if spec is not None else None
        props = schema.get("properties") if isinstance(schema, Mapping) else None
        if not isinstance(schema, Mapping) or not isinstance(props, Mapping):
            return
        for name, expr in bind.items():
            prop = props.get(name)
            if not isinstance(prop, Mapping):
                continue
            if expr.literal:
                self._check_bound_literal(step, tool, name, expr.literal[0], prop, schema, prefix)
                continue
            if expr.constructed is not None:
                self._check_constructed(step, tool, name, expr, prop, schema, prefix, shaped)
                continue
            path = expr.simple_path
            if not shaped or path is None or path[0] == step.id:
                continue
            result = self._shape_of(path[0])
            if result is None:
                continue
            walked = self._walk(result, path)
            if not isinstance(walked, Reached):
                continue  # a missing field: reported as such
            value_types = walked.types(self._walker)
            wanted = self._wanted.get((tool, name))
            if wanted is None:
                wanted = self._walker.value_types(Rooted(prop, schema))
                if null_by_default(prop):
                    wanted = wanted | {"null"}
                self._wanted[(tool, name)] = wanted
            if types_overlap(value_types, wanted):
                continue
            where = "steps." + ".".join(path)
            fields = self._fields_of_type(result, path, walked, wanted)
            fix = (
                f"bind a field that is {type_words(wanted)}: {listing(fields)}"
                if fields
                else f"bind a value that is {type_words(wanted)}"
            )
            self.add(
                "wrong_type",
                f"binding '{name}' reads {where}, which is {type_words(value_types)}, but tool "
                f"'{tool}' takes '{name}' as {type_words(wanted)}",
                fix,
                step.id,
                f"{prefix}{name}",
            )

    def _fields_of_type(
        self, result: ResultShape, path: tuple[str, ...], walked: Reached, wanted: frozenset[str]
    ) -> list[str]:
        """Fields beside the one read (``steps.lookup.hp`` for ``steps.lookup.name``) whose
        type is one of ``wanted``: what to bind instead."""
        where = "steps." + ".".join(path if len(path) == 1 else path[:-1])
        return [
            f"{where}.{f}"
            for f, child in self._walker.fields_of(self._parent(result, path, walked))
            if types_overlap(self._walker.value_types(child), wanted)
        ]

    def _check_constructed(
        self,
        step: Step,
        tool: str,
        name: str,
        expr: Expression,
        prop: Mapping[str, Any],
        schema: Mapping[str, Any],
        prefix: str,
        shaped: bool,
    ) -> None:
        """An array or object constructor (``[steps.a.price, steps.b.price]``), typed part
        by part against the argument (``constructed.py``)."""
        if expr.constructed is None or len(self.problems) >= MAX_PROBLEMS:
            return

        def read(path: tuple[str, ...]) -> Read | None:
            result = self._shape_of(path[0]) if shaped and path[0] != step.id else None
            walked = self._walk(result, path) if result is not None else None
            if result is None or not isinstance(walked, Reached):
                return None  # unknown, or missing (reported as no_field)
            # join "any": a step it reads may have been not taken, its result undefined.
            present = step.join != "any" and self._always_has(result, path)
            return Read(walked, present)

        def suggest(path: tuple[str, ...], wanted: frozenset[str]) -> list[str]:
            result = self._shape_of(path[0]) if shaped and path[0] != step.id else None
            walked = self._walk(result, path) if result is not None else None
            if result is None or not isinstance(walked, Reached):
                return []
            return self._fields_of_type(result, path, walked, wanted)

        typer = ConstructedTypes(self._walker, read, suggest)
        found = typer.mismatch(expr.constructed, [Rooted(prop, schema)], (name,))
        if found is not None:
            message, fix = constructed_problem(found, name, tool)
            self.add("wrong_type", message, fix, step.id, f"{prefix}{name}")

    def _always_has(self, result: ResultShape, path: tuple[str, ...]) -> bool:
        """Every result of step ``path[0]`` has ``path[1:]`` (once per plan)."""
        has = self._present.get(path)
        if has is None:
            has = self._present[path] = self._walker.always_has(result.shape, path[1:])
        return has

    def _parent(self, result: ResultShape, path: tuple[str, ...], walked: Reached) -> list[Rooted]:
        """The objects whose fields could be bound instead: the step's result itself for a
        whole-result binding, else the object the read field is in."""
        if len(path) == 1:
            return list(walked.alternatives or ())
        parent = self._walker.walk(result.shape, path[1:-1])
        return list(parent.alternatives or ()) if isinstance(parent, Reached) else []

    def _check_bound_literal(
        self,
        step: Step,
        tool: str,
        name: str,
        value: Any,
        prop: Mapping[str, Any],
        schema: Mapping[str, Any],
        prefix: str,
    ) -> None:
        """A literal in ``bind`` (``"'15'"``) is checked like one in ``args``."""
        if value is None and null_by_default(prop):
            return
        sub = dict(prop)
        for key in ("$defs", "definitions"):
            if key in schema and key not in sub:
                sub[key] = schema[key]
        error = _schema_error(value, sub)
        if error is None:
            return
        self.add(
            "wrong_type",
            f"binding '{name}' is the literal {brief(value)}, which tool '{tool}' cannot take: "
            f"{brief(error.message, 200, quote=False)}",
            f"pass a value matching {brief(_resolve_ref(prop, schema), 300)} (literals go "
            f'in args: "args": {{"{name}": ...}})',
            step.id,
            f"{prefix}{name}",
        )


def _required(path: tuple[str, ...], expr: Expression) -> bool:
    """A path whose absence the expression tests (``$exists(steps.a.x) ? steps.a.x :
    ...``, ``steps.a.nick ? steps.a.nick : steps.a.name``) may name a field that is never
    there, and the plan still runs: that path, and every path through it, is not walked."""
    return not any(path[: len(guarded)] == guarded for guarded in expr.guarded_paths)


def _expressions(
    bind: Mapping[str, Expression],
    when: Expression | None,
    templates: Mapping[str, Template],
    body: CheckedBody | None,
) -> Iterator[tuple[str, Expression, str | None]]:
    """(field, expression, the argument it binds) of a step and of its map body."""
    yield from _own(bind, when, templates, "")
    if body is not None:
        yield from _own(body.bind, body.when, body.templates, "args.do.")


def _own(
    bind: Mapping[str, Expression],
    when: Expression | None,
    templates: Mapping[str, Template],
    prefix: str,
) -> Iterator[tuple[str, Expression, str | None]]:
    for name, expr in bind.items():
        yield f"{prefix}bind.{name}", expr, name
    if when is not None:
        yield f"{prefix}when", when, None
    for name, template in templates.items():
        for expr in template_expressions(template):
            yield f"{prefix}args.{name}", expr, None
