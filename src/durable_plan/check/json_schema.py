"""JSON Schemas applied to values a model or a person controls, with every evaluation bounded.

Three kinds of schema meet untrusted values here: a tool's argument schema (the
owner's, applied to a plan's literal arguments), an agent step's
``output_schema`` (a model's, applied to another model's answer, in workflow
code) and a plan file's ``inputs`` schema (a person's, applied to their
``--input`` values). ``jsonschema`` alone can be made to hang on each:

* ``pattern``, ``patternProperties`` (and ``additionalProperties`` /
  ``unevaluatedProperties`` next to it) run Python's backtracking ``re``, which
  holds the interpreter lock for as long as a match takes: ``^(a|a)+$`` against
  forty ``a`` and a ``!`` freezes every thread of a worker;
* ``{"$ref": "#"}`` recurses without ever reaching the value;
* nested ``anyOf``/``oneOf`` through ``$defs`` are tiny to write and exponential
  to evaluate, and ``uniqueItems`` compares every pair of items.

So every schema goes through ``SchemaValidator``: regexes on RE2 (linear time),
``uniqueItems`` by hashing canonical JSON, and a deterministic budget of keyword
evaluations per value (a count, never a clock, so a workflow replays the same
verdict). Only a schema ``usable_schema.schema_problems`` finds nothing wrong with gets
a validator (``validator_for``).
"""

from __future__ import annotations

import contextvars
import functools
import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import jsonschema
from jsonschema.protocols import Validator
from referencing.exceptions import Unresolvable

from durable_plan.check.usable_schema import compiled_pattern, schema_problems
from durable_plan.language.json_text import sorted_json
from durable_plan.language.plan_limits import brief

__all__ = [
    "MAX_SCHEMA_STEPS",
    "SchemaBudgetExceeded",
    "SchemaValidator",
    "validator_for",
]

MAX_SCHEMA_STEPS = 20_000
"""Keyword evaluations one value may cost (a $ref counts 8: resolving one costs about that
many keywords). An object of a few dozen fields costs a few hundred, a list of 1,000 such
objects about 8,000; the whole budget is about 0.3 s of one core. Past it the value fails
to validate, naming the bound."""
_REF_COST = 8


class SchemaBudgetExceeded(Exception):
    """Validating one value took more than ``MAX_SCHEMA_STEPS`` keyword evaluations."""


_METER: contextvars.ContextVar[list[int] | None] = contextvars.ContextVar(
    "durable_plan_schema_meter", default=None
)


def _charge(cost: int = 1) -> None:
    meter = _METER.get()
    if meter is None:
        return
    meter[0] -= cost
    if meter[0] < 0:
        raise SchemaBudgetExceeded(
            f"checking the value against the schema took more than {MAX_SCHEMA_STEPS:,} "
            "steps; simplify the schema (fewer nested anyOf/oneOf/$ref) or the value"
        )


def _search(pattern: str, text: str, strict: bool) -> bool:
    """RE2 search; a pattern RE2 cannot compile matches everything when lenient (the tool
    checks at run time), and never when strict (such schemas are refused up front)."""
    compiled = compiled_pattern(pattern)
    if compiled is None:
        return not strict
    _charge(1 + len(text) // 256)
    return compiled.search(text) is not None


def _keywords(strict: bool) -> dict[str, Callable[..., Iterator[jsonschema.ValidationError]]]:
    def pattern(
        validator: Any, patrn: str, instance: Any, schema: Mapping[str, Any]
    ) -> Iterator[jsonschema.ValidationError]:
        if validator.is_type(instance, "string") and not _search(patrn, instance, strict):
            yield jsonschema.ValidationError(f"{brief(instance)} does not match {patrn!r}")

    def pattern_properties(
        validator: Any, patterns: Mapping[str, Any], instance: Any, schema: Mapping[str, Any]
    ) -> Iterator[jsonschema.ValidationError]:
        if not validator.is_type(instance, "object"):
            return
        for patrn, subschema in patterns.items():
            for key, value in instance.items():
                if _search(patrn, key, strict):
                    yield from validator.descend(value, subschema, path=key, schema_path=patrn)

    def additional_properties(
        validator: Any, extra: Any, instance: Any, schema: Mapping[str, Any]
    ) -> Iterator[jsonschema.ValidationError]:
        if not validator.is_type(instance, "object"):
            return
        extras = [k for k in instance if not _declared(k, schema, strict)]
        if validator.is_type(extra, "object"):
            for key in extras:
                yield from validator.descend(instance[key], extra, path=key)
        elif not extra and extras:
            names = ", ".join(repr(k) for k in sorted(extras)[:10])
            yield jsonschema.ValidationError(f"additional properties are not allowed ({names})")

    def unique_items(
        validator: Any, unique: Any, instance: Any, schema: Mapping[str, Any]
    ) -> Iterator[jsonschema.ValidationError]:
        if not unique or not validator.is_type(instance, "array"):
            return
        seen: set[str] = set()
        for item in instance:
            _charge()
            key = _canonical(item)
            if key in seen:
                yield jsonschema.ValidationError(f"{brief(item)} appears more than once")
                return
            seen.add(key)

    return {
        "pattern": pattern,
        "patternProperties": pattern_properties,
        "additionalProperties": additional_properties,
        "uniqueItems": unique_items,
    }


def _declared(key: str, schema: Mapping[str, Any], strict: bool) -> bool:
    properties = schema.get("properties")
    if isinstance(properties, Mapping) and key in properties:
        return True
    patterns = schema.get("patternProperties")
    return isinstance(patterns, Mapping) and any(_search(p, key, strict) for p in patterns)


def _metered(
    keyword: Callable[..., Iterator[jsonschema.ValidationError]], cost: int
) -> Callable[..., Iterator[jsonschema.ValidationError]]:
    def counted(
        validator: Any, value: Any, instance: Any, schema: Mapping[str, Any]
    ) -> Iterator[jsonschema.ValidationError]:
        _charge(cost)
        yield from keyword(validator, value, instance, schema)

    return counted


def _canonical(value: Any) -> str:
    # 1 and 1.0 are one value in JSON Schema; True is not 1.
    def norm(v: Any) -> Any:
        if isinstance(v, bool) or v is None or isinstance(v, str):
            return v
        if isinstance(v, int | float):
            return float(v)
        if isinstance(v, Mapping):
            return {str(k): norm(x) for k, x in v.items()}
        if isinstance(v, list | tuple):
            return [norm(x) for x in v]
        return repr(v)

    return json.dumps(norm(value), sort_keys=True, separators=(",", ":"))


class SchemaValidator:
    """One schema, ready to check many values; every check bounded (see the module)."""

    def __init__(self, schema: Mapping[str, Any] | bool, *, strict_patterns: bool = True) -> None:
        """``strict_patterns``: a regex RE2 cannot run fails every value (schemas a model or
        person writes, which ``schema_problems`` refused anyway); otherwise it is skipped,
        and the tool whose schema it is checks at run time."""
        base = jsonschema.validators.validator_for(schema)
        keywords = {**base.VALIDATORS, **_keywords(strict_patterns)}
        if "unevaluatedProperties" in keywords:
            # jsonschema finds evaluated keys with Python's re when patternProperties is
            # near, and there is no linear version of it: strict schemas are refused up
            # front (schema_problems), an owner's is left to the tool at run time.
            keywords["unevaluatedProperties"] = (
                _refuse_unevaluated if strict_patterns else _ignore_unevaluated
            )
        metered = {
            name: _metered(fn, _REF_COST if name in ("$ref", "$dynamicRef") else 1)
            for name, fn in keywords.items()
        }
        cls = jsonschema.validators.extend(base, metered)  # type: ignore[no-untyped-call]
        self._validator: Validator = cls(schema)

    def errors(self, value: Any) -> list[jsonschema.ValidationError]:
        """Every error for ``value`` (the budget spent is one of them)."""
        token = _METER.set([MAX_SCHEMA_STEPS])
        found: list[jsonschema.ValidationError] = []
        try:
            for error in self._validator.iter_errors(value):
                found.append(error)
                if len(found) >= 100:
                    break
        except SchemaBudgetExceeded as exc:
            found.append(jsonschema.ValidationError(str(exc)))
        except RecursionError:
            found.append(
                jsonschema.ValidationError("the schema refers to itself without reaching a value")
            )
        except Unresolvable as exc:
            found.append(jsonschema.ValidationError(f"the schema has a $ref that fails: {exc}"))
        finally:
            _METER.reset(token)
        return found

    def first_error(self, value: Any) -> jsonschema.ValidationError | None:
        """The most relevant error for ``value`` (jsonschema's best match), or None."""
        errors = self.errors(value)
        if not errors:
            return None
        best: jsonschema.ValidationError | None = jsonschema.exceptions.best_match(errors)
        return best

    def is_valid(self, value: Any) -> bool:
        return not self.errors(value)


def _ignore_unevaluated(
    validator: Any, value: Any, instance: Any, schema: Mapping[str, Any]
) -> Iterator[jsonschema.ValidationError]:
    yield from ()


def _refuse_unevaluated(
    validator: Any, value: Any, instance: Any, schema: Mapping[str, Any]
) -> Iterator[jsonschema.ValidationError]:
    yield jsonschema.ValidationError(
        "unevaluatedProperties is not supported here; use additionalProperties"
    )


@functools.lru_cache(maxsize=512)
def _cached(schema_text: str, strict_patterns: bool) -> SchemaValidator | None:
    schema = json.loads(schema_text)
    if schema_problems(schema, strict_patterns=strict_patterns):
        return None
    return SchemaValidator(schema, strict_patterns=strict_patterns)


def validator_for(
    schema: Mapping[str, Any] | bool, *, strict_patterns: bool = True
) -> SchemaValidator | None:
    """The validator of a usable schema, built once per schema (building one walks it), or
    None when ``schema_problems`` finds any. Validators keep no per-call state (the budget
    is per call, in a context variable), so threads share them."""
    return _cached(sorted_json(schema), strict_patterns)


_ANNOTATIONS = frozenset({"description", "title", "examples", "$comment"})
"""Keywords that say what a value means to a reader and nothing about whether it is valid."""
_SCHEMA_VALUED = frozenset(
    {
        "items", "additionalProperties", "not", "if", "then", "else", "contains",
        "propertyNames", "unevaluatedProperties", "unevaluatedItems", "additionalItems",
    }
)  # fmt: skip
_SCHEMA_MAPS = frozenset(
    {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"}
)
_SCHEMA_LISTS = frozenset({"allOf", "anyOf", "oneOf", "prefixItems", "items"})


def without_annotations(schema: Any, depth: int = 0) -> Any:
    """The schema with its annotations (descriptions, titles, examples) left out: what a
    validator needs and nothing a model reads. Keywords it does not know are kept as they
    are (a property named ``description`` is a name, not an annotation); past 64 levels the
    rest is kept whole. For the tool table of a plan whose steps no model reads."""
    if not isinstance(schema, Mapping) or depth > 64:
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _ANNOTATIONS:
            continue
        if key in _SCHEMA_MAPS and isinstance(value, Mapping):
            out[key] = {name: without_annotations(v, depth + 1) for name, v in value.items()}
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            out[key] = [without_annotations(v, depth + 1) for v in value]
        elif key in _SCHEMA_VALUED:
            out[key] = without_annotations(value, depth + 1)
        else:
            out[key] = value
    return out
