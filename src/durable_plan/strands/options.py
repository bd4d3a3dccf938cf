"""``WorkflowPlanPlugin``'s options: one frozen record per concern (bounds, memory,
storage/relay, telemetry, presentation), so its constructor does not grow with each; and
``plan_options``, extra fields for each durable plan's input, checked when the plugin is
built, so a misspelt option is an error then, not a child that fails."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from durable_plan.language.plan import DEFAULT_MAX_STEPS
from durable_plan.run.reuse import DEFAULT_MAX_BYTES
from durable_plan.temporal.wire.plan_settings import PLAN_OPTIONS, Debugging
from durable_plan.temporal.workflows.ui_summary import check_ui_metadata


def durable_plan_options(options: Mapping[str, Any] | None) -> dict[str, Any]:
    """Each key must be a plan setting the plugin does not set itself (``PLAN_OPTIONS``),
    or the plan's ``inputs``."""
    allowed = sorted((*PLAN_OPTIONS, "inputs"))
    given = dict(options or {})
    unknown = sorted(set(given) - set(allowed))
    if unknown:
        raise ValueError(
            f"plan_options: unknown option(s) {', '.join(unknown)}; "
            f"the options are: {', '.join(allowed)}"
        )
    if "ui_metadata" in given:
        check_ui_metadata(given["ui_metadata"])
    if "breakpoints" in given:  # each pattern checked now, before any plan starts
        Debugging(breakpoints=given["breakpoints"])
    return given


# -- WorkflowPlanPlugin's options, one small record per concern ------------------------------

DEFAULT_HOOK_RELAY_BYTES = 16 * 1024 * 1024
"""What one plan's requests to the agent's tool hooks may add to the conversation's history."""


@dataclass(frozen=True)
class PlanBounds:
    """How much one plan may do.

    ``max_steps``: the step limit per plan. ``max_result_bytes``: the most one step's result
    may be (None: the plan's default, ``Bounds.max_result_bytes``)."""

    max_steps: int = DEFAULT_MAX_STEPS
    max_result_bytes: int | None = None


@dataclass(frozen=True)
class StepMemoryOptions:
    """The conversation's memory of steps that ended ok, which later plans reuse and read as
    ``prior.<id>`` (``durable_plan.run.reuse``).

    ``remember_steps``, ``remember_bytes``: its bounds (past them the least recently used are
    forgotten; 0 turns it off). ``remember_across_turns``: keep it from one invocation of the
    agent to the next (off: a user who asks again means it to run again). ``never_reuse``:
    tool-name patterns whose steps always run again (the registry's ``reuse=False`` does the
    same per tool)."""

    remember_steps: int = 64
    remember_bytes: int = DEFAULT_MAX_BYTES
    remember_across_turns: bool = False
    never_reuse: Sequence[str] = ()


@dataclass(frozen=True)
class StorageRelay:
    """What a durable plan keeps and what it sends back through the conversation.

    ``plan_options``: extra fields of each durable plan's ``PlanInput`` (``store_over_bytes``,
    ``return_stored``, ``keep_stored_results``, ...; checked by `durable_plan_options`).
    ``hooked_tools``: tool-name patterns whose plan steps pass the agent's tool hooks (None:
    every tool); durably each such step sends its arguments and result through the
    conversation's history. ``hook_relay_bytes``: the most one plan may add to it that way."""

    plan_options: Mapping[str, Any] | None = None
    hooked_tools: Sequence[str] | None = None
    hook_relay_bytes: int = DEFAULT_HOOK_RELAY_BYTES


@dataclass(frozen=True)
class Telemetry:
    """``plan_stream``: durably, the conversation workflow's ``WorkflowStream`` (made in its
    ``__init__``): each plan it starts is announced on the ``plans`` topic
    (``conversation_events``)."""

    plan_stream: Any = None


@dataclass(frozen=True)
class Presentation:
    """What the model is shown.

    ``honor_final``: end the turn with a final plan's results, without another model call
    (False asks the model once more, for prose). ``signatures``: state each plannable tool in
    the plan tool's description as a typed signature (None: for each tool the agent does not
    carry itself; True: every one; False: none)."""

    honor_final: bool = True
    signatures: bool | None = None


OPTION_RECORDS: dict[str, str] = {
    **{f.name: "bounds" for f in dataclasses.fields(PlanBounds)},
    **{f.name: "memory" for f in dataclasses.fields(StepMemoryOptions)},
    **{f.name: "relay" for f in dataclasses.fields(StorageRelay)},
    **{f.name: "telemetry" for f in dataclasses.fields(Telemetry)},
    **{f.name: "presentation" for f in dataclasses.fields(Presentation)},
}
"""Each keyword argument WorkflowPlanPlugin took before the records, and its record: those
keywords still work (``WorkflowPlanPlugin(max_steps=5)`` is ``bounds=PlanBounds(max_steps=5)``)."""

DEFAULT_BOUNDS = PlanBounds()
DEFAULT_MEMORY = StepMemoryOptions()
DEFAULT_RELAY = StorageRelay()
DEFAULT_TELEMETRY = Telemetry()
DEFAULT_PRESENTATION = Presentation()
"""The records' defaults, one shared instance each (they are frozen)."""
