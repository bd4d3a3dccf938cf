"""A tool step's arguments against the tool's input schema, and its per-step options against
the owner's rules (a step may only tighten them)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jsonschema

from durable_plan.check.base import CheckerState
from durable_plan.check.json_schema import validator_for
from durable_plan.language.options import ToolOptions
from durable_plan.language.plan import Step
from durable_plan.language.plan_limits import (
    brief,
)


class ArgumentChecks(CheckerState):
    """Arguments and owner's rules of a tool step."""

    def _check_owner_rules(self, step: Step, owner: ToolOptions) -> None:
        """A plan may tighten what the tool's owner registered, never loosen it."""
        if step.retries is not None and step.retries > owner.retries:
            self.add(
                "owner_rule",
                f"retries {step.retries} is more than the {owner.retries} that tool "
                f"'{step.tool}' allows",
                f"ask for at most {owner.retries} retries, or leave retries out",
                step.id,
                "retries",
            )
        if step.timeout_s is not None and step.timeout_s > owner.timeout_s:
            self.add(
                "owner_rule",
                f"timeout_s {step.timeout_s:g} is longer than the {owner.timeout_s:g} s that "
                f"tool '{step.tool}' allows",
                f"ask for at most {owner.timeout_s:g} s, or leave timeout_s out",
                step.id,
                "timeout_s",
            )
        if step.local and not owner.may_run_local:
            why = (
                f"its steps run on the workers of task queue '{owner.task_queue}'"
                if owner.task_queue
                else "its owner did not allow it"
            )
            self.add(
                "owner_rule",
                f"tool '{step.tool}' may not run as a local activity ({why})",
                "remove local",
                step.id,
                "local",
            )

    def _check_arguments(self, step: Step, schema: Mapping[str, Any]) -> None:
        props = schema.get("properties")
        props = props if isinstance(props, Mapping) else {}
        open_ended = schema.get("additionalProperties", not props) is not False
        given = step.args.keys() | step.bind.keys()
        both = step.args.keys() & step.bind.keys() if step.args and step.bind else ()
        for name in sorted(both):
            self.add(
                "bad_argument",
                f"argument '{name}' is given in both args and bind",
                "keep it in one of them",
                step.id,
                f"bind.{name}",
            )
        for name in () if open_ended else sorted(given - set(props)):
            close = self._closest(name, props)
            hint = f"did you mean '{close}'? " if close else ""
            fld = f"bind.{name}" if name in step.bind else f"args.{name}"
            self.add(
                "bad_argument",
                f"tool '{step.tool}' has no argument '{name}'",
                f"{hint}its arguments are: {', '.join(props) or 'none'}",
                step.id,
                fld,
            )
        required = schema.get("required") or []
        for name in required:
            if name not in given:
                self.add(
                    "bad_argument",
                    f"tool '{step.tool}' needs argument '{name}'",
                    f"add '{name}' to args or bind",
                    step.id,
                    "args",
                )
        for name, value in step.args.items():
            prop = props.get(name)
            if not isinstance(prop, Mapping):
                continue
            # A pydantic-model parameter's schema points into the tool schema's $defs.
            sub = dict(prop)
            for key in ("$defs", "definitions"):
                if key in schema and key not in sub:
                    sub[key] = schema[key]
            error = _schema_error(value, sub)
            if error is not None:
                self.add(
                    "bad_argument",
                    f"argument '{name}' is invalid: {brief(error.message, 200, quote=False)}",
                    f"pass a value matching {brief(_resolve_ref(prop, schema), 300)}",
                    step.id,
                    f"args.{name}",
                )


def _resolve_ref(prop: Mapping[str, Any], schema: Mapping[str, Any]) -> Any:
    """``{"$ref": "#/$defs/M"}`` -> the definition itself, for a fix the model can follow."""
    ref = prop.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/"):
        target: Any = schema
        for part in ref[2:].split("/"):
            target = target.get(part) if isinstance(target, Mapping) else None
        if isinstance(target, Mapping):
            return dict(target)
    return dict(prop)


def _schema_error(value: Any, schema: Mapping[str, Any]) -> jsonschema.ValidationError | None:
    """The most relevant error of ``value`` against a tool's argument schema, if any. The
    owner's schema: a regex RE2 cannot run, or a schema jsonschema cannot use, is left to
    the tool at run time (``json_schema``: RE2, bounded evaluation)."""
    validator = validator_for(schema, strict_patterns=False)
    return None if validator is None else validator.first_error(value)
