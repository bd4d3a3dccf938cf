"""What starts a plan's workflows: ``PlanInput`` (a plan) and ``AgentStepInput`` (one of
its agent steps, in a child workflow).

Both carry their settings as the records of ``plan_settings`` (bounds, retrying, routing, the
hook relay, storage, visibility; a plan also its models), so an agent step gets its plan's
records whole instead of a copy field by field. Each has one JSON form (``to_wire``), which
the web UI shows and history keeps: the content first, then the settings that differ from
their defaults (flat), then the tool table; ``from_wire`` also reads the dataclass form the
default converter makes of an input built by hand (``execute_workflow(..., PlanInput(...))``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from durable_plan.language.options import ToolOptions
from durable_plan.temporal.wire.plan_settings import (
    BY_PLUGIN,
    RECORDS,
    Bounds,
    Chain,
    Debugging,
    HookRelay,
    Models,
    Retrying,
    Routing,
    Storage,
    Visibility,
    record_from,
    records_from_wire,
    settings_to_wire,
)
from durable_plan.temporal.wire.tool_table import table_from_wire, table_to_wire

AGENT_STEP_RECORDS = {name: cls for name, cls in RECORDS.items() if name != "models"}
"""The records an agent step carries: its plan's, but the models (its own is resolved)."""


@dataclass
class PlanInput:
    """Everything ``PlanWorkflow`` needs; the tool table travels with the plan.

    ``tools`` maps a tool name to the rules it was registered with
    (``ToolOptions``, approval gates applied): the workflow checks the plan
    against it (a step may only tighten them) and takes timeouts, retries and
    gates from it, so it never reads worker-local state. An empty table means
    no tool may be planned, not every tool.
    """

    plan: dict[str, Any] = field(metadata=BY_PLUGIN)
    tools: dict[str, ToolOptions] = field(default_factory=dict, metadata=BY_PLUGIN)
    bounds: Bounds = field(default_factory=Bounds)
    retrying: Retrying = field(default_factory=Retrying)
    routing: Routing = field(default_factory=Routing)
    models: Models = field(default_factory=Models)
    relay: HookRelay = field(default_factory=HookRelay)
    storage: Storage = field(default_factory=Storage)
    visibility: Visibility = field(default_factory=Visibility)
    debugging: Debugging = field(default_factory=Debugging)
    chain: Chain = field(default_factory=Chain)
    inputs: dict[str, Any] | None = None
    """A plan file's input values, read as ``inputs.<name>`` (``check_plan(inputs=...)``);
    None (a plan without inputs): ``inputs`` is unknown."""
    memory: dict[str, Any] | None = field(default=None, metadata=BY_PLUGIN)
    """The conversation's remembered steps this plan may reuse or read as ``prior``
    (``reuse.Recall.to_wire``); the plan then returns what it learned under
    ``"remembered"``. None (outside a conversation): every step runs and nothing is
    remembered."""
    checked_by_sender: bool = field(default=False, metadata=BY_PLUGIN)
    """The sender checked the plan as the workflow would, against this tool table
    (``checked_input`` sets it): the workflow skips the two checks that only refuse
    (``check_plan(checked_by_sender=True)``) and checks every rule the run relies on. False
    (a hand-written input): the full check."""

    def to_wire(self) -> dict[str, Any]:
        """The workflow's input as JSON: the plan first, then the settings that differ from
        their defaults, then the tool table. The default data converter sorts keys, and the
        web UI shows the input as it is, so a person reads the plan before the settings."""
        settings = settings_to_wire(getattr(self, name) for name in RECORDS)
        settings.update(_own_to_wire(self, _PLAN_OWN))
        return {"plan": self.plan, "settings": settings, "tools": table_to_wire(self.tools)}

    @classmethod
    def from_wire(cls, data: Any) -> PlanInput:
        """Read the workflow's input in this form (``to_wire``: what it leaves off takes the
        values it fixes) or the dataclass one ``execute_workflow(..., PlanInput)`` sends
        (records as objects); unknown keys are ignored (a newer client)."""
        if isinstance(data, PlanInput):
            return data
        if not isinstance(data, dict) or not isinstance(data.get("plan"), dict):
            raise TypeError(f"not a plan workflow input: {str(data)[:200]}")
        settings = data.get("settings")
        compact = isinstance(settings, dict)
        flat: dict[str, Any] = settings if isinstance(settings, dict) else data
        return cls(
            plan=data["plan"],
            tools=table_from_wire(data.get("tools"), compact=compact),
            **_records(RECORDS, data, compact),
            **{name: flat[name] for name in _PLAN_OWN if name in flat},
        )


_PLAN_OWN = ("inputs", "memory", "checked_by_sender")
"""``PlanInput``'s own values beside the records: in its JSON form, among the settings."""


@dataclass
class AgentStepInput:
    """One agent step, its prompt already rendered, its tools already resolved, with its
    plan's records (the routing and the relay adjusted to the step)."""

    step_id: str
    prompt: str
    output_schema: dict[str, Any]
    tools: dict[str, ToolOptions] = field(default_factory=dict)
    max_iterations: int = 8
    model: str | None = None
    system_prompt: str | None = None
    bounds: Bounds = field(default_factory=Bounds)
    retrying: Retrying = field(default_factory=Retrying)
    routing: Routing = field(default_factory=Routing)
    relay: HookRelay = field(default_factory=HookRelay)
    storage: Storage = field(default_factory=Storage)
    visibility: Visibility = field(default_factory=Visibility)
    debugging: Debugging = field(default_factory=Debugging)
    chain: Chain = field(default_factory=Chain)
    plan_tools: dict[str, ToolOptions] = field(default_factory=dict)
    """The tools the saved plans among ``tools`` call (at any depth), for their child plans'
    tables; never offered to the model. Empty (sent only when set): no saved plans."""

    def to_wire(self) -> dict[str, Any]:
        """What starts the child (and what admission measures): the step, then the settings
        that differ from their defaults, then its tools, as a plan's input is written."""
        wire: dict[str, Any] = {
            "step_id": self.step_id,
            "prompt": self.prompt,
            "output_schema": self.output_schema,
            "max_iterations": self.max_iterations,
        }
        wire.update(_own_to_wire(self, ("model", "system_prompt")))
        wire["settings"] = settings_to_wire(getattr(self, name) for name in AGENT_STEP_RECORDS)
        wire["tools"] = table_to_wire(self.tools)
        if self.plan_tools:
            wire["plan_tools"] = table_to_wire(self.plan_tools)
        return wire

    @classmethod
    def from_wire(cls, data: Any) -> AgentStepInput:
        """Read the child's input in this form, or in the dataclass form; anything else is
        a clear error, not a half-read step."""
        if isinstance(data, AgentStepInput):
            return data
        if not isinstance(data, dict) or not all(
            isinstance(data.get(n), str) for n in ("step_id", "prompt")
        ):
            raise TypeError(f"not an agent step input: {str(data)[:200]}")
        compact = isinstance(data.get("settings"), dict)
        schema = data.get("output_schema")
        return cls(
            step_id=data["step_id"],
            prompt=data["prompt"],
            output_schema=schema if isinstance(schema, dict) else {},
            tools=table_from_wire(data.get("tools"), compact=compact),
            plan_tools=table_from_wire(data.get("plan_tools"), compact=compact),
            **{n: data[n] for n in ("max_iterations", "model", "system_prompt") if n in data},
            **_records(AGENT_STEP_RECORDS, data, compact),
        )


def _own_to_wire(value: Any, names: tuple[str, ...]) -> dict[str, Any]:
    """The input's own values among ``names`` that differ from their defaults."""
    defaults = {f.name: f.default for f in fields(value)}
    return {n: getattr(value, n) for n in names if getattr(value, n) != defaults[n]}


def _records(classes: dict[str, type[Any]], data: dict[str, Any], compact: bool) -> dict[str, Any]:
    """The input's records: from its flat settings (the JSON form), or from one object per
    record (the dataclass form)."""
    if compact:
        return records_from_wire(classes, data["settings"], compact=True)
    return {name: record_from(cls, data.get(name)) for name, cls in classes.items()}
