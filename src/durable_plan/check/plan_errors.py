"""A plan that does not parse, described and salvaged (``check_plan``'s first stage).

Pydantic's errors name a location and a type; a model needs a sentence and a fix, so each
becomes one (``describe_schema_error``). One bad field must not hide every other problem,
so each step that is valid without its bad fields is kept for the later checks
(``salvage_step``).
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from durable_plan.language.plan import Step
from durable_plan.language.plan_limits import brief


def describe_schema_error(
    etype: str, err: Any, fld: str | None, fields: list[str]
) -> tuple[str, str]:
    """One of pydantic's errors about a plan as a model reads it: what is wrong, and the fix
    (a misspelt field gets the closest right name)."""
    last = fld.split(".")[-1] if fld else ""
    if etype == "extra_forbidden":
        close = difflib.get_close_matches(last, fields, n=1)
        fix = f"did you mean '{close[0]}'?" if close else f"remove it; fields: {', '.join(fields)}"
        return f"unknown field '{last}'", fix
    if etype == "missing":
        return f"required field '{last}' is missing", f"add '{last}'"
    if etype == "string_pattern_mismatch":
        return (
            f"{err['input']!r} is not a valid step id",
            "start with a lowercase letter; use lowercase letters, digits and '_' "
            "(at most 32 characters)",
        )
    if etype == "too_short" and fld == "steps":
        return "the plan has no steps", "add at least one step"
    if etype == "string_type" and fld is not None and fld.startswith("bind."):
        name = fld.removeprefix("bind.")
        given = brief(err.get("input"))
        return (
            f"bind values are JSONata expressions (strings); '{name}' is {given}",
            f'put literal values in args: "args": {{"{name}": {given}}}',
        )
    return f"{err['msg']} (got {brief(err.get('input'))})", "see the plan schema"


def salvage_step(item: Any) -> Step | None:
    """The step without its invalid fields (already reported), or None if id/tool are bad."""
    if not isinstance(item, Mapping):
        return None
    candidate = dict(item)
    for _ in range(2):
        try:
            return Step.model_validate(candidate)
        except ValidationError as exc:
            bad = {str(err["loc"][0]) for err in exc.errors() if err["loc"]}
            if bad & {"id", "tool"} or not bad:
                return None
            candidate = {k: v for k, v in candidate.items() if k not in bad}
    return None
