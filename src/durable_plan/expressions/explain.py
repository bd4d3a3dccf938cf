"""Why an expression matched nothing, in words a model can act on ("steps.lookup has keys
name, hp, armour"), and where a step's expressions are."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from durable_plan.expressions.analysis import Expression
from durable_plan.expressions.reads import PRIOR_ROOT


def explain_no_match(expr: Expression, scope: Mapping[str, Any]) -> str:
    """Say where the expression's first broken path stops, listing the keys that exist."""
    steps = scope.get("steps", {})
    for path in expr.paths:
        hint = _walk(steps, path)
        if hint:
            return hint
    for path in expr.prior_paths:
        hint = _walk(scope.get(PRIOR_ROOT, {}), path, PRIOR_ROOT)
        if hint:
            return hint
    present = ", ".join(sorted(steps)) or "none"
    return f"steps that have results: {present}"


def first_missing(expr: Expression, scope: Mapping[str, Any]) -> str | None:
    """Where a required path into a step that has a result stops matching, or None.

    JSONata forgives a misspelled field in many places: ``steps.t.dsk = "x"`` is
    false, ``[steps.a.damage, steps.b.dmg]`` silently drops the second item. A
    plan must not guess, so a read of a field the step's result does not have
    fails the step. Reads of steps that have no result (not taken, seen by a
    ``join: any`` step) and reads inside conditionals or ``$exists`` are allowed.
    """
    steps = scope.get("steps", {})
    for path in expr.required:
        if path and path[0] in steps:
            hint = _walk(steps, path)
            if hint:
                return hint
    if expr.prior_required:
        prior = scope.get(PRIOR_ROOT, {})
        for path in expr.prior_required:
            if path and path[0] in prior:
                hint = _walk(prior, path, PRIOR_ROOT)
                if hint:
                    return hint
    return None


def _walk(steps: Mapping[str, Any], path: tuple[str, ...], root: str = "steps") -> str | None:
    current: Any = steps
    walked = [root]
    for name in path:
        if type(current) is dict or isinstance(current, Mapping):
            if name not in current:
                keys = ", ".join(str(k) for k in current) or "no keys"
                return f"{'.'.join(walked)} has keys {keys}"
            current = current[name]
        elif isinstance(current, list):
            items = [item for item in current if isinstance(item, Mapping)]
            if not any(name in item for item in items):
                item_keys = sorted({str(k) for item in items for k in item})
                listed = ", ".join(item_keys) if item_keys else "no keys"
                return f"{'.'.join(walked)} is a list whose items have keys {listed}"
            return None
        else:
            kind = "null" if current is None else type(current).__name__
            article = "an" if kind[0] in "aeiou" else "a"
            return f"{'.'.join(walked)} is {article} {kind}, not an object"
        walked.append(name)
    return None


def iter_sources(step_bind: Mapping[str, str], when: str | None) -> Iterator[tuple[str, str]]:
    """(field, source) pairs of a step's expressions, for checks and error messages."""
    for name, source in step_bind.items():
        yield f"bind.{name}", source
    if when is not None:
        yield "when", when
