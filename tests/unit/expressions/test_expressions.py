"""JSONata analysis (dependencies from the AST, not the text) and safe evaluation."""

from __future__ import annotations

from typing import Any

import pytest

from durable_plan import expressions
from durable_plan.expressions import Expression, ExpressionSyntaxError, evaluate, parse
from durable_plan.language.errors import StepError

SCOPE: dict[str, Any] = {
    "steps": {
        "lookup": {"name": "goblin", "hp": 7, "armour": 15},
        "log": {"actions": [{"player": "aria"}, {"player": "bram"}]},
        "n": 3,
        "nothing": None,
        "obj": {"x": None, "items": [{"price": 2}, {"price": 5}]},
    }
}


def refs(source: str) -> set[str]:
    expr = parse(source)
    assert not expr.is_dynamic, expr.dynamic
    return set(expr.refs)


def value(source: str, scope: dict[str, Any] | None = None, deterministic: bool = False) -> Any:
    matched, result = evaluate(parse(source), scope or SCOPE, deterministic=deterministic)
    assert matched, f"{source} matched nothing"
    return result


def no_match(source: str, scope: dict[str, Any] | None = None) -> str:
    expr = parse(source)
    matched, result = evaluate(expr, scope or SCOPE, deterministic=True)
    assert not matched and result is None
    return expressions.explain_no_match(expr, scope or SCOPE)


# -- dependencies ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("steps.a", {"a"}),
        ("steps.a.b.c", {"a"}),
        ("$lookup(steps, 'a')", {"a"}),
        ('$lookup(steps, "a").x', {"a"}),
        ("steps.`a`", {"a"}),
        ("steps.`a`.`b`", {"a"}),
        ("$$.steps.a", {"a"}),
        ("$.steps.a.x", {"a"}),
        ("$lookup($$.steps, 'a')", {"a"}),
        ("'see steps.manual'", set()),
        ('"steps.a and steps.b"', set()),
        ("steps.a.x & ' (from steps.b)'", {"a"}),
        ("1 + 2", set()),
        ("$string(steps.a)", {"a"}),
        ("$map([1, 2], function($x) { steps.b.v + $x })", {"b"}),
        ("$filter(steps.a.items, function($v) { $v.price > steps.b.min })", {"a", "b"}),
        ("steps.a.ok ? steps.b : steps.c", {"a", "b", "c"}),
        ("{'k': steps.d.x, 'j': [steps.e]}", {"d", "e"}),
        ("steps.a.items[price > 1].name", {"a"}),
        ("steps.a.items[price > $$.steps.f.min]", {"a", "f"}),
        ("[steps.a.damage, steps.b.damage, steps.c.damage]", {"a", "b", "c"}),
        ("$sum(steps.a.items.price)", {"a"}),
        ("($x := steps.a; $x.b)", {"a"}),
        ("steps.a ~> $string()", {"a"}),
        ("steps.a.($$.steps.b.x)", {"a", "b"}),
        ("steps.a.$string($$.steps.c)", {"a", "c"}),
        ("steps.a.items{name: price}", {"a"}),
        ("steps.a.items^(>price).name", {"a"}),
        ("$not(steps.triage.desk = 'treasury' and steps.triage.confidence >= 0.8)", {"triage"}),
        ("steps.a.items[$.price > 1]", {"a"}),
        ("[1, 2, 3][$ > 1]", set()),
    ],
)
def test_dependencies_come_from_the_ast(source: str, expected: set[str]) -> None:
    assert refs(source) == expected


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        ("steps.*", "steps.*"),
        ("steps.**.x", "steps.**"),
        ("$lookup(steps, $name)", "$lookup(steps, <computed>)"),
        ("$lookup(steps, 'a' & 'b')", "$lookup(steps, <computed>)"),
        ("$keys(steps)", "steps"),
        ("$$.steps", "steps"),
        ("steps[0]", "steps"),
        ("*.a", "*"),
        ("**.x", "**"),
        ("$$.*.a", "$$"),
        ("$string($)", "$"),
        ("$each($$, function($v) { $v })", "$$"),
        ("$lookup($$, 'steps').a", "$$"),
    ],
)
def test_reads_the_checker_cannot_name_are_dynamic(source: str, reason: str) -> None:
    expr = parse(source)
    assert expr.is_dynamic
    assert reason in expr.dynamic


def test_paths_are_recorded_for_explanations() -> None:
    assert parse("steps.lookup.armour").paths == (("lookup", "armour"),)
    assert parse("$lookup(steps, 'lookup')").paths == (("lookup",),)
    assert parse("steps.a.items[0].name").paths == (("a", "items", "name"),)


def test_function_names_are_collected() -> None:
    assert {"now", "string"} <= parse("$string($now())").functions
    assert "eval" in parse("$eval('1')").functions
    assert "eval" not in parse("'$eval(1)'").functions


@pytest.mark.parametrize("source", ["steps.a ==", "!steps.a", "a ! b", "(", "[1, 2", "`a", ""])
def test_syntax_errors(source: str) -> None:
    with pytest.raises(ExpressionSyntaxError) as info:
        parse(source)
    assert str(info.value)


def test_syntax_error_says_where() -> None:
    with pytest.raises(ExpressionSyntaxError, match="at character"):
        parse("steps.a.x == 1")
    with pytest.raises(ExpressionSyntaxError, match="no operator '!'"):
        parse("!steps.a.ok")


def test_parse_returns_an_expression_that_keeps_its_source() -> None:
    expr = parse("steps.a")
    assert isinstance(expr, Expression)
    assert expr.source == "steps.a"
    assert expr == parse("steps.a")


# -- evaluation ----------------------------------------------------------------------------


def test_values() -> None:
    assert value("steps.lookup.armour") == 15
    assert value("steps.lookup") == {"name": "goblin", "hp": 7, "armour": 15}
    assert value("steps.log.actions.player") == ["aria", "bram"]
    assert value("steps.log.actions[1].player") == "bram"
    assert value("$lookup(steps, 'lookup').hp") == 7
    assert value("steps.`lookup`.name") == "goblin"
    assert value("$sum(steps.obj.items.price)") == 7
    assert value("steps.n / 2") == 1.5
    assert value("steps.n * 2") == 6 and isinstance(value("steps.n * 2"), int)
    assert value("steps.lookup.hp > 5 and steps.lookup.name = 'goblin'") is True
    assert value("$not(steps.lookup.hp > 5)") is False
    assert value("'see steps.manual'") == "see steps.manual"


def test_null_is_a_value_and_no_match_is_not() -> None:
    assert value("steps.nothing") is None
    assert value("steps.obj.x") is None
    assert value("null") is None
    assert no_match("steps.obj.y")
    assert no_match("steps.missing")


def test_inline_arrays_drop_undefined() -> None:
    assert value("[steps.n, steps.missing, steps.lookup.hp]") == [3, 7]
    assert value("[steps.missing]") == []
    assert value("[steps.nothing, steps.n]") == [None, 3]


def test_single_element_paths_are_not_wrapped() -> None:
    scope = {"steps": {"a": {"items": [{"k": 1}]}}}
    assert value("steps.a.items.k", scope) == 1
    assert value("[steps.a.items.k]", scope) == [1]


@pytest.mark.parametrize(
    ("source", "explanation"),
    [
        ("steps.lookup.ac", "steps.lookup has keys name, hp, armour"),
        ("steps.lookpu.armour", "steps has keys lookup, log, n, nothing, obj"),
        ("steps.log.actions.name", "steps.log.actions is a list whose items have keys player"),
        ("steps.n.x", "steps.n is an int, not an object"),
        ("steps.nothing.x", "steps.nothing is a null, not an object"),
        ("steps.lookup.name.first", "steps.lookup.name is a str, not an object"),
        ("$lookup(steps, 'nope')", "steps has keys lookup"),
        ("$not(steps.lookup.armor)", "steps.lookup has keys name, hp, armour"),
    ],
)
def test_explain_no_match_lists_the_keys_that_exist(source: str, explanation: str) -> None:
    assert explanation in no_match(source)


def test_explain_no_match_without_a_broken_path() -> None:
    explanation = no_match("steps.obj.items[price > 100]")
    assert explanation.startswith("steps that have results:")


def test_results_are_plain_json() -> None:
    result = value("{'a': [1, 2.5, 'x', true, null], 'b': {'c': steps.lookup}}")
    assert result == {"a": [1, 2.5, "x", True, None], "b": {"c": SCOPE["steps"]["lookup"]}}
    assert type(result["a"]) is list


def test_a_function_value_is_not_json() -> None:
    with pytest.raises(StepError, match="function"):
        evaluate(parse("function($x) { $x }"), SCOPE, deterministic=False)


def test_runtime_errors_are_step_errors() -> None:
    for source in ("steps.lookup.name + 1", "$undefined_fn(1)", "$number('abc')"):
        with pytest.raises(StepError):
            evaluate(parse(source), SCOPE, deterministic=False)


def test_eval_refused_at_runtime_too() -> None:
    for deterministic in (False, True):
        with pytest.raises(StepError, match=r"\$eval\(\) is not allowed"):
            evaluate(parse("$eval('1 + 1')"), SCOPE, deterministic=deterministic)


@pytest.mark.parametrize("fn", ["$now()", "$millis()", "$random()", "$shuffle([1, 2, 3])"])
def test_deterministic_mode_refuses_clock_and_random(fn: str) -> None:
    with pytest.raises(StepError, match="not allowed"):
        evaluate(parse(fn), SCOPE, deterministic=True)
    matched, _ = evaluate(parse(fn), SCOPE, deterministic=False)
    assert matched


def test_in_process_now_is_a_timestamp() -> None:
    assert str(value("$now()")).startswith("20")


def test_deterministic_mode_does_not_poison_the_cached_instance() -> None:
    expr = parse("$now()")
    with pytest.raises(StepError):
        evaluate(expr, SCOPE, deterministic=True)
    assert evaluate(expr, SCOPE, deterministic=False)[0]
    with pytest.raises(StepError):
        evaluate(expr, SCOPE, deterministic=True)


def test_evaluation_does_not_mutate_the_scope() -> None:
    scope = {"steps": {"a": {"items": [3, 1, 2]}}}
    value("$sort(steps.a.items)", scope)
    value("$append(steps.a.items, [4])", scope)
    assert scope == {"steps": {"a": {"items": [3, 1, 2]}}}


def test_iter_sources() -> None:
    assert list(expressions.iter_sources({"a": "1", "b": "2"}, "true")) == [
        ("bind.a", "1"),
        ("bind.b", "2"),
        ("when", "true"),
    ]
    assert list(expressions.iter_sources({}, None)) == []


def test_to_json() -> None:
    assert expressions.to_json(2.0) == 2 and isinstance(expressions.to_json(2.0), int)
    assert expressions.to_json(2.5) == 2.5
    assert expressions.to_json((1, [2])) == [1, [2]]
    with pytest.raises(StepError):
        expressions.to_json(object())
