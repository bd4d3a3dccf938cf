"""The engine's shortcuts give exactly what the general path gives.

A plain ``steps.a.b`` binding is parsed without JSONata and read without it when
the values allow (``expressions._read_simple``). These tests hold the shortcut to
the metered JSONata evaluation it replaces: the same analysis, the same value or
error, and the same evaluation steps charged to the plan's budget, including at
every limit (small limits here, so the edges are reachable).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from durable_plan import expressions
from durable_plan.expressions import Budget, parse, parse_with_jsonata
from durable_plan.expressions import analysis as expression_analysis
from durable_plan.language.errors import StepError
from durable_plan.language.plan_limits import ExpressionLimits
from tests.support.helpers import examples

NAMES = st.one_of(
    st.sampled_from(
        [
            "a",
            "b",
            "x",
            "steps",
            "_",
            "v2",
            "and",
            "or",
            "in",
            "true",
            "false",
            "null",
            "function",
            "lambda",
            "not",
            "1a",
            "a-b",
            "a b",
            "",
            "$x",
            "`a`",
            "é",
            "A_1",
        ]
    ),
    st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,6}", fullmatch=True),
)
KEYS = st.sampled_from(["a", "b", "x", "steps", "v2", "and", "true", "é"])
PATH_KEYS = st.sampled_from(["a", "b", "x", "steps", "v2"])
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, 2.0, -3.0, 1.5, 2.0**60]),
    st.text(max_size=5),
    st.text(alphabet="ab", min_size=40, max_size=140),
)
LONG_TEXT = st.text(alphabet="ab", min_size=60, max_size=130)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=14), st.dictionaries(KEYS, inner, max_size=4)),
    max_leaves=30,
)
LIMITS = st.builds(
    ExpressionLimits,
    max_steps=st.integers(1, 60),
    max_plan_steps=st.integers(0, 80),
    max_string=st.integers(20, 120),
    max_array=st.integers(2, 12),
    max_value_bytes=st.integers(10, 400),
)


def _source(names: list[str], prefix: str) -> str:
    return prefix + ".".join(names)


def _outcome(expr: expressions.Expression, scope: dict[str, Any], limits: ExpressionLimits) -> Any:
    budget = Budget(limits)
    try:
        result: Any = expressions.evaluate(expr, scope, deterministic=False, budget=budget)
    except StepError as exc:
        result = (type(exc).__name__, str(exc))
    return result, budget.remaining, expressions.first_missing(expr, scope)


def _analysis(expr: expressions.Expression) -> tuple[Any, ...]:
    return (expr.refs, expr.dynamic, expr.paths, expr.functions, expr.required, expr.bare_names)


def _parses_as_jsonata_does(source: str) -> None:
    """The shortcut's parse is the reference's: the same analysis, or the same error."""
    try:
        reference = parse_with_jsonata(source)
    except expressions.ExpressionSyntaxError as exc:
        with pytest.raises(expressions.ExpressionSyntaxError) as raised:
            parse(source)
        assert str(raised.value) == str(exc)
        return
    fast = parse(source)
    assert _analysis(fast) == _analysis(reference)
    assert fast == reference


@settings(max_examples=examples(400), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    names=st.lists(NAMES, min_size=0, max_size=4),
    prefix=st.sampled_from(["steps.", "steps", "$.steps.", " steps."]),
)
def test_plain_paths_parse_as_jsonata_does(names: list[str], prefix: str) -> None:
    source = _source(names, prefix)
    _parses_as_jsonata_does(source)


@st.composite
def paths_and_results(draw: st.DrawFn) -> tuple[list[str], dict[str, Any]]:
    """A path and results that mostly hold it (a leaf of any kind), sometimes not."""
    names = draw(st.lists(PATH_KEYS, min_size=1, max_size=4))
    steps: Any = draw(st.one_of(VALUES, LONG_TEXT, st.lists(st.integers(0, 3), max_size=14)))
    for name in reversed(names):
        others = draw(st.dictionaries(KEYS, VALUES, max_size=2))
        steps = {**others, name: steps} if draw(st.integers(0, 9)) else others
    if not isinstance(steps, dict):
        steps = {}
    return names, steps


@settings(max_examples=examples(1500), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=paths_and_results(), limits=LIMITS)
def test_plain_paths_evaluate_as_jsonata_does(
    case: tuple[list[str], dict[str, Any]], limits: ExpressionLimits
) -> None:
    names, steps = case
    source = "steps." + ".".join(names)
    if expression_analysis._simple_path(source) is None:
        return  # a keyword or a non-ASCII name: JSONata handles it, no shortcut
    fast = parse(source)
    reference = parse_with_jsonata(source)
    scope = {"steps": steps}
    assert _outcome(fast, scope, limits) == _outcome(reference, scope, limits)


def test_the_shortcut_is_taken() -> None:
    """Guards the speed-up itself: a plain path over dicts needs no JSONata instance."""
    expr = parse("steps.a.b")
    assert expr.simple_path == ("a", "b")
    budget = Budget()
    assert expressions.evaluate(
        expr, {"steps": {"a": {"b": [1, 2, 3]}}}, deterministic=True, budget=budget
    ) == (True, [1, 2, 3])
    assert expr._cache == []  # never compiled
    assert budget.limits.max_plan_steps - budget.remaining == 4 + 2


def test_a_plans_meter_is_reused_without_carrying_state() -> None:
    """One meter per plan: an exceeded evaluation and a map's loop variables stay behind."""
    budget = Budget(ExpressionLimits(max_steps=50, max_plan_steps=1_000))
    runaway = parse("$map([1..100], function($v) { $v * 2 })")
    with pytest.raises(StepError, match="more than the limit of 50 evaluation steps"):
        expressions.evaluate(runaway, {"steps": {}}, deterministic=True, budget=budget)
    assert (
        expressions.evaluate(parse("1 + 1"), {"steps": {}}, deterministic=True, budget=budget)[1]
        == 2
    )
    item = parse("$item")
    scope_in_map = {"steps": {}, "item": 7}
    assert expressions.evaluate(item, scope_in_map, deterministic=True, budget=budget) == (True, 7)
    assert expressions.evaluate(item, {"steps": {}}, deterministic=True, budget=budget) == (
        False,
        None,
    )


@settings(max_examples=examples(400), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    elements=st.lists(st.lists(NAMES, min_size=0, max_size=3), min_size=0, max_size=4),
    prefix=st.sampled_from(["steps.", "steps", "$.steps."]),
    separator=st.sampled_from([",", ", ", " , ", ",\n", ",\u00a0", ";"]),
    brackets=st.sampled_from([("[", "]"), ("[ ", " ]"), ("(", ")"), ("[", "]]")]),
)
def test_lists_of_plain_paths_parse_as_jsonata_does(
    elements: list[list[str]], prefix: str, separator: str, brackets: tuple[str, str]
) -> None:
    source = brackets[0] + separator.join(_source(n, prefix) for n in elements) + brackets[1]
    _parses_as_jsonata_does(source)


@st.composite
def lists_and_results(draw: st.DrawFn) -> tuple[list[list[str]], dict[str, Any]]:
    """Paths into one set of results (each mostly held, with a leaf of any kind)."""
    paths: list[list[str]] = []
    steps: dict[str, Any] = {}
    for _ in range(draw(st.integers(1, 4))):
        names, results = draw(paths_and_results())
        paths.append(names)
        steps = {**steps, **results}
    return paths, steps


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=lists_and_results(), limits=LIMITS, spaced=st.booleans())
def test_lists_of_plain_paths_evaluate_as_jsonata_does(
    case: tuple[list[list[str]], dict[str, Any]], limits: ExpressionLimits, spaced: bool
) -> None:
    paths, steps = case
    source = "[" + (", " if spaced else ",").join("steps." + ".".join(p) for p in paths) + "]"
    if expression_analysis._simple_array(source) is None:
        return
    fast = parse(source)
    reference = parse_with_jsonata(source)
    scope = {"steps": steps}
    assert _outcome(fast, scope, limits) == _outcome(reference, scope, limits)


def test_the_list_shortcut_is_taken() -> None:
    expr = parse("[steps.a.n, steps.b]")
    assert expr.simple_array == (("a", "n"), ("b",))
    budget = Budget()
    scope = {"steps": {"a": {"n": 1}, "b": {"x": "y"}}}
    assert expressions.evaluate(expr, scope, deterministic=True, budget=budget) == (
        True,
        [1, {"x": "y"}],
    )
    assert expr._cache == []  # never compiled
    assert budget.limits.max_plan_steps - budget.remaining == 1 + 4 + 3 + 1
