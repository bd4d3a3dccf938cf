"""A plan's settings, one small frozen record per concern, shared by both workflow inputs.

``PlanInput`` and ``AgentStepInput`` carry the same records (an agent step gets its plan's,
the routing and the relay adjusted to it), so a setting is added to one record and every
input that carries it, its JSON form and the flat option names (``start_plan(**extra)``,
``WorkflowPlanPlugin``'s ``plan_options``) follow: nothing copies settings field by field.

On the wire the settings are flat (``settings_to_wire``: each name is unique across the
records, and only those that differ from their defaults travel), so an input costs its
history what it did before the records.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any, TypeVar

from durable_plan.language.plan import DEFAULT_MAX_STEPS
from durable_plan.language.step_path import check_pattern

DEFAULT_MAX_RESULT_BYTES = 256 * 1024
DEFAULT_MAX_RETURNED_BYTES = 1536 * 1024
DEFAULT_MAX_TASK_BYTES = 1024 * 1024
"""Arguments scheduled in one workflow task: the server takes at most 4 MiB per gRPC
message, so a wide fan-out of large arguments is started over several tasks."""
DEFAULT_MAX_STORED_BYTES = 64 * 1024 * 1024
"""A result stored by reference (``claim_check``), and what one step's arguments may
read back from the store: the activity holds it in memory."""
DEFAULT_MAX_INTERRUPTIONS = 5
"""Attempts of a step that a lost worker (a crash, a kill, a lost heartbeat) may cut
short before the step fails, on top of its ``retries``, which count the tool's own
failures only."""
DEFAULT_MAX_HISTORY_BYTES = 40 * 1024 * 1024
"""Temporal terminates a workflow whose history passes 50 MiB (or 51,200 events): a
plan stops starting steps well before that, and says why."""
COMPACT_UI_METADATA = "summary"
"""``ui_metadata`` the inputs' JSON form leaves off (the value clients send unless asked)."""

BY_PLUGIN = {"set_by": "plugin"}
"""Marks the settings ``WorkflowPlanPlugin`` fills itself for each plan: not plan options."""
_COMPACT_DEFAULT = "compact_default"
"""A field whose JSON form leaves off another value than its default (``ui_metadata``)."""


@dataclass(frozen=True)
class Bounds:
    """How much a plan may do: steps, and the bytes of results, tasks and history."""

    max_steps: int = field(default=DEFAULT_MAX_STEPS, metadata=BY_PLUGIN)
    max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES
    max_returned_bytes: int = DEFAULT_MAX_RETURNED_BYTES
    max_task_bytes: int = DEFAULT_MAX_TASK_BYTES
    max_history_bytes: int = DEFAULT_MAX_HISTORY_BYTES


@dataclass(frozen=True)
class Retrying:
    """How calls outlive lost workers and their own failures."""

    max_interruptions: int = DEFAULT_MAX_INTERRUPTIONS
    """Calls a lost worker cut short, on top of their own retries."""
    retry_initial_interval_s: float = 0.5
    model_heartbeat_timeout_s: float = 10.0
    """Agent steps: a worker lost during a model call is noticed after this long."""


@dataclass(frozen=True)
class Routing:
    """Where calls run, and whose turn they take there."""

    task_queue: str | None = field(default=None, metadata=BY_PLUGIN)
    model_task_queue: str | None = None
    """The task queue of agent steps' model calls (workers with ``StrandsPlugin`` and the
    model's credentials); None: the agent step's own."""
    fairness_key: str | None = None
    """Whose calls these are, where a limited tool's calls wait their turn (a tenant, a
    user); None: the workflow that started the plan (a conversation), else the plan."""


@dataclass(frozen=True)
class Models:
    """The models agent steps may use (a plan without agent steps carries neither)."""

    default_model: str | None = field(default=None, metadata=BY_PLUGIN)
    """The model of agent steps that name none (a ``StrandsPlugin`` model name; None: the
    plugin's default)."""
    allowed_models: list[str] | None = field(default=None, metadata=BY_PLUGIN)
    """Model-name patterns an agent step may name in ``model`` (the default model is always
    allowed); None: any."""


@dataclass(frozen=True)
class HookRelay:
    """The agent workflow whose tool hooks each call must pass (``HOOK_REQUEST_SIGNAL``)."""

    hooks_workflow_id: str | None = field(default=None, metadata=BY_PLUGIN)
    hook_key: str | None = field(default=None, metadata=BY_PLUGIN)
    """The name the agent's relay knows the plan by (None: the plan's workflow id)."""
    hook_bytes: int | None = field(default=None, metadata=BY_PLUGIN)
    """Bytes of hook requests the agent's history has room for (None: not counted)."""
    hooked_tools: list[str] | None = field(default=None, metadata=BY_PLUGIN)
    """Tool patterns whose calls pass the agent's hooks (None: every tool)."""


@dataclass(frozen=True)
class Storage:
    """Large results by reference, and large payloads outside history."""

    store_results: bool = True
    """A tool result over ``store_over_bytes`` goes to the worker's result store and history
    keeps a reference (``references.py``); False: such a result fails its step."""
    store_over_bytes: int | None = None
    """The threshold; None: ``max_result_bytes`` (only results that would not fit)."""
    max_stored_bytes: int = DEFAULT_MAX_STORED_BYTES
    return_stored: str = "value"
    """A stored result listed in ``returns``: "value" gives its value when it fits
    ``max_result_bytes`` (read back by one activity), else the reference with its size and
    a preview; "preview" always gives the reference."""
    keep_stored_results: bool = False
    """True: the plan does not delete what it stored when it ends (a retention sweep or an
    S3 lifecycle rule does)."""
    payloads_stored: bool = False
    """Large payloads go to External Storage (set by whoever starts the plan): an agent step
    may then carry a conversation past Temporal's 2 MB per payload (``payload_limits``)."""


@dataclass(frozen=True)
class Visibility:
    """What people see of a run while it runs."""

    stream_events: bool = True
    """Publish step events on the workflow's stream (``PlanHandle.events``); off, a
    subscriber sees nothing and ``progress`` still answers."""
    ui_metadata: str = field(default="full", metadata={_COMPACT_DEFAULT: COMPACT_UI_METADATA})
    """What the Temporal web UI gets (``ui_summary``): "summary", "details" or "full".
    Clients send "summary" unless asked; the JSON form leaves that value off."""
    plan_status_attribute: bool = False
    """Keep the ``PlanStatus`` search attribute up to date (``plan_status``): set by whoever
    starts the plan, only where the namespace has it registered (an upsert of one it lacks
    fails the workflow task forever). Recorded, so a replay decides alike."""


@dataclass(frozen=True)
class Debugging:
    """Where a run pauses for a person, and where its calls sit in the plan that started it.

    Both travel to every workflow a plan starts (an agent step's child, a saved plan's
    child plan), so a breakpoint set on the top-level plan pauses calls at any depth and
    every call's path (``language.step_path``) is named from the top-level plan's root."""

    breakpoints: tuple[str, ...] = ()
    """Step path patterns (``step_path.check_pattern``): a call whose path one matches
    pauses before it starts, after its arguments are bound (``run.breakpoints``)."""
    path_prefix: str = field(default="", metadata=BY_PLUGIN)
    """The path of the call that started this run ("" for a top-level plan): a saved
    plan's steps are ``<prefix>/plan.<step>`` (``step_path.rooted``)."""
    root_workflow_id: str = field(default="", metadata=BY_PLUGIN)
    """The top-level plan's workflow id ("": this run is the top-level plan; the plan
    workflow fills it in with its own, ``rooted_at``, before it starts any child). A pause
    in a child workflow (an agent step's, a saved plan's) names its call from there, and
    its ``abort`` cancels that plan, not just the child."""

    def rooted_at(self, workflow_id: str) -> Debugging:
        """This record for a run whose workflow id is ``workflow_id``: the top-level plan's
        id kept when a parent set it, else this run's own (it is the top-level plan)."""
        if self.root_workflow_id:
            return self
        return replace(self, root_workflow_id=workflow_id)

    def __post_init__(self) -> None:
        # From JSON the patterns arrive as a list; kept as a tuple (frozen, comparable).
        # Checked wherever the record is made (start_plan, a plugin's plan_options, the
        # command line): a pattern that can never pause is a typo, refused before a run.
        if isinstance(self.breakpoints, str):
            raise TypeError("breakpoints: a list of step path patterns, not one string")
        patterns = tuple(self.breakpoints)
        for pattern in patterns:
            if not isinstance(pattern, str):
                raise TypeError(f"breakpoints: patterns are strings, not {pattern!r}")
            check_pattern(pattern)
        object.__setattr__(self, "breakpoints", patterns)


@dataclass(frozen=True)
class Chain:
    """The conversation whose sandbox environment the plan's sandbox tools use: its workflow
    chain (``SandboxWorkflowChain``), the run that started the plan, and its sandbox's stream
    topic. Set by ``WorkflowPlanPlugin`` from the conversation's own workflow info, never from
    the model; empty (``start_plan``): the plan's own chain (``workflows/sandbox_chain.py``).

    A plan cannot use its own chain instead: the factory finds an environment by chain, and
    the plan's child workflow is another chain than its conversation's, so it would reach (or
    provision) another environment than the one the agent's direct calls use."""

    chain_namespace: str = field(default="", metadata=BY_PLUGIN)
    chain_workflow_id: str = field(default="", metadata=BY_PLUGIN)
    chain_first_run_id: str = field(default="", metadata=BY_PLUGIN)
    chain_run_id: str = field(default="", metadata=BY_PLUGIN)
    sandbox_topic: str | None = field(default=None, metadata=BY_PLUGIN)
    """The conversation's sandbox ``streaming_topic``: a sandbox step's command output is
    published there too, attributed to the step's path (None: not published)."""


@dataclass(frozen=True)
class PlanSettings:
    """Every setting of a plan, one record per concern: what ``checked_input`` takes."""

    bounds: Bounds = Bounds()
    retrying: Retrying = Retrying()
    routing: Routing = Routing()
    models: Models = Models()
    relay: HookRelay = HookRelay()
    storage: Storage = Storage()
    visibility: Visibility = Visibility(ui_metadata=COMPACT_UI_METADATA)
    """A sender's plans give the web UI their summary unless asked for more (an input built
    by hand, without a sender, gives it everything: ``Visibility``'s own default)."""
    debugging: Debugging = Debugging()
    chain: Chain = Chain()

    @classmethod
    def of(cls, flat: Mapping[str, Any]) -> PlanSettings:
        """The records from flat setting names (``start_plan``'s keywords, a plugin's
        ``plan_options``), each name into its record; a name no record has is an error that
        lists the names."""
        unknown = sorted(set(flat) - set(SETTING_RECORD))
        if unknown:
            raise TypeError(
                f"unknown plan setting(s) {', '.join(unknown)}; "
                f"the settings are: {', '.join(sorted(SETTING_RECORD))}"
            )
        base = cls()
        changes: dict[str, dict[str, Any]] = {}
        for name, value in flat.items():
            changes.setdefault(SETTING_RECORD[name], {})[name] = value
        return replace(
            base, **{record: replace(getattr(base, record), **v) for record, v in changes.items()}
        )

    def records(self) -> dict[str, Any]:
        """Record name -> record, as ``PlanInput`` and ``AgentStepInput`` name their fields."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


RECORDS: dict[str, type[Any]] = {f.name: type(f.default) for f in fields(PlanSettings)}
"""Each record's name (a field of the inputs that carry it) and class."""
SETTING_RECORD: dict[str, str] = {
    f.name: name for name, cls in RECORDS.items() for f in fields(cls)
}
"""Each flat setting name and the record that holds it."""
if len(SETTING_RECORD) != sum(len(fields(c)) for c in RECORDS.values()):
    raise TypeError("a setting name is in two records: the inputs' JSON form is flat")
PLAN_OPTIONS: tuple[str, ...] = tuple(
    sorted(
        f.name
        for cls in RECORDS.values()
        for f in fields(cls)
        if f.metadata.get("set_by") != "plugin"
    )
)
"""The settings a plan's sender may set through ``WorkflowPlanPlugin(plan_options=...)``:
those the plugin does not fill itself."""

_R = TypeVar("_R")


def settings_to_wire(records: Iterable[Any]) -> dict[str, Any]:
    """The records' settings as one flat object, each only when it differs from the value
    the JSON form fixes for it (its default; ``ui_metadata``: the value clients send)."""
    wire: dict[str, Any] = {}
    for record in records:
        for f in fields(record):
            value = getattr(record, f.name)
            if value != f.metadata.get(_COMPACT_DEFAULT, f.default):
                wire[f.name] = value
    return wire


def records_from_wire(
    classes: Mapping[str, type[Any]], flat: Mapping[str, Any], *, compact: bool
) -> dict[str, Any]:
    """Record name -> record, read from flat settings; what ``flat`` lacks takes the value
    ``settings_to_wire`` left off (``compact``) or the default; unknown names are ignored
    (a newer sender)."""
    records: dict[str, Any] = {}
    for name, cls in classes.items():
        values = {f.name: flat[f.name] for f in fields(cls) if f.name in flat}
        if compact:
            for f in fields(cls):
                if f.name not in values and _COMPACT_DEFAULT in f.metadata:
                    values[f.name] = f.metadata[_COMPACT_DEFAULT]
        records[name] = cls(**values)
    return records


def record_from(cls: type[_R], data: Any) -> _R:
    """One record from its dataclass form (a nested object, as the default converter
    encodes an input built by hand); unknown keys are ignored, a missing one is its default."""
    if isinstance(data, cls):
        return data
    if data is None:
        return cls()
    if not isinstance(data, dict):
        raise TypeError(f"not a plan's {cls.__name__} settings: {str(data)[:200]}")
    return cls(**{f.name: data[f.name] for f in fields(cls) if f.name in data})  # type: ignore[arg-type]
