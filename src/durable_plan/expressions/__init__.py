"""JSONata expressions: parsed once, analysed for what they read, evaluated deterministically
within a budget. ``parse`` (dependencies from the tree), ``regex`` (RE2), ``meter`` (the
budget and the guarded natives), ``evaluate``, ``explain`` (why nothing matched)."""

from durable_plan.expressions.analysis import (
    ALWAYS_FORBIDDEN,
    LOOP_VARIABLES,
    NONDETERMINISTIC,
    Expression,
    ExpressionSyntaxError,
    parse,
    parse_with_jsonata,
)
from durable_plan.expressions.evaluation import Budget, evaluate, to_json
from durable_plan.expressions.explain import explain_no_match, first_missing, iter_sources
from durable_plan.expressions.reads import PRIOR_ROOT

__all__ = [
    "ALWAYS_FORBIDDEN",
    "LOOP_VARIABLES",
    "NONDETERMINISTIC",
    "PRIOR_ROOT",
    "Budget",
    "Expression",
    "ExpressionSyntaxError",
    "evaluate",
    "explain_no_match",
    "first_missing",
    "iter_sources",
    "parse",
    "parse_with_jsonata",
    "to_json",
]
