"""Evaluating an expression over a scope: deterministic, bounded, never a silent ``None``.

jsonata-python is not deterministic on its own (``$now``/``$millis`` read the wall
clock, ``$random``/``$shuffle`` the global RNG, ``$eval`` runs further code), so those
functions are replaced on every instance: ``$eval`` always refuses, and in durable mode
the clock and random functions refuse too (the checker rejects them first, this is the
second line of defence). Plain paths (``steps.a.b``) are read without evaluating JSONata
when the values allow, with the same result, error and budget charge.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import jsonata
from jsonata.jexception import JException

from durable_plan.expressions.analysis import (
    LOOP_VARIABLES,
    NONDETERMINISTIC,
    Expression,
    _jsonata_message,
)
from durable_plan.expressions.meter import _from_jsonata, _Meter
from durable_plan.expressions.regex import _re2_engine, _refuse
from durable_plan.language.errors import StepError
from durable_plan.language.plan_limits import (
    DEFAULT_LIMITS,
    MAX_INT_BITS,
    ExpressionLimits,
    LimitExceeded,
    plain_json,
)


def _instance(expr: Expression, *, deterministic: bool) -> Any:
    """The expression's parsed instance, made current and stripped of unsafe functions.

    The instance parsed at check time is reused (parsing costs more than
    evaluating). jsonata applies lambdas through a thread-local "current
    instance" that each construction overwrites, so it is pointed back at this
    one before every evaluation; the environment is rebound per evaluation, so
    the result depends only on the expression and the scope.
    """
    if not expr._cache:
        expr._cache.append(jsonata.Jsonata(expr.source, regex_engine=_re2_engine))
    compiled = expr._cache[0]
    jsonata.Jsonata.CURRENT.jsonata = compiled
    if expr._cache[1:] == [deterministic]:
        return compiled  # already set up for this mode (the settings below persist)
    compiled.set_output_convert_nulls(False)
    # Scopes hold JSON only (tool results pass as_json, workflow results json.loads),
    # and jsonata's own input walk is recursive and costs a pass over every result.
    compiled.set_validate_input(False)
    compiled.register_lambda("eval", _refuse("eval", "plans must be readable before they run"))
    for name in sorted(NONDETERMINISTIC):
        if deterministic:
            reason = "durable plans must replay identically; pass values in args"
            compiled.register_lambda(name, _refuse(name, reason))
        else:
            compiled.register_function(name, jsonata.Jsonata.static_frame.lookup(name))
    expr._cache[1:] = [deterministic]
    return compiled


class Budget:
    """What is left of a plan's evaluation steps, shared by all its expressions.

    Deterministic like the per-evaluation meter: the plan evaluates its
    expressions in the same order on every worker, so it runs out at the same
    expression everywhere.
    """

    def __init__(self, limits: ExpressionLimits = DEFAULT_LIMITS) -> None:
        self.limits = limits
        self.remaining = limits.max_plan_steps
        self._meter: _Meter | None = None

    def meter(self, allowed: int) -> _Meter:
        """The plan's meter, reset for one evaluation of at most ``allowed`` steps.

        One per plan: evaluations of a plan never overlap (each runs to the end
        without yielding), and its guarded natives are built once, not per binding.
        """
        if self._meter is None:
            self._meter = _Meter(self.limits)
        self._meter.reset(allowed)
        return self._meter

    def allowance(self) -> int:
        if self.remaining <= 0:
            raise LimitExceeded(
                f"the plan's expressions used up the plan's limit of "
                f"{self.limits.max_plan_steps} evaluation steps"
            )
        return min(self.limits.max_steps, self.remaining)

    def spend(self, steps: int) -> None:
        self.remaining -= steps


def evaluate(
    expr: Expression,
    scope: Mapping[str, Any],
    *,
    deterministic: bool,
    budget: Budget | None = None,
) -> tuple[bool, Any]:
    """Evaluate over ``scope``; returns (matched, value) with JSON values only.

    ``deterministic=True`` (workflow code) refuses the clock and random
    functions, so replay sees identical results. ``budget`` is the plan's
    remaining evaluation steps; without one, a single evaluation's limits apply.
    Any bound exceeded raises ``LimitExceeded`` (a ``StepError``) naming it.
    """
    budget = budget if budget is not None else Budget()
    allowed = budget.allowance()
    read = None
    if expr.simple_path is not None:
        read = _read_simple(expr.simple_path, scope, budget.limits)
    elif expr.simple_array is not None:
        read = _read_array(expr.simple_array, scope, budget.limits)
    if read is not None and read[1] <= allowed:
        budget.spend(read[1])
        value = read[0]
        if type(value) in _CHECKED_SCALARS and budget.limits.max_value_bytes >= 8:
            return True, value  # ``_read_simple`` checked it as ``to_json`` would
        return True, to_json(value, max_bytes=budget.limits.max_value_bytes)
    meter = budget.meter(allowed)
    compiled = _instance(expr, deterministic=deterministic)
    bindings = meter.bindings
    if any(name in scope for name in LOOP_VARIABLES):
        bindings = dict(bindings)  # the meter's own stay as they are
        for name in LOOP_VARIABLES:  # a map or reduce body: $item, $index, $accumulator
            if name in scope:
                bindings[name] = scope[name]
    try:
        raw = compiled.evaluate(scope, bindings)
    except StepError:
        raise
    except JException as exc:
        raise StepError(_jsonata_message(exc)) from None
    except RecursionError:
        raise StepError("expression recursed too deeply") from None
    except Exception as exc:
        inner = exc.__cause__ if isinstance(exc.__cause__, StepError) else None
        if inner is not None:
            raise inner from None
        raise StepError(f"{type(exc).__name__}: {exc}") from None
    finally:
        budget.spend(meter.steps)
    if meter.exceeded is not None:
        raise meter.exceeded
    if raw is None:
        return False, None
    return True, to_json(raw, max_bytes=budget.limits.max_value_bytes)


_CHECKED_SCALARS = frozenset({int, bool})
"""Values ``_read_simple`` hands back already bounded (an integer's width): ``to_json`` of
one is the value itself (it counts each as at most 8 bytes), and its walk is one less per
binding. Not a float: ``to_json`` turns a whole one into an integer (JSONata's numbers),
and a binding must read ``3.0`` as ``3`` on every path."""


def _read_simple(
    path: tuple[str, ...], scope: Mapping[str, Any], limits: ExpressionLimits
) -> tuple[Any, int] | None:
    """``steps.a.b`` read directly: (value, the evaluation steps JSONata's meter counts).

    Only where the result is certain to be JSONata's: every step of the way a plain
    dict holding the key, and a value the meter lets through. Anything else (a list
    on the way, a missing key, null, a value over a limit) returns None and is
    evaluated by JSONata, errors and all. The step count (the path node, one per
    name, and what ``_Meter.measure`` charges: strings once, arrays twice, as
    JSONata's path and its last step both measure them) is pinned against the
    metered evaluation by ``tests/unit/expressions/test_expressions.py``.
    """
    current: Any = scope.get("steps")
    for name in path:
        if type(current) is not dict:
            return None
        current = current.get(name)
    steps = 2 + len(path)
    kind = type(current)
    if kind is dict or kind is bool:
        return current, steps
    if kind is str:
        if len(current) > limits.max_string:
            return None
        return current, steps + len(current) // 64
    if kind is list:
        if len(current) > limits.max_array:
            return None
        return current, steps + 2 * (len(current) // 2)
    if kind is int:
        return (current, steps) if current.bit_length() <= MAX_INT_BITS else None
    if kind is float:
        return (current, steps) if math.isfinite(current) else None
    return None  # null, a missing key (None too), or not JSON


def _read_array(
    paths: tuple[tuple[str, ...], ...], scope: Mapping[str, Any], limits: ExpressionLimits
) -> tuple[Any, int] | None:
    """``[steps.a.b, steps.c]`` read directly: (the list, the steps JSONata's meter counts).

    Only where the result is certain to be JSONata's: every element read by
    ``_read_simple`` and none a list (JSONata's array constructor splices a path's list
    into the result) or missing (it drops an undefined element), and the list within the
    array limit. The count (the constructor's node, each path's, and what
    ``_Meter.measure`` charges for the list built) is pinned against the metered
    evaluation by ``tests/unit/expressions/test_fast_paths.py``."""
    values = []
    steps = 1
    for path in paths:
        read = _read_simple(path, scope, limits)
        if read is None or type(read[0]) is list:
            return None
        values.append(read[0])
        steps += read[1]
    if len(values) > limits.max_array:
        return None
    return values, steps + len(values) // 2


def to_json(value: Any, *, max_bytes: int | None = None) -> Any:
    """Convert JSONata's sequences and null sentinel back to plain, bounded JSON values."""
    return plain_json(value, max_bytes=max_bytes, adapt=_from_jsonata)
