"""What a tool's owner decided about how it runs: the rules a plan may only tighten.

Plain data with no dependency on Strands or Temporal, so it travels inside the
plan workflow's input as it is (the workflow reads these typed fields, never a
string-keyed table with its own defaults) and the checker can hold a plan's
per-step options against it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

ToolKind = Literal["function", "agent_tool", "activity", "mcp", "plan", "sandbox"]
"""``plan``: a saved plan (``ToolRegistry.add_plan``), run as a nested plan, never a call.
``sandbox``: a tool on a sandbox's API (``durable_plan.tools.sandbox_tools``), run against
the conversation's own environment."""

DEFAULT_TIMEOUT_S = 60.0
DEFAULT_RETRIES = 2


@dataclass(frozen=True)
class ToolOptions:
    """Per-tool rules for durable runs, set when the tool is registered.

    A plan step may ask for fewer ``retries`` and a shorter ``timeout_s``, and
    for ``local`` only where ``local`` or ``allow_local`` is set; asking for
    more is a check error naming the bound.
    """

    timeout_s: float = DEFAULT_TIMEOUT_S
    retries: int = DEFAULT_RETRIES
    heartbeat_timeout_s: float | None = None
    requires_approval: bool = False
    reuse: bool = True
    """A later plan of the same conversation may reuse a step of this tool that ended ok
    with the same id and arguments, instead of running it again (``reuse.py``). Opt out
    for reads whose answer changes over time; gated tools are never reused."""
    local: bool = False
    allow_local: bool = False
    input_schema: dict[str, Any] | None = None
    description: str = ""
    kind: ToolKind = "function"
    params: list[str] = field(default_factory=list)
    defaults: dict[str, Any] = field(default_factory=dict)
    """An existing activity's JSON parameter defaults, for arguments it is called
    with positionally (a skipped middle parameter must get its default, not None)."""
    mcp_server: str | None = None
    """``kind="mcp"``: the MCP server whose ``{server}-call-tool`` activity runs the step
    (``durable_plan.tools.mcp``); None for every other kind, and in plans started before."""
    mcp_tool: str | None = None
    """``kind="mcp"``: the tool's own name on its server (the plan calls it
    ``<server>__<tool>``)."""
    mcp_task_queue: str | None = None
    """``kind="mcp"``: the task queue of the server's activities (None: the plan's)."""
    task_queue: str | None = None
    """The task queue this tool's calls run on, whatever the plan's (None: the plan's own);
    its workers (``tool_worker``) are the only ones that need its code and credentials."""
    max_concurrent: int | None = None
    """At most this many calls at once per worker of the tool's queue (the worker's
    ``max_concurrent_activities``); needs ``task_queue``."""
    max_per_second: float | None = None
    """At most this many calls started per second across every plan (the server's rate
    limit of the tool's queue, ``max_task_queue_activities_per_second``); needs
    ``task_queue``."""
    output_schema: dict[str, Any] | None = None
    """The tool's return shape, a compact JSON Schema (``durable_plan.check.shapes.declared``):
    the checks reject a plan reading a field the shape rules out, before anything runs.
    None: not declared (any path passes, as before); sent only when set."""
    sandbox: str | None = None
    """``kind="sandbox"``: the sandbox factory's name (``StrandsPlugin(sandboxes={name: ...})``)
    whose environment the tool runs in, the conversation's (``tools/sandbox_tools.py``)."""
    saved_plan: dict[str, Any] | None = None
    """``kind="plan"``: the saved plan itself, ``{"plan": {...}, "inputs": <JSON Schema>}``,
    as its owner registered it (``durable_plan.tools.saved_plans``). It travels in the tool
    table, so every run that may call it (a plan's child, an agent step's) checks and runs
    the very plan the caller was checked against; None for every other kind."""

    def positional(self, args: dict[str, Any]) -> list[Any]:
        """An existing activity's arguments in signature order, with its own defaults.

        Omitted trailing parameters are left out, so the function's defaults apply;
        an omitted parameter before a given one gets its (JSON) default from the
        registry, never ``None``.
        """
        given = [n for n, p in enumerate(self.params) if p in args]
        last = given[-1] if given else -1
        return [args[p] if p in args else self.defaults.get(p) for p in self.params[: last + 1]]

    @property
    def may_run_local(self) -> bool:
        """Existing activities, MCP calls and sandbox tools always run as registered (an MCP
        call is the server's own activity; a sandbox tool needs a worker with the sandbox's
        factory); others where the owner allows."""
        if self.task_queue is not None:  # a local activity runs on the plan's worker
            return False
        kind = self.kind
        return kind not in ("activity", "mcp", "sandbox") and (self.local or self.allow_local)
