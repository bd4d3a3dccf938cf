"""Where a tool's calls run and what they may take, decided from the owner's options once.

A tool routed to a queue of its own (``task_queue``) runs on that queue's workers only;
its limits are that queue's: Temporal enforces a per-second rate per task queue on the
server, across every worker and every plan (``max_task_queue_activities_per_second``), and
a number of calls at once only per worker (``max_concurrent_activities``). So a limit
needs the tool's own queue (on the plan's queue it would throttle every other tool and the
plan's own activities), and tools that share a limited queue share its limits, so they must
state the same ones.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

from durable_plan.language.options import ToolOptions

MAX_QUEUE_NAME = 1000
"""Temporal's longest task queue name (bytes of ASCII, which names here mostly are)."""


class _Routed(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def options(self) -> ToolOptions: ...


def routing_problem(options: ToolOptions) -> str | None:
    """What is wrong with a tool's routing, if anything: the one rule, used when a tool is
    registered (``check_routing``) and by the plan check for tool tables built by hand."""
    queue = options.task_queue
    if queue is not None and (not isinstance(queue, str) or not 0 < len(queue) <= MAX_QUEUE_NAME):
        return f"task_queue must be a name of 1 to {MAX_QUEUE_NAME} characters"
    concurrent, rate = options.max_concurrent, options.max_per_second
    if concurrent is not None and (isinstance(concurrent, bool) or not isinstance(concurrent, int)):
        return "max_concurrent must be a whole number"
    if rate is not None and (isinstance(rate, bool) or not isinstance(rate, int | float)):
        return "max_per_second must be a number"
    limited = options.max_concurrent is not None or options.max_per_second is not None
    if limited and options.task_queue is None:
        return (
            "max_concurrent / max_per_second are the limits of a task queue, and the tool has "
            "no queue of its own; give it one (task_queue=...) and run a tool_worker for it"
        )
    if options.max_concurrent is not None and options.max_concurrent < 1:
        return "max_concurrent must be at least 1"
    if options.max_per_second is not None and not options.max_per_second > 0:
        return "max_per_second must be more than 0"
    if options.task_queue is not None and (options.local or options.allow_local):
        return (
            "a tool on its own task queue cannot run as a local activity (a local activity "
            "runs on the plan's worker, which does not serve the tool)"
        )
    if options.task_queue is not None and options.kind == "mcp":
        return "an MCP tool runs where its server's activities do (mcp_task_queue)"
    return None


def check_routing(name: str, options: ToolOptions) -> None:
    """Refuse, when the tool is registered, routing its owner cannot have meant."""
    problem = routing_problem(options)
    if problem is not None:
        raise ValueError(f"tool {name!r}: {problem}")


def queue_limits(tools: Iterable[_Routed], task_queue: str) -> dict[str, Any]:
    """The worker options that enforce the limits of ``task_queue``'s tools (empty: none).

    Tools sharing the queue must state the same limits, or none (a tool stating none shares
    the others' limits there): one rate per queue."""
    stated: dict[str, tuple[str, Any]] = {}
    for tool in tools:
        for key, value in (
            ("max_task_queue_activities_per_second", tool.options.max_per_second),
            ("max_concurrent_activities", tool.options.max_concurrent),
        ):
            if value is None:
                continue
            earlier = stated.setdefault(key, (tool.name, value))
            if earlier[1] != value:
                raise ValueError(
                    f"tools {earlier[0]!r} and {tool.name!r} share task queue {task_queue!r} "
                    f"but state different limits ({key}: {earlier[1]} and {value}); a queue "
                    "has one: give them the same, or a queue each"
                )
    return {key: value for key, (_, value) in stated.items()}
