"""``WorkflowPlanPlugin(plan_options=...)``: extra fields for each durable plan's input, checked
when the plugin is built, so a misspelt option is an error then, not a child that fails."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from durable_plan.temporal.messages import PlanInput
from durable_plan.temporal.ui_summary import check_ui_metadata


def durable_plan_options(options: Mapping[str, Any] | None) -> dict[str, Any]:
    """Each key must be a ``PlanInput`` field the plugin does not set itself (the fields
    marked ``set_by="plugin"``)."""
    allowed = sorted(
        f.name for f in dataclasses.fields(PlanInput) if f.metadata.get("set_by") != "plugin"
    )
    given = dict(options or {})
    unknown = sorted(set(given) - set(allowed))
    if unknown:
        raise ValueError(
            f"plan_options: unknown option(s) {', '.join(unknown)}; "
            f"the options are: {', '.join(allowed)}"
        )
    if "ui_metadata" in given:
        check_ui_metadata(given["ui_metadata"])
    return given
