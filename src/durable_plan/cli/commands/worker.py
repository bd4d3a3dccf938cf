"""`durable-plan worker`: plan workflows and a tools module's tools, on one task queue."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from typing import TYPE_CHECKING

from durable_plan.cli.commands import EXIT_BAD_INPUT, EXIT_OK, CommandError
from durable_plan.cli.commands.server import client_command, connect
from durable_plan.server.activity_logs import one_line_activity_failures
from durable_plan.server.long_lived import freeze_startup_objects

if TYPE_CHECKING:
    from collections.abc import Sequence

    from temporalio.client import Client

    from durable_plan.tools.registry import Tool, ToolRegistry


def worker(args: argparse.Namespace) -> int:
    from durable_plan.cli.tools_module import ToolsModuleError, load_tools

    if not args.tools:
        raise CommandError(
            EXIT_BAD_INPUT, "worker needs --tools MODULE (e.g. --tools examples.plan_tools)"
        )
    try:
        registry = load_tools(args.tools)
    except ToolsModuleError as exc:
        raise CommandError(EXIT_BAD_INPUT, str(exc)) from None
    # One line per failed attempt on this terminal, not the SDK's traceback of each.
    one_line_activity_failures(prefix="worker: ")
    client_command(_serve(args, registry))


async def _serve(args: argparse.Namespace, registry: object) -> int:
    from durable_plan.temporal.worker.helpers import plan_worker, tool_worker
    from durable_plan.tools.registry import ToolRegistry

    assert isinstance(registry, ToolRegistry)
    client = await connect(args.address, args.namespace, encrypt=args.encrypt)
    try:
        if args.tools_only:  # the tools routed to this queue, for plans on other queues
            served = registry.routed_to(args.task_queue)
            worker = tool_worker(client, task_queue=args.task_queue, registry=registry)
        else:
            served = [  # routed tools are named with their queue (their code is kept too)
                t
                for t in registry
                if t.target is not None
                and t.kind != "mcp"
                and t.options.task_queue in (None, args.task_queue)
            ]
            worker = plan_worker(client, task_queue=args.task_queue, registry=registry)
    except ValueError as exc:
        raise CommandError(EXIT_BAD_INPUT, str(exc)) from None
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    freeze_startup_objects()  # later collections skip what start-up made (long_lived.py)
    async with worker:
        print(
            f"worker{' (tools only)' if args.tools_only else ''}: "
            f"{_served(served, registry, args.task_queue)} on task queue {args.task_queue!r} at "
            f"{args.address} (namespace {args.namespace})"
            f"{_routed_elsewhere(registry, args.task_queue, args.tools)}{_sealing(client)}; "
            "Ctrl-C stops it",
            flush=True,
        )
        await stop.wait()
        print("worker: stopping (running steps may finish first)", file=sys.stderr, flush=True)
    return EXIT_OK


def _served(tools: Sequence[Tool], registry: ToolRegistry, task_queue: str) -> str:
    """``3 tools (a, b, c)``, with the queue's limits when its tools have any (the merge
    the worker was given, ``ToolRegistry.queue_limits``)."""
    text = f"{len(tools)} tool{'' if len(tools) == 1 else 's'} ({', '.join(t.name for t in tools)})"
    limits = registry.queue_limits(task_queue)
    if "max_task_queue_activities_per_second" in limits:
        text += f", at most {limits['max_task_queue_activities_per_second']:g} calls/s"
    if "max_concurrent_activities" in limits:
        text += f", at most {limits['max_concurrent_activities']} at once on this worker"
    return text


def _routed_elsewhere(registry: ToolRegistry, task_queue: str, module: str) -> str:
    """Where the plans' routed tools run, so a person knows which workers to start too."""
    return "".join(
        f"; {', '.join(names)} run on task queue {queue!r} (durable-plan worker --tools "
        f"{module} --tools-only --task-queue {queue})"
        for queue, names in registry.task_queues().items()
        if queue != task_queue
    )


def _sealing(client: Client) -> str:
    """What the worker's first line adds when payloads are encrypted, so a person sees it."""
    from durable_plan.protect.encryption import codec_of

    codec = codec_of(client.config(active_config=True)["data_converter"])
    return f", payloads encrypted with key {codec.keyring.newest[0]}" if codec else ""
