"""The tool registry: one place that knows every tool a plan may call.

Tools arrive in several shapes: Strands ``@tool`` functions, other Strands
``AgentTool``s, plain Python functions, and existing Temporal activities. The
registry gives them one face: a name, an input schema (which the checker uses
to reject bad arguments before anything runs), per-tool defaults for durable
runs (timeout, retries, heartbeat, approval), and ``invoke(args)`` returning the
raw JSON result so later bindings can address its fields. One tool on its own (what it is
made from, how it is called) is ``registered_tool.py``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from strands.interrupt import InterruptException

from durable_plan.check import ToolCatalog, ToolSpec
from durable_plan.check.plan_file.records import PlanFileError
from durable_plan.check.shapes.declared import declared_shape
from durable_plan.language import routing
from durable_plan.language.agent_step import RESERVED_TOOL_NAMES
from durable_plan.language.errors import APPROVAL_REFUSAL, StepFailure, interrupt_message
from durable_plan.language.options import DEFAULT_RETRIES, DEFAULT_TIMEOUT_S, ToolKind, ToolOptions
from durable_plan.language.patterns import matches_patterns
from durable_plan.language.routing import check_routing
from durable_plan.tools import queue_limiter
from durable_plan.tools.approval import ApprovalPolicy
from durable_plan.tools.registered_tool import (
    Tool,
    ToolArgumentError,
    ToolFailed,
    _to_tool,
    unwrap_tool_result,
)
from durable_plan.tools.saved_plans import SavedPlanSource, plan_files, saved_plan_tool

__all__ = [
    "APPROVAL_REFUSAL",
    "DEFAULT_RETRIES",
    "DEFAULT_TIMEOUT_S",
    "Tool",
    "ToolArgumentError",
    "ToolFailed",
    "ToolKind",
    "ToolOptions",
    "ToolRegistry",
    "matches_patterns",
    "unwrap_tool_result",
]


class ToolRegistry:
    """Name -> Tool, plus the views the checker, runners and Strands need."""

    def __init__(self, tools: Iterable[Any] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        self._routes: list[tuple[tuple[str, ...], str]] = []
        for item in tools:
            self.add(item)

    def route(self, patterns: str | Sequence[str], task_queue: str) -> None:
        """Tools whose names match ``patterns`` (``"gpu_*"``; later patterns win, as in
        ``plannable``) run on ``task_queue``: the ones registered already and the ones
        registered after. A tool's own ``task_queue=`` wins over any route; MCP tools run
        where their server's activities do and are left alone. All or nothing: a tool the
        route cannot take (one that runs local) is an error and nothing is routed."""
        listed = (patterns,) if isinstance(patterns, str) else tuple(patterns)
        routed = {
            name: replace(tool, options=replace(tool.options, task_queue=task_queue))
            for name, tool in self._tools.items()
            if tool.options.task_queue is None
            and tool.kind != "mcp"
            and matches_patterns(name, listed)
        }
        check_routing(f"route({listed!r})", replace(ToolOptions(), task_queue=task_queue))
        for name, tool in routed.items():
            check_routing(name, tool.options)
        self._routes.append((listed, task_queue))
        self._tools.update(routed)

    def declare(
        self,
        name: str,
        *,
        task_queue: str,
        description: str = "",
        input_schema: Mapping[str, Any] | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        retries: int = DEFAULT_RETRIES,
        heartbeat_timeout_s: float | None = None,
        requires_approval: bool = False,
        reuse: bool = True,
        max_concurrent: int | None = None,
        max_per_second: float | None = None,
        output_schema: Mapping[str, Any] | None = None,
    ) -> Tool:
        """A tool whose code is elsewhere: the workers of ``task_queue`` register it
        (``tool_worker``); this process plans it and schedules its steps there, without
        importing it. The rules must match the registration over there (the plan's tool
        table carries these). In-process such a tool cannot run: the check refuses it.
        ``output_schema``: its return shape, as for ``add``."""
        schema = dict(input_schema or {"type": "object", "properties": {}})
        options = ToolOptions(
            timeout_s=timeout_s,
            retries=retries,
            heartbeat_timeout_s=heartbeat_timeout_s,
            requires_approval=requires_approval,
            reuse=reuse,
            input_schema=schema,
            description=description,
            task_queue=task_queue,
            max_concurrent=max_concurrent,
            max_per_second=max_per_second,
            output_schema=declared_shape(output_schema),
        )
        check_routing(name, options)
        tool = Tool(name, description, schema, "function", None, options)
        if name in self._tools or name in RESERVED_TOOL_NAMES:
            raise ValueError(f"a tool named {name!r} is already registered or reserved")
        self._tools[name] = tool
        return tool

    def _routed(self, name: str) -> str | None:
        """The queue of the latest route whose patterns match ``name``, if any."""
        for patterns, queue in reversed(self._routes):
            if matches_patterns(name, patterns):
                return queue
        return None

    def task_queues(self) -> dict[str, list[str]]:
        """Each task queue tools are routed to, with their names (declared tools included),
        in name order: the workers a deployment of this registry runs besides the plans'."""
        queues: dict[str, list[str]] = {}
        for name in sorted(self._tools):
            queue = self._tools[name].options.task_queue
            if queue is not None:
                queues.setdefault(queue, []).append(name)
        return dict(sorted(queues.items()))

    def routed_to(self, task_queue: str) -> list[Tool]:
        """The tools whose steps run on ``task_queue``, a queue of their own, with code in
        this process (a ``tool_worker`` serves them; declared tools have their code there)."""
        return [
            t
            for t in self._tools.values()
            if t.target is not None and t.kind != "mcp" and t.options.task_queue == task_queue
        ]

    def queue_limits(self, task_queue: str) -> dict[str, Any]:
        """The limits of ``task_queue`` as worker options, merged over every tool of it
        (``routing.queue_limits``; raises when two state different ones): ``tool_worker``
        gives them to the queue's worker and ``call_slot`` holds in-process calls to them,
        one merge for both, so a tool that states none is held by its queue-mates' limits."""
        return routing.queue_limits(self.routed_to(task_queue), task_queue)

    def call_slot(self, name: str) -> contextlib.AbstractAsyncContextManager[None]:
        """Where an in-process call of ``name`` waits for its queue's limits (the same
        limiter for every tool of the queue, whichever is called first)."""
        queue = self.get(name).options.task_queue
        if queue is None:
            return contextlib.nullcontext()
        return queue_limiter.call_slot(queue, self.queue_limits(queue))

    def add(
        self,
        obj: Any,
        *,
        name: str | None = None,
        timeout_s: float | None = None,
        retries: int | None = None,
        heartbeat_timeout_s: float | None = None,
        requires_approval: bool = False,
        local: bool = False,
        allow_local: bool = False,
        reuse: bool = True,
        task_queue: str | None = None,
        max_concurrent: int | None = None,
        max_per_second: float | None = None,
        output_schema: Mapping[str, Any] | None = None,
    ) -> Tool:
        """Register a Strands tool, a plain function, or a Temporal activity.

        ``local=True`` runs the tool's plan steps as local activities by default:
        for short, pure tools it saves a server round trip per step.
        ``allow_local=True`` lets a plan step ask for that (``"local": true``).
        ``timeout_s`` and ``retries`` are upper bounds: a step may ask for less.
        ``reuse=False``: a repair plan runs this tool's steps again even when an earlier
        plan of the conversation ran them ok with the same arguments (for reads whose
        answer changes over time; see ``durable_plan.run.reuse``).
        ``task_queue``: the queue this tool's steps run on, whatever the plan's (a GPU
        machine, a private network, other credentials; ``tool_worker`` serves it); default:
        the first ``route`` pattern that matches, else the plan's queue.
        ``max_concurrent`` / ``max_per_second``: the most calls at once (per worker of the
        tool's queue) and started per second (across every plan: the server enforces it);
        both need the tool's own ``task_queue`` (``durable_plan.language.routing``).
        ``output_schema``: the tool's return shape as a JSON Schema, when its return
        annotation or its docstring's ``Returns:`` line does not say it (they are read
        otherwise, ``durable_plan.check.shapes.declared``); ``{}`` declares none. A plan
        reading a field the shape rules out is rejected before anything runs.
        """
        tool = _to_tool(obj, name)
        if tool.name in RESERVED_TOOL_NAMES:
            raise ValueError(
                f"a tool cannot be named {tool.name!r}: the plan language reserves it "
                f"(reserved: {', '.join(sorted(RESERVED_TOOL_NAMES))}); register it under "
                "another name (name=...)"
            )
        options = replace(
            tool.options,
            timeout_s=timeout_s if timeout_s is not None else tool.options.timeout_s,
            retries=retries if retries is not None else tool.options.retries,
            heartbeat_timeout_s=heartbeat_timeout_s,
            requires_approval=requires_approval,
            local=local,
            allow_local=allow_local,
            reuse=reuse,
            input_schema=tool.input_schema,
            description=tool.description,
            task_queue=task_queue if task_queue is not None else self._routed(tool.name),
            max_concurrent=max_concurrent,
            max_per_second=max_per_second,
            output_schema=(
                declared_shape(output_schema)
                if output_schema is not None
                else tool.options.output_schema
            ),
        )
        check_routing(tool.name, options)
        tool = replace(tool, options=options)
        if tool.name in self._tools:
            raise ValueError(f"a tool named {tool.name!r} is already registered")
        self._tools[tool.name] = tool
        return tool

    def add_plan(
        self,
        path_or_plan: SavedPlanSource,
        *,
        name: str | None = None,
        description: str | None = None,
        timeout_s: float | None = None,
    ) -> Tool:
        """Register a saved plan as the tool ``plan__<name>`` (``tools/saved_plans.py``): a
        plan file's path, a ``Plan`` or a plan file's content, with declared ``inputs`` and
        ``returns``; ``name`` defaults to the file's stem. It is checked now, against the
        tools registered so far (register the plans it calls first): a broken saved plan
        raises ``PlanFileError`` with every problem and is not registered.
        ``timeout_s``: the most one call of it may take as a whole."""
        # Checked as it will run: inside a caller (depth 1), its agent steps on the
        # caller's default model (a model it names is checked when a plan calls it).
        catalog = replace(
            self.catalog(durable=True), plan_depth=1, default_model="the caller's model"
        )
        tool = saved_plan_tool(
            path_or_plan,
            catalog,
            name=name,
            description=description,
            timeout_s=timeout_s,
        )
        if tool.name in self._tools:
            raise ValueError(f"a tool named {tool.name!r} is already registered")
        self._tools[tool.name] = tool
        return tool

    def add_plans(self, directory: str | Path) -> list[Tool]:
        """Register every plan file of ``directory`` (``*.yaml``, ``*.yml``, ``*.json``) as
        a saved plan named by its file's stem, each after the plans it calls whatever their
        names' order; all or nothing: a file that cannot register raises with its problems
        and none of the directory's plans is registered."""
        pending = plan_files(directory)
        added: list[Tool] = []
        while pending:
            failed: list[tuple[Path, Exception]] = []
            for path in pending:
                try:
                    added.append(self.add_plan(path))
                except (ValueError, PlanFileError) as exc:
                    failed.append((path, exc))
            if len(failed) == len(pending):  # no progress: these cannot register
                for tool in added:
                    del self._tools[tool.name]
                raise failed[0][1]
            pending = [path for path, _ in failed]
        return added

    def with_tools(self, tools: Iterable[Tool]) -> ToolRegistry:
        """A copy with ready-made ``Tool``s added as they are (MCP tools, listed per plan);
        a name already taken is an error naming both, never a silent replacement."""
        merged = ToolRegistry()
        merged._tools = dict(self._tools)
        merged._routes = list(self._routes)
        for tool in tools:
            if tool.name in merged._tools:
                raise ValueError(
                    f"two tools are named {tool.name!r} (a registered tool and an MCP tool, "
                    "or two MCP tools): rename the registered tool (ToolRegistry.add(name=...))"
                )
            merged._tools[tool.name] = tool
        return merged

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def get(self, name: str) -> Tool:
        try:
            return self._tools[name]
        except KeyError:
            raise KeyError(f"no tool named {name!r}; registered: {sorted(self._tools)}") from None

    @property
    def names(self) -> list[str]:
        return list(self._tools)

    def catalog(
        self,
        plannable: Sequence[str] = ("*",),
        *,
        approval: ApprovalPolicy | None = None,
        durable: bool = False,
    ) -> ToolCatalog:
        """What the checker may accept: ``plannable`` applied (``[]``: nothing), and
        approval-gated tools refused in-process or paused durably (``ApprovalPolicy``)."""
        specs = []
        for tool in self._tools.values():
            refused = None
            if not matches_patterns(tool.name, plannable):
                refused = "it is excluded from plans by the plannable setting"
            elif tool.target is None and tool.kind != "plan" and not durable:
                refused = (
                    f"its code runs only on the workers of task queue "
                    f"{tool.options.task_queue!r} (declared here); run the plan durably"
                )
            specs.append(
                ToolSpec(
                    tool.name, tool.input_schema, refused, tool.options, tool.options.output_schema
                )
            )
        catalog = ToolCatalog({s.name: s for s in specs})
        return (approval or ApprovalPolicy()).apply(catalog, durable=durable)

    def options(self, approval: ApprovalPolicy | None = None) -> dict[str, ToolOptions]:
        """Per-tool durable rules, as plain data for workflow input (gates applied)."""
        options = {name: t.options for name, t in self._tools.items()}
        return (approval or ApprovalPolicy()).options(options)

    def timeouts(self) -> dict[str, float]:
        """Per-tool timeouts, so a hung tool fails its step in-process too."""
        return {name: t.options.timeout_s for name, t in self._tools.items()}

    async def invoke(
        self, name: str, args: dict[str, Any], invocation_state: Mapping[str, Any] | None = None
    ) -> Any:
        """An ``Invoker`` for the in-process runner: the tool's limits hold per process
        (``durable_plan.tools.queue_limiter``; durably its queue holds them)."""
        tool = self.get(name)
        try:
            async with self.call_slot(name):
                return await tool.invoke(args, invocation_state)
        except InterruptException:
            # Nobody can answer a person's question in the middle of a plan.
            raise StepFailure(interrupt_message(name)) from None
