"""The fuzz harness: hostile plan generators, the oracle, and forked isolation.

A plan is written by a model, so everything in it is untrusted: its shape, its
sizes, its numbers and its JSONata. The generators are plain ``random.Random``
functions (the ``FAMILIES`` table), so ``tests/unit/run/test_fuzz.py`` (Hypothesis draws a
seed) and ``python -m bench.fuzz`` (10,000 cases from one seed) draw the very same
cases. The oracles (``check_case``, ``execute_case``, ``evaluate_case``) say what
must hold for any case, and ``run_isolated`` / ``run_isolated_many`` run each one
in a forked child with a memory limit and a kill timer, so a hang, a runaway
allocation or a crash is a failed ``Outcome`` with its input, never a hung or
killed process.
"""

from __future__ import annotations

import asyncio
import datetime
import itertools
import json
import math
import os
import pickle
import random
import resource
import select
import signal
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any

from durable_plan.check import CheckedPlan, ToolCatalog, ToolSpec, check_plan
from durable_plan.language.errors import PlanRejected
from durable_plan.language.plan import DEFAULT_MAX_STEPS, PlanResult
from durable_plan.local.runner import execute_plan

Rnd = random.Random
JsonObject = dict[str, Any]

CASE_TIMEOUT_S = 10.0
"""Per-example wall clock the tests allow (generous: the bench measures the real bound)."""

CASE_MEMORY_MIB = 1024
"""Address space a forked example may add on top of the test process's own."""

BIG_MAX_STEPS = 10_000
"""The ``max_steps`` some cases pass, so that plans of thousands of steps get past the limit."""

STATUSES = frozenset({"ok", "failed", "skipped", "not_taken"})

# --------------------------------------------------------------------------------------------
# Tools: a small catalog, and an invoker whose tools return hostile results.
# --------------------------------------------------------------------------------------------

VALID_IDS = ("a", "b", "c", "d", "e", "f")
NASTY_TOOLS = (
    "huge_int",
    "nan",
    "inf",
    "a_set",
    "bytes",
    "bad_keys",
    "deep",
    "cyclic",
    "boom",
    "boom_unprintable",
)
PLAIN_TOOLS = ("echo", *NASTY_TOOLS)
REFUSED_TOOL = "delete_files"
DEEP_RESULT_LEVELS = 12_000

TYPED_SCHEMA: JsonObject = {
    "type": "object",
    "properties": {
        "value": {"type": "integer", "maximum": 10},
        "text": {"type": "string", "maxLength": 100},
        "items": {"type": "array", "items": {"type": "array"}},
    },
    "required": ["value"],
    "additionalProperties": False,
}
# What a Strands @tool with a pydantic-model parameter publishes: $defs at the root, $ref inside.
MOVE_SCHEMA: JsonObject = {
    "$defs": {
        "Pt": {
            "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
            "required": ["x", "y"],
            "type": "object",
        }
    },
    "properties": {"to": {"$ref": "#/$defs/Pt"}, "label": {"type": "string"}},
    "required": ["to"],
    "type": "object",
}
SCHEMA_TOOLS = ("typed", "move")
ALL_TOOLS = (*PLAIN_TOOLS, *SCHEMA_TOOLS)
CATALOG = ToolCatalog.of(
    [
        *PLAIN_TOOLS,
        ToolSpec("typed", TYPED_SCHEMA),
        ToolSpec("move", MOVE_SCHEMA),
        ToolSpec(REFUSED_TOOL, refused="it requires human approval"),
    ]
)


def deep_value(depth: int, kind: str = "list") -> Any:
    """A value nested ``depth`` levels deep, built without recursion."""
    value: Any = 0
    for level in range(depth):
        as_list = kind == "list" or (kind == "mixed" and level % 2 == 1)
        value = [value] if as_list else {"k": value}
    return value


def cyclic_list() -> list[Any]:
    items: list[Any] = [1]
    items.append(items)
    return items


def cyclic_dict() -> dict[str, Any]:
    item: dict[str, Any] = {"k": 1}
    item["self"] = item
    return item


class FuzzTools:
    """The invoker: records every call; the nasty tools return what no tool should."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    async def __call__(self, name: str, args: dict[str, Any]) -> Any:
        self.calls.append(name)
        if name in ("echo", "typed", "move"):
            return args
        if name == "huge_int":
            return 10**5000
        if name == "nan":
            return math.nan
        if name == "inf":
            return {"value": -math.inf}
        if name == "a_set":
            return {1, 2, 3}
        if name == "bytes":
            return {"data": b"\x00\xff"}
        if name == "bad_keys":
            return {1: "one", None: "none"}
        if name == "deep":
            return deep_value(DEEP_RESULT_LEVELS)
        if name == "cyclic":
            return cyclic_list()
        if name == "boom":
            raise RuntimeError("boom " + "x" * 1000)
        if name == "boom_unprintable":  # str() of this exception raises ValueError
            raise ArithmeticError(10**5000)
        raise KeyError(f"no tool named {name!r}")


# --------------------------------------------------------------------------------------------
# Hostile values and expressions.
# --------------------------------------------------------------------------------------------


class Opaque:
    """An arbitrary Python object."""

    def __repr__(self) -> str:
        return "Opaque()"


def huge_int(rnd: Rnd) -> int:
    digits = rnd.randint(5000, 20000)
    value: int = 10**digits - 1
    return -value if rnd.random() < 0.2 else value


def non_finite(rnd: Rnd) -> float:
    return rnd.choice([math.nan, math.inf, -math.inf, -math.nan])


NON_JSON_MAKERS: tuple[Callable[[], Any], ...] = (
    lambda: {1, 2, 3},
    lambda: frozenset({"a"}),
    lambda: b"bytes",
    lambda: bytearray(b"\x00\xff"),
    lambda: (1, "two", None),
    lambda: {1: "int key"},
    lambda: {None: "none key"},
    lambda: {("a", "b"): "tuple key"},
    lambda: {1.5: "float key", "ok": 1},
    lambda: {True: "bool key"},
    lambda: Opaque(),
    lambda: object(),
    lambda: complex(1, 2),
    lambda: Decimal("1e-999999"),
    lambda: Decimal("NaN"),
    lambda: range(3),
    lambda: cyclic_list(),
    lambda: cyclic_dict(),
    lambda: print,
    lambda: Ellipsis,
    lambda: datetime.date(2024, 1, 1),
    lambda: type,
    lambda: [1, {2, 3}],
    lambda: {"inner": (1, {b"k": 1})},
)


def non_json_value(rnd: Rnd) -> Any:
    return rnd.choice(NON_JSON_MAKERS)()


def long_string(rnd: Rnd) -> str:
    size = rnd.choice([100_000, 1_000_000, 2_000_000])
    unit = rnd.choice(["a", "é", "\U0001f600", "steps.a ", "\x00", "\ud800", "$eval('1') "])
    return (unit * (size // len(unit) + 1))[:size]


def odd_string(rnd: Rnd) -> str:
    return rnd.choice(
        ["", " ", "\x00", "\ud800", "\u202e", "é", "a" * 33, "A", "1x", "a-b", "steps", "$", "'"]
    )


def hostile_value(rnd: Rnd) -> Any:
    """One value a model (or a model-written JSON text) should never get past the checks with."""
    pick = rnd.randrange(7)
    if pick == 0:
        return huge_int(rnd)
    if pick == 1:
        return non_finite(rnd)
    if pick == 2:
        return deep_value(rnd.randint(5000, 20000), rnd.choice(["list", "dict", "mixed"]))
    if pick == 3:
        return long_string(rnd)
    if pick == 4:
        return odd_string(rnd)
    return non_json_value(rnd)


def junk(rnd: Rnd) -> Any:
    """A wrong-typed value for any field: ordinary junk, mostly, and sometimes hostile."""
    if rnd.random() < 0.3:
        return hostile_value(rnd)
    return rnd.choice([None, 0, -1, 1, 1.5, True, False, "", "x", [], {}, [1], {"a": 1}, "yes"])


# Named hostile JSONata, each reading (at most) steps.a: an echo of SOURCE_ARGS.
HOSTILE_EXPRESSIONS: dict[str, str] = {
    "catastrophic_regex_contains": "$contains('aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!', /^(a+)+$/)",
    "catastrophic_regex_match": "$match('" + "a" * 40 + "!', /(a|aa)+$/)",
    "catastrophic_regex_replace": "$replace('" + "a" * 36 + "!', /(a*)*b/, 'x')",
    "catastrophic_regex_split": "$split('aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!', /(a+)+b/)",
    "catastrophic_regex_on_result": "$contains(steps.a.text, /^(a|a?)+$/)",
    "nested_quantifier_on_result": "$match(steps.a.text, /^(\\w+\\s?)*$/)",
    "regex_backreference": "$contains('aa', /(a)\\1/)",
    "regex_lookahead": "$contains('aa', /a(?=a)/)",
    "regex_huge_repeat": "$contains('aa', /(a{1000}){1000}/)",
    "tail_recursion": "($f := function($n){$f($n+1)}; $f(0))",
    "mutual_recursion": "($f := function($n){$g($n+1)}; $g := function($n){$f($n+1)}; $f(0))",
    "deep_recursion": "($f := function($n){$n = 0 ? 0 : 1 + $f($n - 1)}; $f(100000))",
    "sum_range": "$sum([1..10000000])",
    "big_range": "[1..100000000]",
    "count_big_range": "$count([1..100000000])",
    "range_product": "[1..10000].([1..10000])",
    "map_range": "$map([1..10000000], function($x){$x * 2})",
    "filter_range": "$filter([1..10000000], function($x){$x > 1})",
    "sort_range": "$sort([1..1000000], function($a, $b){$a < $b})",
    "distinct_range": "$distinct([1..1000000])",
    "string_doubling": "$reduce([1..40], function($acc, $x){$acc & $acc}, 'a')",
    "string_doubling_from_var": (
        "($s := 'a'; $reduce([1..40], function($acc, $x){$acc & $acc}, $s))"
    ),
    "pad_huge": "$pad('', 1000000000)",
    "pad_huge_negative": "$pad('x', -1000000000, 'ab')",
    "pad_float": "$pad('', 1e15)",
    "join_copies": "($s := $pad('', 100000, 'x'); $join([1..100000].($s)))",
    "join_copies_sep": "$join([1..1000000].('a'), $pad('', 100000, '-'))",
    "string_of_range": "$string([1..10000000])",
    "string_of_shared_tree": "$string($reduce([1..40], function($a, $x){[$a, $a]}, [1]))",
    "replace_blowup": "$replace($pad('', 100000, 'a'), 'a', $pad('', 100000, 'b'))",
    "replace_regex_blowup": "$replace($pad('', 100000, 'a'), /a/, $pad('', 100000, 'b'))",
    "replace_empty_regex": "$replace($pad('', 100000, 'a'), /a*/, $pad('', 1000, 'b'))",
    "split_huge": "$split($pad('', 10000000, 'a'), '')",
    "int_explosion": "$reduce([1..2000], function($a, $x){$a * $a}, 3)",
    "int_explosion_big_literal": (
        "$reduce([1..30], function($a, $x){$a * $a}, 99999999999999999999)"
    ),
    "int_literal_huge": "1" + "0" * 5000,
    "power_overflow": "$power(10, 400)",
    "power_big_int": "$power(2, 100000)",
    "number_nan": '$number("NaN")',
    "number_infinity": '$number("Infinity")',
    "number_overflow": "$number('1e400')",
    "number_huge_digits": "$number('" + "9" * 5000 + "')",
    "sqrt_negative": "$sqrt(-1)",
    "divide_by_zero": "1 / 0",
    "float_overflow": "1e308 * 10",
    "floor_huge": "$floor(1e300)",
    "format_number_huge": "$formatNumber(1e300, '#,##0.00')",
    "format_integer_words": "$formatInteger(999999999999999999999, 'w')",
    "format_base_huge": "$formatBase(1e300, 2)",
    "from_millis_huge": "$fromMillis(1e300)",
    "to_millis_far": "$toMillis('99999-01-01')",
    "deep_array_builder": "$reduce([1..12000], function($a, $x){[$a]}, [])",
    "deep_object_builder": "$reduce([1..12000], function($a, $x){{'k': $a}}, {})",
    "wide_object": "$merge([1..200000].{$string($): $})",
    "zip_huge": "$zip([1..1000000], [1..1000000])",
    "eval": "$eval('1 + 1')",
    "eval_nested": "$eval(\"$eval('1')\")",
    "eval_via_variable": "($e := $eval; $e('1'))",
    "now": "$now()",
    "millis": "$millis()",
    "random": "$random()",
    "shuffle": "$shuffle([1, 2, 3])",
    "clock_via_variable": "($n := $now; $n())",
    "lambda_result": "function($x){$x}",
    "native_function_result": "$string",
    "base64_big": "$base64encode($pad('', 900000, 'a'))",
    "uppercase_expands": "$uppercase($pad('', 900000, 'ß'))",
    "each_on_result": "$each(steps.a, function($v, $k){$k})",
    "spread_result": "$spread(steps.a)",
    "sift_huge": "$sift($merge([1..100000].{$string($): $}), function($v){$v > 1})",
    "transform": "steps.a ~> |$|{'extra': $pad('', 1000000, 'x')}|",
    "descendants": "steps.a.**",
    "parent_wildcard": "steps.*",
    "root_context": "$$",
    "chained_apply": "[1..100000] ~> $map(function($x){$x}) ~> $map(function($x){$x}) ~> $sum()",
    "string_dedup_quadratic": "$distinct([1..100000].$string($ % 50000))",
    "keys_of_huge": "$keys($merge([1..100000].{$string($): 1}))",
    "error_function": "$error('thrown')",
    "assert_function": "$assert(false, 'asserted')",
    # One native call whose cost the evaluation budget does not see.
    "match_many_groups": "$match($pad('', 1000, 'a'), /" + "()" * 1000 + "a/)",
    "match_groups_every_char": "$match($pad('', 999999, 'a'), /" + "()" * 20 + "a/)",
    # Regexes jsonata builds for Python's re, out of reach of the RE2 engine.
    "to_millis_picture_backtracking": "$toMillis('" + "a" * 60 + "1', '" + "[FNn]" * 10 + "')",
    "format_number_separator_regex": (
        "$formatNumber(1, '0" + "a" * 40 + "!', {'exponent-separator': '(a+)+b'})"
    ),
    "lambda_signature_backtracking": (
        "($f := function($a)<" + "n+" * 16 + ":n>{1}; $f(" + "1," * 40 + "'x'))"
    ),
}
# Native calls of a few seconds each that the evaluation budget charges ~15,600 steps or fewer:
# (source, how many evaluations of it a named plan holds: comfortably over CASE_TIMEOUT_S).
BUDGET_BLIND: dict[str, tuple[str, int]] = {
    "replace_string_every_char": ("$replace($pad('', 999999, 'a'), 'a', '')", 4),
    "replace_regex_every_char": ("$replace($pad('', 999999, 'a'), /a/, '')", 4),
    "match_every_char": ("$match($pad('', 999999, 'a'), /a/)", 4),
    "split_regex_every_char": ("$split($pad('', 999999, 'a'), /a/)", 6),
    "zip_big_ranges": ("$zip([1..99999], [1..99999])", 40),
}
SCALED_TEMPLATES: tuple[str, ...] = (
    "$sum([1..{n}])",
    "[1..{n}]",
    "$count([1..{n}])",
    "$reduce([1..{k}], function($acc, $x){{$acc & $acc}}, 'a')",
    "$pad('', {n})",
    "$pad('x', -{n}, 'ab')",
    "$reduce([1..{k}], function($a, $x){{$a * $a}}, 3)",
    "$reduce([1..{n}], function($a, $x){{[$a]}}, [])",
    "($f := function($n){{$n = 0 ? 0 : 1 + $f($n - 1)}}; $f({n}))",
    "($f := function($n){{$n > {n} ? $n : $f($n + 1)}}; $f(0))",
    "$string([1..{n}])",
    "$join([1..{n}].$string())",
    "$power(10, {k})",
    "$contains('{a}!', /^(a+)+$/)",
    "$match('{a}!', /(a|aa)+$/)",
    "$replace('{a}', 'a', '{a}')",
    "$split('{a}!', /(a+)+b/)",
    "$join([1..{n}].('{a}'))",
    "$string($reduce([1..{k}], function($a, $x){{[$a, $a]}}, [1]))",
    "[1..{n}][$ % 2 = 0]",
    "$reduce([1..{n}], function($a, $x){{$a + $x}}, 0)",
    "$map([1..{n}], function($x){{steps.a.n * $x}})",
    "$distinct([1..{n}])",
    "$formatInteger({n}, 'w')",
    "$substring($pad('', {n}, 'a'), 1, 5)",
    "$replace($pad('', {n}, 'a'), 'a', '')",
    "$match($pad('', {n}, 'a'), /a/)",
    "$match($pad('', {k}, 'a'), /{groups}a/)",
    "$toMillis('{a}1', '{picture}')",
    "$formatNumber(1, '0{a}!', {{'exponent-separator': '(a+)+b'}})",
    "($f := function($a)<{signature}:n>{{1}}; $f({args}'x'))",
)
SOUP_TOKENS: tuple[str, ...] = (
    "steps", ".", "a", "b", "x", "$", "$$", "(", ")", "[", "]", "{", "}", ":", ",", ";", ":=",
    "function", "($x)", "{$x}", "$f", "$x", "..", "1", "0", "-1", "1e308", "1e999", "'x'",
    '"y"', "/a+/", "/(a+)+$/", "~>", "|", "?", "??", "?:", "&", "+", "-", "*", "/", "%", "=",
    "!=", "<", "<=", ">", "and", "or", "in", "#", "@", "^(", "$reduce", "$map", "$eval",
    "$sum", "$string", "$pad", "$now", "$random", "$lookup", "**", "`a`", "\\", "true", "null",
    "[1..100000000]", "$f($x)", "!", "==", "$not", "${", "\u202e", "\x00", "'", "\"", "`",
)  # fmt: skip
NORMAL_TEMPLATES: tuple[str, ...] = (
    "steps.{r}",
    "steps.{r}.x",
    "steps.{r}.text",
    "steps.{r}.missing",
    "$lookup(steps, '{r}').x",
    "steps.`{r}`.n",
    "[steps.{r}.x, steps.{s}.n]",
    "steps.{r}.x + steps.{s}.n",
    "$sum(steps.{r}.items)",
    "$count(steps.{r}.items)",
    "$string(steps.{r})",
    "$exists(steps.{r}.missing)",
    "steps.{r}.items[0]",
    "'see steps.{r}'",
    "$$.steps.{r}.x",
    "steps.{r}.x > 1 ? 'big' : 'small'",
    "$keys(steps.{r})",
    "1",
    "null",
    "[1..3]",
)
CONDITION_TEMPLATES: tuple[str, ...] = (
    "steps.{r}.x = 1",
    "steps.{r}.n > 2",
    "$not(steps.{r}.x = 1)",
    "steps.{r}.x",
    "true",
    "false",
    "$exists(steps.{r}.missing)",
    "steps.{r}.missing = 1",
)
SOURCE_ARGS: JsonObject = {
    "text": "a" * 40 + "!",
    "x": 1,
    "n": 3,
    "items": [1, 2, 3],
    "obj": {"k": "v"},
}


def scaled_expression(rnd: Rnd) -> str:
    template = rnd.choice(SCALED_TEMPLATES)
    n = rnd.choice([10, 1_000, 100_000, 1_000_000, 10_000_000, 100_000_000, 1_000_000_000])
    k = rnd.choice([10, 40, 64, 100, 400, 2000])
    a = "a" * rnd.choice([10, 30, 40, 60, 1000, 100_000])
    few = rnd.choice([2, 5, 10, 16, 20])
    return template.format(
        n=n,
        k=k,
        a=a,
        groups="()" * rnd.choice([1, 10, 100, 1000]),
        picture="[FNn]" * few,
        signature="n+" * few,
        args="1," * rnd.choice([10, 30, 40]),
    )


def soup_expression(rnd: Rnd) -> str:
    size = rnd.randint(1, 40)
    return rnd.choice(["", " "]).join(rnd.choice(SOUP_TOKENS) for _ in range(size))


def long_expression(rnd: Rnd) -> str:
    """Very long or very deeply nested JSONata text."""
    n = rnd.choice([500, 1_000, 5_000, 20_000, 100_000])
    shape = rnd.randrange(16)
    if shape == 0:
        return "+".join(["1"] * n)
    if shape == 1:
        return "(" * n + "1" + ")" * n
    if shape == 2:
        return "[" * n + "]" * n
    if shape == 3:
        return "-" * n + "1"
    if shape == 4:
        return "steps.a" + ".x" * n
    if shape == 5:
        return "'" + "a" * (n * 10) + "'"
    if shape == 6:
        return "[" + ",".join(["1"] * n) + "]"
    if shape == 7:
        return "{" + ",".join(f"'k{i}': {i}" for i in range(n)) + "}"
    if shape == 8:
        return "$not(" * n + "true" + ")" * n
    if shape == 9:
        return " and ".join(["true"] * n)
    if shape == 10:
        return "steps.a.x = 1 ? " * n + "1" + " : 0" * n
    if shape == 11:
        return "($x := 1; " * n + "$x" + ")" * n
    if shape == 12:
        return "function($x){" * n + "1" + "}" * n
    if shape == 13:
        return "steps.a[" * n + "true" + "]" * n
    if shape == 14:
        return "$contains('x', /" + "(a" * n + ")" * n + "/)"
    return " & ".join(["steps.a.text"] * n)


def hostile_expression(rnd: Rnd) -> str:
    pick = rnd.random()
    if pick < 0.45:
        pool = [*HOSTILE_EXPRESSIONS.values(), *(source for source, _ in BUDGET_BLIND.values())]
        return rnd.choice(pool)
    if pick < 0.75:
        return scaled_expression(rnd)
    if pick < 0.9:
        return soup_expression(rnd)
    return long_expression(rnd)


def normal_expression(rnd: Rnd, earlier: list[str], templates: tuple[str, ...]) -> str:
    template = rnd.choice(templates)
    r = rnd.choice(earlier) if earlier else "a"
    s = rnd.choice(earlier) if earlier else "a"
    return template.format(r=r, s=s)


# --------------------------------------------------------------------------------------------
# Plan families: each maps a Random to one raw plan (any Python value).
# --------------------------------------------------------------------------------------------


def small_args(rnd: Rnd) -> JsonObject:
    args = {key: value for key, value in SOURCE_ARGS.items() if rnd.random() < 0.7}
    if rnd.random() < 0.2:
        args["extra"] = rnd.choice([None, 0, -2.5, "", "text", [None], {"a": [1, {"b": 2}]}])
    return args


def valid_ish_plan(rnd: Rnd) -> JsonObject:
    """A plan that mostly passes the checks: steps read earlier steps only."""
    names = rnd.sample(list(VALID_IDS), rnd.randint(1, 6))
    steps: list[JsonObject] = []
    for i, sid in enumerate(names):
        earlier = names[:i]
        tool = "echo" if rnd.random() < 0.6 else rnd.choice(ALL_TOOLS)
        step: JsonObject = {"id": sid, "tool": tool}
        if tool == "typed":
            step["args"] = {"value": rnd.choice([1, 11, "x"])}
        elif tool == "move":
            step["args"] = {"to": rnd.choice([{"x": 1, "y": 2}, {"x": "no"}, 3]), "label": "m"}
        elif rnd.random() < 0.8:
            step["args"] = small_args(rnd)
        if earlier and rnd.random() < 0.6:
            step["bind"] = {
                f"v{k}": normal_expression(rnd, earlier, NORMAL_TEMPLATES)
                for k in range(rnd.randint(1, 2))
            }
        if earlier and rnd.random() < 0.3:
            step["when"] = normal_expression(rnd, earlier, CONDITION_TEMPLATES)
        if earlier and rnd.random() < 0.2:
            step["after"] = rnd.sample(earlier, rnd.randint(1, len(earlier)))
        if rnd.random() < 0.2:
            step["join"] = "any"
        if rnd.random() < 0.1:
            step["timeout_s"] = rnd.choice([0.5, 5, 30])
        if rnd.random() < 0.1:
            step["retries"] = rnd.randint(0, 3)
        if rnd.random() < 0.05:
            step["local"] = True
        steps.append(step)
    if rnd.random() < 0.3:
        rnd.shuffle(steps)
    plan: JsonObject = {"steps": steps}
    if rnd.random() < 0.4:
        plan["returns"] = rnd.sample(names, rnd.randint(0, len(names)))
    if rnd.random() < 0.4:
        plan["final"] = rnd.random() < 0.5
    if rnd.random() < 0.4:
        plan["on_error"] = rnd.choice(["fail_fast", "continue"])
    if rnd.random() < 0.2:
        plan["max_parallel"] = rnd.randint(1, 4)
    return plan


PLAN_FIELDS = ("steps", "returns", "final", "on_error", "max_parallel")
STEP_FIELDS = ("id", "tool", "args", "bind", "after", "when", "join", "timeout_s", "retries")
TYPO_FIELDS = ("bnid", "whne", "afer", "retrns", "stpes", "tools", "arg", "extra", "")


def _pick_step(rnd: Rnd, plan: JsonObject) -> JsonObject | None:
    steps = plan.get("steps")
    if isinstance(steps, list):
        candidates = [s for s in steps if isinstance(s, dict)]
        if candidates:
            return rnd.choice(candidates)
    return None


def _text_of(value: Any) -> str:
    """JSON text of a generated value, or its repr when it is not JSON (deep, odd keys)."""
    try:
        return json.dumps(value, default=str)
    except (TypeError, ValueError, RecursionError):
        return repr(type(value))


def mutate(rnd: Rnd, plan: JsonObject) -> JsonObject:
    """One structural mistake: a wrong type, a missing or unknown field, a bad reference."""
    step = _pick_step(rnd, plan)
    kind = rnd.randrange(14)
    if kind == 0 and step is not None:
        step.pop(rnd.choice(["id", "tool"]), None)
    elif kind == 1:
        plan.pop("steps", None)
    elif kind == 2 and step is not None:
        step[rnd.choice(STEP_FIELDS)] = junk(rnd)
    elif kind == 3:
        plan[rnd.choice(PLAN_FIELDS)] = junk(rnd)
    elif kind == 4 and step is not None:
        odd_step: dict[Any, Any] = step  # keys a model cannot write, but a caller can
        odd_step[rnd.choice([*TYPO_FIELDS, 1, None, ("t",)])] = junk(rnd)
    elif kind == 5:
        odd_plan: dict[Any, Any] = plan
        odd_plan[rnd.choice([*TYPO_FIELDS, 2, None, ("t",)])] = junk(rnd)
    elif kind == 6 and step is not None:
        plan["steps"].extend(dict(step) for _ in range(rnd.randint(1, 3)))  # duplicate ids
    elif kind == 7 and isinstance(plan.get("steps"), list) and plan["steps"]:
        plan["steps"][rnd.randrange(len(plan["steps"]))] = junk(rnd)
    elif kind == 8:
        steps = plan.get("steps")
        plan["steps"] = rnd.choice(
            [
                {"a": steps},
                _text_of(steps)[:200],
                None,
                tuple(steps) if isinstance(steps, list) else steps,
            ]
        )
    elif kind == 9 and step is not None:
        sid = step.get("id")
        step["bind"] = {"v": rnd.choice([f"steps.{sid}.x", "steps.zzz", "steps.a.x"])}
        step["after"] = rnd.choice([[sid], ["nope"], [sid, sid], ["a", "b", "c"]])
    elif kind == 10 and step is not None:
        step["bind"] = rnd.choice(
            [
                {"v": 1},
                {"v": None},
                {"": "1"},
                {"$": "1"},
                {1: "1"},
                ["steps.a"],
                "steps.a",
                {"v": ["steps.a"]},
            ]
        )
    elif kind == 11:
        plan["returns"] = rnd.choice([["zzz"], "a", [1], [None], ["a", "a"], [["a"]], {}])
    elif kind == 12 and step is not None:
        step["when"] = rnd.choice([True, 1, "", "==", "steps.a.x == 1", "!steps.a.x", ["true"]])
    elif isinstance(plan.get("steps"), list) and len(plan["steps"]) >= 2:
        first, second = plan["steps"][0], plan["steps"][1]
        if isinstance(first, dict) and isinstance(second, dict):
            first["after"], second["after"] = [second.get("id")], [first.get("id")]  # a cycle
    return plan


def broken_plan(rnd: Rnd) -> Any:
    if rnd.random() < 0.08:
        return rnd.choice(
            [None, 0, "plan", [], [valid_ish_plan(rnd)], b'{"steps": []}', {}, True, math.nan]
        )
    plan = valid_ish_plan(rnd)
    for _ in range(rnd.randint(1, 4)):
        plan = mutate(rnd, plan)
    return plan


def hostile_expression_plan(rnd: Rnd, expression: str | None = None) -> JsonObject:
    """step a (an echo of SOURCE_ARGS), step b evaluating the hostile expression, step c after."""
    source = expression if expression is not None else hostile_expression(rnd)
    where = rnd.randrange(4)
    step_b: JsonObject = {"id": "b", "tool": "echo", "after": ["a"]}
    if where == 0:
        step_b["bind"] = {"v": source}
    elif where == 1:
        step_b["when"] = source
    elif where == 2:
        step_b["when"] = f"$boolean({source})"
    else:
        step_b["bind"] = {"v": "steps.a.x", "w": source}
    steps: list[JsonObject] = [{"id": "a", "tool": "echo", "args": dict(SOURCE_ARGS)}, step_b]
    if rnd.random() < 0.5:
        steps.append({"id": "c", "tool": "echo", "bind": {"v": "steps.b"}, "join": "any"})
    plan: JsonObject = {"steps": steps, "on_error": rnd.choice(["fail_fast", "continue"])}
    if rnd.random() < 0.3:
        plan["final"] = True
    return plan


def soup_plan(rnd: Rnd) -> JsonObject:
    plan = valid_ish_plan(rnd)
    for step in plan["steps"]:
        if rnd.random() < 0.5:
            step["bind"] = {"v": soup_expression(rnd)}
        if rnd.random() < 0.3:
            step["when"] = soup_expression(rnd)
        step.pop("after", None)
        if rnd.random() < 0.5:
            step["after"] = [s["id"] for s in plan["steps"] if s is not step][:1]
    return plan


def long_expression_plan(rnd: Rnd) -> JsonObject:
    if rnd.random() < 0.7:
        return hostile_expression_plan(rnd, long_expression(rnd))
    bulk = random.Random(rnd.getrandbits(64))
    expression = long_expression(bulk)
    steps = [{"id": "a", "tool": "echo", "args": dict(SOURCE_ARGS)}]
    steps += [
        {"id": f"s{i}", "tool": "echo", "bind": {"v": expression}, "after": ["a"]}
        for i in range(31)
    ]
    return {"steps": steps}


def huge_plan(rnd: Rnd) -> JsonObject:
    """Thousands of steps: chains, fans, random DAGs, one giant cycle, duplicates."""
    bulk = random.Random(rnd.getrandbits(64))
    n = rnd.randint(2000, 5000)
    shape = rnd.randrange(8)
    ids = [f"s{i}" for i in range(n)]
    steps: list[JsonObject] = []
    for i, sid in enumerate(ids):
        step: JsonObject = {"id": sid, "tool": "echo", "args": {"x": i}}
        if shape == 0 and i:  # a chain
            step["bind"] = {"x": f"steps.{ids[i - 1]}.x"}
        elif shape == 1 and i:  # fan-out from s0
            step["bind"] = {"x": "steps.s0.x"}
        elif shape == 2 and i:  # random DAG
            deps = {ids[bulk.randrange(i)] for _ in range(bulk.randint(1, 3))}
            step["bind"] = {"x": " + ".join(f"steps.{d}.x" for d in sorted(deps))}
        elif shape == 3:  # one giant cycle
            step["after"] = [ids[(i + 1) % n]]
        elif shape == 4:  # every id the same
            step["id"] = "a"
        elif shape == 5:  # unknown tools, bad ids
            step["id"] = f"S-{i}"
            step["tool"] = f"tool{i}"
        elif shape == 6 and i == n - 1:  # fan-in: one step waits for all
            step["after"] = ids[:-1]
            step["bind"] = {"all": "[" + ", ".join(f"steps.{d}.x" for d in ids[:50]) + "]"}
        elif shape == 7 and i:  # every step after all earlier ones (quadratic edges)
            step["after"] = ids[max(0, i - 200) : i]
        steps.append(step)
    plan: JsonObject = {"steps": steps, "on_error": rnd.choice(["fail_fast", "continue"])}
    if rnd.random() < 0.3:
        plan["returns"] = ids[-10:]
    if rnd.random() < 0.2:
        plan["max_parallel"] = rnd.choice([1, 256])
    return plan


def _place(rnd: Rnd, value: Any) -> Any:
    """Put ``value`` somewhere in an otherwise valid-ish plan."""
    plan = valid_ish_plan(rnd)
    step = _pick_step(rnd, plan)
    assert step is not None
    where = rnd.randrange(12)
    if where == 0:
        step.setdefault("args", {})["v"] = value
    elif where == 1:
        step.setdefault("args", {})["v"] = {"nested": [1, {"deeper": value}]}
    elif where == 2:
        plan["max_parallel"] = value
    elif where == 3:
        step["retries"] = value
    elif where == 4:
        step["timeout_s"] = value
    elif where == 5:
        step[rnd.choice(["id", "tool", "join", "local", "when"])] = value
    elif where == 6:
        plan[rnd.choice(["final", "on_error", "returns"])] = value
    elif where == 7:
        step["bind"] = {"v": value}
    elif where == 8:
        step["after"] = [value]
    elif where == 9:
        plan["unknown_field"] = value
    elif where == 10:
        plan["steps"].append(value)
    else:
        plan["returns"] = [value]
    return plan


def deep_args_plan(rnd: Rnd) -> Any:
    depth = rnd.randint(5000, 20000)
    value = deep_value(depth, rnd.choice(["list", "dict", "mixed"]))
    if rnd.random() < 0.15:
        return {"steps": value} if rnd.random() < 0.5 else value
    return _place(rnd, value)


def huge_number_plan(rnd: Rnd) -> Any:
    value = (
        huge_int(rnd) if rnd.random() < 0.85 else rnd.choice([2**63, -(2**63) - 1, 2**64, 1e308])
    )
    return _place(rnd, value)


def non_finite_plan(rnd: Rnd) -> Any:
    return _place(rnd, non_finite(rnd))


def non_json_plan(rnd: Rnd) -> Any:
    if rnd.random() < 0.15:
        plan = valid_ish_plan(rnd)
        return rnd.choice(
            [
                {**plan, 1: "int key"},
                {**plan, None: "none key"},
                {"steps": tuple(plan["steps"])},
                {"steps": [tuple(s.items()) for s in plan["steps"]]},
                [tuple(plan.items())],
                {"steps": [{**s, 7: "x"} for s in plan["steps"]]},
            ]
        )
    return _place(rnd, non_json_value(rnd))


def long_string_plan(rnd: Rnd) -> Any:
    text = long_string(rnd)
    plan = valid_ish_plan(rnd)
    step = _pick_step(rnd, plan)
    assert step is not None
    where = rnd.randrange(8)
    if where == 0:
        step["id"] = text
    elif where == 1:
        step["tool"] = text
    elif where == 2:
        step.setdefault("args", {})[text] = text
    elif where == 3:
        step["bind"] = {text: "1"}
    elif where == 4:
        step["bind"] = {"v": "'" + text.replace("'", "") + "'"}
    elif where == 5:
        step["when"] = text
    elif where == 6:
        plan["returns"] = [text]
    else:
        plan[text] = 1
    return plan


def json_text_plan(rnd: Rnd) -> Any:
    """The plan as the JSON text a model sends: hostile numbers, nesting, truncation."""
    plan = valid_ish_plan(rnd)
    text = json.dumps(plan)
    shape = rnd.randrange(12)

    def args_text(value: str) -> str:
        return '{"steps": [{"id": "a", "tool": "echo", "args": {"v": ' + value + "}}]}"

    if shape == 0:
        return text
    if shape == 1:
        return args_text("9" * rnd.randint(4301, 20000))
    if shape == 2:
        return args_text("-1" + "0" * rnd.randint(5000, 20000) + ".5e3")
    if shape == 3:
        n = rnd.randint(5000, 100_000)
        return args_text("[" * n + "]" * n)
    if shape == 4:
        return args_text(rnd.choice(["NaN", "Infinity", "-Infinity", "1e999999", "-1e400"]))
    if shape == 5:
        return text[: rnd.randrange(len(text))]
    if shape == 6:
        return args_text('"\\ud800\\udfff\\u0000"')
    if shape == 7:
        return (
            '{"steps": [], "steps": ' + json.dumps(plan["steps"]) + ', "final": 1, "final": true}'
        )
    if shape == 8:
        return " " * rnd.choice([10_000, 1_000_000, 5_000_000]) + text
    if shape == 9:
        return rnd.choice(["", "steps:\n  - id: a", "[]", "1", '"plan"', "null", "{", "\x00"])
    if shape == 10:
        first, second = "1" * rnd.randint(4301, 9000), "1" * rnd.randint(4301, 9000)
        return (
            '{"steps": [{"id": "a", "tool": "echo", "retries": '
            + first
            + '}], "max": '
            + second
            + "}"
        )
    n = rnd.randint(5000, 50_000)
    return '{"steps": [{"id": "a", "tool": "echo", "args": ' + '{"k": ' * n + "1" + "}" * n + "}]}"


def hostile_result_plan(rnd: Rnd) -> JsonObject:
    """Steps whose tools return huge ints, NaN, sets, 12,000-deep lists..., read by later steps."""
    nasty = rnd.choice(NASTY_TOOLS)
    reader = rnd.choice(
        [
            "steps.a",
            "steps.a.value",
            "$string(steps.a)",
            "$count(steps.a)",
            "steps.a + 1",
            "[steps.a]",
            "$exists(steps.a)",
        ]
    )
    steps: list[JsonObject] = [
        {"id": "a", "tool": nasty},
        {"id": "b", "tool": "echo", "bind": {"v": reader}},
    ]
    if rnd.random() < 0.3:
        steps.append({"id": "c", "tool": "echo", "when": f"$exists({reader})", "after": ["a"]})
    plan: JsonObject = {"steps": steps, "on_error": rnd.choice(["fail_fast", "continue"])}
    if rnd.random() < 0.5:
        plan["returns"] = ["a"]
    return plan


def dense_graph_plan(rnd: Rnd) -> JsonObject:
    """Up to twice the step limit, every step waiting for many others: cycles everywhere."""
    n = rnd.randint(8, 2 * DEFAULT_MAX_STEPS)
    ids = [f"s{i}" for i in range(n)]
    density = rnd.choice([0.1, 0.5, 1.0])
    bulk = random.Random(rnd.getrandbits(64))
    steps: list[JsonObject] = []
    for sid in ids:
        after = [other for other in ids if other != sid and bulk.random() < density]
        step: JsonObject = {"id": sid, "tool": "echo", "after": after}
        if after and bulk.random() < 0.3:
            step["bind"] = {"v": f"steps.{after[0]}.x"}
        steps.append(step)
    return {"steps": steps}


FAMILIES: dict[str, tuple[int, Callable[[Rnd], Any]]] = {
    # name: (weight, generator)
    "valid_ish": (16, valid_ish_plan),
    "broken": (14, broken_plan),
    "hostile_expression": (22, hostile_expression_plan),
    "token_soup": (7, soup_plan),
    "long_expression": (5, long_expression_plan),
    "huge_plan": (3, huge_plan),
    "dense_graph": (3, dense_graph_plan),
    "deep_args": (5, deep_args_plan),
    "huge_numbers": (6, huge_number_plan),
    "non_finite": (4, non_finite_plan),
    "non_json": (7, non_json_plan),
    "long_strings": (3, long_string_plan),
    "json_text": (6, json_text_plan),
    "hostile_results": (8, hostile_result_plan),
}
HOSTILE_FAMILIES = ("hostile_expression", "token_soup", "long_expression", "hostile_results")


@dataclass(frozen=True)
class FuzzCase:
    """One input: the raw plan and how it is checked."""

    family: str
    raw: Any
    durable: bool
    with_catalog: bool
    max_steps: int
    origin: str = ""  # how to make it again

    @property
    def catalog(self) -> ToolCatalog | None:
        return CATALOG if self.with_catalog else None

    def __repr__(self) -> str:  # the raw plan may be 20,000 levels deep or hold a huge int
        return (
            f"FuzzCase(family={self.family!r}, durable={self.durable}, "
            f"with_catalog={self.with_catalog}, max_steps={self.max_steps}, "
            f"origin={self.origin!r}, raw={describe(self.raw)})"
        )

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:  # Hypothesis's printer
        printer.text(repr(self))


def generate_case(rnd: Rnd, families: tuple[str, ...] | None = None) -> FuzzCase:
    """One case from ``families`` (default: all, by weight)."""
    names = list(families or FAMILIES)
    family = rnd.choices(names, weights=[FAMILIES[name][0] for name in names])[0]
    raw = FAMILIES[family][1](rnd)
    big = family == "huge_plan" or rnd.random() < 0.1
    return FuzzCase(
        family=family,
        raw=raw,
        durable=rnd.random() < 0.5,
        with_catalog=rnd.random() < 0.7,
        max_steps=BIG_MAX_STEPS if big and rnd.random() < 0.5 else DEFAULT_MAX_STEPS,
    )


def case_for_seed(seed: int, index: int, families: tuple[str, ...] | None = None) -> FuzzCase:
    """The bench's case number ``index`` under ``seed``: the same on every run and worker."""
    case = generate_case(random.Random(f"{seed}:{index}"), families)
    return replace(case, origin=f"case_for_seed({seed}, {index}, {families!r})")


# --------------------------------------------------------------------------------------------
# The oracle: what must hold for any case.
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    """How one case ended; ``failure`` is None when every property held."""

    verdict: str  # "checked" | "rejected" | "failed"
    failure: str | None = None  # e.g. "exception:RecursionError", "timeout", "memory"
    detail: str = ""
    seconds: float = 0.0
    max_rss_kib: int = 0
    output_chars: int = 0  # the rejection's text, or the result's JSON text
    cpu_seconds: float = 0.0  # the CPU time the oracle used (wall ``seconds`` grows with load)

    @property
    def ok(self) -> bool:
        return self.failure is None


def _failed(kind: str, detail: str) -> Outcome:
    return Outcome("failed", kind, detail[:3000])


def _exception_outcome(exc: BaseException) -> Outcome:
    if isinstance(exc, MemoryError):
        return _failed("memory", "MemoryError")
    frames = traceback.extract_tb(exc.__traceback__)[-4:]
    where = "; ".join(f"{os.path.basename(f.filename)}:{f.lineno} {f.name}" for f in frames)
    try:
        message = str(exc)
    except Exception as inner:  # str() itself can fail (a huge int in the message)
        message = f"<str() failed: {type(inner).__name__}>"
    return _failed(f"exception:{type(exc).__name__}", f"{message[:1500]} [at {where}]")


def check_case(case: FuzzCase) -> Outcome:
    """check_plan returns a CheckedPlan or raises PlanRejected (with problems), nothing else."""
    try:
        checked = check_plan(
            case.raw, catalog=case.catalog, max_steps=case.max_steps, durable=case.durable
        )
    except PlanRejected as rejection:
        if not rejection.problems:
            return _failed("empty_rejection", "PlanRejected without problems")
        return Outcome("rejected", output_chars=len(str(rejection)))
    except Exception as exc:
        return _exception_outcome(exc)
    if not isinstance(checked, CheckedPlan):
        return _failed("wrong_type", f"check_plan returned {type(checked).__name__}")
    return Outcome("checked")


def execute_case(case: FuzzCase) -> Outcome:
    """execute_plan returns plain-JSON PlanResult or raises PlanRejected before any tool runs."""
    tools = FuzzTools()
    try:
        result = asyncio.run(
            execute_plan(case.raw, tools, catalog=case.catalog, max_steps=case.max_steps)
        )
    except PlanRejected as rejection:
        if tools.calls:
            return _failed("invoked_rejected", f"tools called for a rejected plan: {tools.calls}")
        return Outcome("rejected", output_chars=len(str(rejection)))
    except Exception as exc:
        return _exception_outcome(exc)
    if not isinstance(result, PlanResult):
        return _failed("wrong_type", f"execute_plan returned {type(result).__name__}")
    bad = {o.status for o in result.ledger} - STATUSES
    if bad:
        return _failed("bad_status", f"ledger statuses {sorted(bad)}")
    try:
        text = json.dumps(result.model_dump(mode="json"), allow_nan=False)
    except Exception as exc:
        outcome = _exception_outcome(exc)
        return _failed("not_json", f"{outcome.failure}: {outcome.detail}")
    return Outcome("checked", output_chars=len(text))


def evaluate_case(case: FuzzCase) -> Outcome:
    """Both properties (the bench's unit of work): the first failure, else the check's verdict."""
    checked = check_case(case)
    if not checked.ok:
        return checked
    executed = execute_case(case)
    if not executed.ok:
        return executed
    if executed.verdict != checked.verdict and not case.durable:
        return _failed(
            "inconsistent", f"check_plan {checked.verdict}, execute_plan {executed.verdict}"
        )
    return replace(checked, output_chars=max(checked.output_chars, executed.output_chars))


def timed(oracle: Callable[[FuzzCase], Outcome], case: FuzzCase) -> Outcome:
    """The oracle's outcome with its wall clock, its CPU time and the process's peak RSS."""
    started, cpu_started = time.perf_counter(), time.process_time()
    try:
        outcome = oracle(case)
    except BaseException as exc:  # the oracle catches Exception; this is MemoryError & co
        outcome = _exception_outcome(exc)
    seconds, cpu_seconds = time.perf_counter() - started, time.process_time() - cpu_started
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return replace(outcome, seconds=seconds, cpu_seconds=cpu_seconds, max_rss_kib=rss)


# --------------------------------------------------------------------------------------------
# Isolation: a forked child per example, with a memory limit and a kill timer.
# --------------------------------------------------------------------------------------------


def address_space_bytes() -> int:
    """This process's current virtual memory size (VmSize)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


def limit_memory(limit_bytes: int) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (limit_bytes, limit_bytes))


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)


def describe_exit(status: int) -> Outcome:
    """A child that ended without an outcome: killed by a signal, or exited."""
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        name = signal_name(number)
        kind = "memory" if number in (signal.SIGKILL, signal.SIGABRT) else "crash"
        return _failed(kind, f"the process died of {name} (memory limit or a crash)")
    return _failed("crash", f"the process exited with status {os.WEXITSTATUS(status)}")


Job = tuple[Callable[[FuzzCase], Outcome], FuzzCase]


@dataclass
class _Child:
    pid: int
    read_fd: int
    started: float
    chunks: list[bytes]


def _fork_job(job: Job, budget: int) -> _Child:
    oracle, case = job
    read_fd, write_fd = os.pipe()
    started = time.perf_counter()
    pid = os.fork()
    if pid == 0:  # the child: never returns into the caller
        status = 0
        try:
            os.close(read_fd)
            limit_memory(budget)
            view = memoryview(pickle.dumps(timed(oracle, case)))
            while view:
                view = view[os.write(write_fd, view) :]
        except BaseException:
            status = 70
        finally:
            os._exit(status)
    os.close(write_fd)
    return _Child(pid, read_fd, started, [])


def _reap(child: _Child, *, kill: bool, timeout_s: float) -> Outcome:
    os.close(child.read_fd)
    if kill:
        os.kill(child.pid, signal.SIGKILL)
    _, status = os.waitpid(child.pid, 0)
    seconds = time.perf_counter() - child.started
    if kill:
        return replace(_failed("timeout", f"no outcome within {timeout_s:g} s"), seconds=seconds)
    if child.chunks:
        outcome: Outcome = pickle.loads(b"".join(child.chunks))
        return outcome
    return replace(describe_exit(status), seconds=seconds)


def run_isolated_many(
    jobs: list[Job],
    *,
    parallel: int = 1,
    timeout_s: float = CASE_TIMEOUT_S,
    memory_mib: int = CASE_MEMORY_MIB,
) -> list[Outcome]:
    """Each ``oracle(case)`` in its own forked child, ``parallel`` at a time, in job order.

    A child gets ``memory_mib`` of address space over this process's own and
    ``timeout_s`` of wall clock; over either is a failed outcome, never a hang.
    """
    budget = address_space_bytes() + memory_mib * 1024 * 1024
    outcomes: list[Outcome | None] = [None] * len(jobs)
    running: dict[int, _Child] = {}  # job index -> child
    todo = list(range(len(jobs)))
    try:
        while todo or running:
            while todo and len(running) < max(1, parallel):
                index = todo.pop(0)
                running[index] = _fork_job(jobs[index], budget)
            now = time.perf_counter()
            wait_s = max(0.0, min(c.started + timeout_s - now for c in running.values()))
            by_fd = {c.read_fd: i for i, c in running.items()}
            readable, _, _ = select.select(list(by_fd), [], [], wait_s)
            for fd in readable:
                index = by_fd[fd]
                chunk = os.read(fd, 1 << 16)
                if chunk:
                    running[index].chunks.append(chunk)
                else:
                    outcomes[index] = _reap(running.pop(index), kill=False, timeout_s=timeout_s)
            now = time.perf_counter()
            for index, child in list(running.items()):
                if now - child.started >= timeout_s:
                    outcomes[index] = _reap(running.pop(index), kill=True, timeout_s=timeout_s)
    finally:
        for child in running.values():
            _reap(child, kill=True, timeout_s=timeout_s)
    return [o if o is not None else _failed("crash", "no outcome") for o in outcomes]


def run_isolated(
    oracle: Callable[[FuzzCase], Outcome],
    case: FuzzCase,
    *,
    timeout_s: float = CASE_TIMEOUT_S,
    memory_mib: int = CASE_MEMORY_MIB,
) -> Outcome:
    """``oracle(case)`` in a forked child; over time or memory is a failure, not a hang."""
    jobs: list[Job] = [(oracle, case)]
    return run_isolated_many(jobs, timeout_s=timeout_s, memory_mib=memory_mib)[0]


def describe(value: Any, limit: int = 300) -> str:
    """A short, safe rendering of any input: huge ints, deep nesting and cycles included."""
    parts: list[str] = []
    size = 0

    def emit(text: str) -> bool:
        nonlocal size
        parts.append(text)
        size += len(text)
        return size < limit

    def items(opening: str, closing: str, children: list[Any], total: int, depth: int) -> bool:
        if not emit(opening):
            return False
        for n, child in enumerate(children):
            if n and not emit(", "):
                return False
            if n >= 8:
                return emit(f"…<{total} in all>{closing}")
            if isinstance(child, tuple) and len(child) == 2 and opening == "{":
                key, item = child
                if not (walk(key, depth + 1) and emit(": ") and walk(item, depth + 1)):
                    return False
            elif not walk(child, depth + 1):
                return False
        return emit(closing)

    def walk(item: Any, depth: int) -> bool:
        if depth > 12:
            return emit("…")
        if isinstance(item, bool) or item is None or isinstance(item, float):
            return emit(repr(item))
        if isinstance(item, int):
            if item.bit_length() > 200:
                return emit(f"<int of ~{int(item.bit_length() * math.log10(2)) + 1} digits>")
            return emit(repr(item))
        if isinstance(item, str):
            return emit(repr(item if len(item) <= 60 else f"{item[:40]}…<{len(item)} chars>"))
        if isinstance(item, dict):
            pairs = list(itertools.islice(item.items(), 9))
            return items("{", "}", pairs, len(item), depth)
        if isinstance(item, list | tuple):
            opening, closing = ("[", "]") if isinstance(item, list) else ("(", ")")
            return items(opening, closing, list(item[:9]), len(item), depth)
        try:
            text = repr(item)
        except Exception:
            text = f"<{type(item).__name__}>"
        return emit(text if len(text) <= 60 else f"<{type(item).__name__}>")

    walk(value, 0)
    text = "".join(parts)
    return text if len(text) <= limit else text[:limit] + "…"


def explain(case: FuzzCase, outcome: Outcome) -> str:
    return (
        f"{outcome.failure} after {outcome.seconds:.2f} s ({outcome.cpu_seconds:.2f} s of CPU): "
        f"{outcome.detail}\n"
        f"family={case.family} durable={case.durable} catalog={case.with_catalog} "
        f"max_steps={case.max_steps} origin={case.origin or '-'}\nraw={describe(case.raw, 600)}"
    )
