"""A plan file's declared inputs: the schema it declares, and the values a run is given.

The ``inputs`` field is a JSON Schema for the object a run's bindings read as
``inputs.<name>``. A schema that cannot be used is reported with the file's other problems;
values come from ``--input NAME=VALUE`` text and the schema's defaults, and are checked
against it before anything runs, so a wrong or misspelled input fails with its name and
the fix instead of as a step failure at run time.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import jsonschema

from durable_plan.check.json_schema import validator_for
from durable_plan.check.plan_file.records import (
    INPUTS_ROOT,
    FileProblem,
    Path_,
    PlanFile,
    PlanFileError,
    value_kind,
)
from durable_plan.check.usable_schema import schema_problems

MAX_MESSAGE_CHARS = 300
"""An input's schema error quotes the value; longer quotes are cut to keep it one line."""


def inputs_schema_problems(pf: PlanFile, schema: Any) -> list[FileProblem]:
    """Why the file's ``inputs`` cannot serve as the schema of a run's values, if it cannot."""
    root = (INPUTS_ROOT,)
    fix = "write a JSON Schema: {type: object, properties: {name: {type: string}}}"
    if not isinstance(schema, Mapping):
        return [
            pf.problem(
                f"inputs must be a JSON Schema object, got {value_kind(schema)}", fix, path=root
            )
        ]
    if schema.get("type", "object") != "object":
        return [
            pf.problem(
                f"inputs must describe an object (type: object), not type: {schema['type']}",
                fix,
                path=(*root, "type"),
            )
        ]
    try:
        jsonschema.validators.validator_for(schema).check_schema(dict(schema))
    except jsonschema.SchemaError as exc:
        where = (*root, *exc.path)
        return [pf.problem(f"inputs is not a valid JSON Schema: {exc.message}", fix, path=where)]
    # Usable too: regexes RE2 can run, references that resolve and reach a value.
    return [
        pf.problem(f"inputs is not a valid JSON Schema here: {problem}", fix, path=root)
        for problem in schema_problems(dict(schema))[:5]
    ]


def parse_input_args(pf: PlanFile, pairs: Sequence[str]) -> dict[str, Any]:
    """``--input NAME=VALUE`` pairs as values: text for string inputs, JSON otherwise.

    A value that is not JSON stays text, so the schema check says what is wrong with it.
    Unknown names are problems: a typo must not silently leave an input at its default.
    """
    declared = pf.declared_inputs
    listed = ", ".join(declared) if declared else "none"
    values: dict[str, Any] = {}
    problems: list[FileProblem] = []
    for item in pairs:
        name, sep, raw = item.partition("=")
        if not sep or not name:
            problems.append(
                FileProblem(
                    pf.path, f"--input expects NAME=VALUE, got {item!r}", "write name=value"
                )
            )
            continue
        if declared is not None and name not in declared:
            problems.append(
                pf.problem(
                    f"unknown input '{name}' (declared: {listed})",
                    f"pass one of: {listed}" if declared else "this plan takes no inputs",
                    path=(INPUTS_ROOT,),
                    fld=f"inputs.{name}",
                    code="unknown_input",
                )
            )
            continue
        try:
            values[name] = _input_value(raw, _property(pf, name))
        except RecursionError:
            problems.append(
                pf.problem(
                    f"input '{name}' is nested too deeply to read",
                    "pass a value nested at most 100 levels deep",
                    path=(INPUTS_ROOT,),
                    fld=f"inputs.{name}",
                    code="bad_input",
                )
            )
    if problems:
        raise PlanFileError(problems)
    return values


def _property(pf: PlanFile, name: str) -> Mapping[str, Any]:
    properties = (pf.inputs_schema or {}).get("properties")
    prop = properties.get(name) if isinstance(properties, Mapping) else None
    return prop if isinstance(prop, Mapping) else {}


def _input_value(raw: str, prop: Mapping[str, Any]) -> Any:
    kind = prop.get("type")
    kinds = kind if isinstance(kind, list) else [kind]
    if kinds == ["string"]:
        return raw
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw


def resolve_inputs(pf: PlanFile, given: Mapping[str, Any]) -> dict[str, Any]:
    """The run's inputs: ``given`` plus the schema's defaults, checked against the schema."""
    schema = pf.inputs_schema
    if schema is None:
        if given:
            names = ", ".join(given)
            raise PlanFileError([pf.problem(f"unknown inputs {names}: this plan takes no inputs")])
        return {}
    values = dict(given)
    properties = schema.get("properties")
    if isinstance(properties, Mapping):
        for name, prop in properties.items():
            if name not in values and isinstance(prop, Mapping) and "default" in prop:
                values[name] = prop["default"]
    validator = validator_for(schema)
    if validator is None:  # check_file reports why; never validate with an unusable schema
        raise PlanFileError(
            [pf.problem("inputs is not a usable JSON Schema", "run validate on the file")]
        )
    problems = []
    for error in sorted(validator.errors(values), key=lambda e: [str(p) for p in e.path]):
        problems.append(_input_problem(pf, error))
    if problems:
        raise PlanFileError(problems)
    return values


def _input_problem(pf: PlanFile, error: jsonschema.ValidationError) -> FileProblem:
    names = [str(p) for p in error.path]
    if error.validator == "required" and isinstance(error.instance, Mapping):
        required = error.validator_value if isinstance(error.validator_value, list) else []
        missing = next((r for r in required if r not in error.instance), None)
        if missing is not None:
            names = [str(missing)]
            return pf.problem(
                f"missing input '{missing}'",
                f"pass --input {missing}=VALUE",
                path=(INPUTS_ROOT, "properties", missing),
                fld=f"inputs.{missing}",
                code="bad_input",
            )
    fld = "inputs." + ".".join(names) if names else "inputs"
    top = names[0] if names else None
    where: Path_ = (INPUTS_ROOT, "properties", top) if top else (INPUTS_ROOT,)
    message = error.message  # quotes the value, which may be long: keep the line short
    if len(message) > MAX_MESSAGE_CHARS:
        message = message[:MAX_MESSAGE_CHARS] + f"… ({len(error.message):,} characters)"
    return pf.problem(
        message,
        "pass a value the schema allows",
        path=where,
        fld=fld,
        code="bad_input",
    )
