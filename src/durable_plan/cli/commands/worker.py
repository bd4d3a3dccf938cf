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

if TYPE_CHECKING:
    from temporalio.client import Client


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
    from durable_plan.temporal.worker import plan_worker
    from durable_plan.tools.registry import ToolRegistry

    assert isinstance(registry, ToolRegistry)
    client = await connect(args.address, args.namespace, encrypt=args.encrypt)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with plan_worker(client, task_queue=args.task_queue, registry=registry):
        print(
            f"worker: {len(registry)} tools ({', '.join(registry.names)}) on task queue "
            f"{args.task_queue!r} at {args.address} (namespace {args.namespace})"
            f"{_sealing(client)}; Ctrl-C stops it",
            flush=True,
        )
        await stop.wait()
        print("worker: stopping (running steps may finish first)", file=sys.stderr, flush=True)
    return EXIT_OK


def _sealing(client: Client) -> str:
    """What the worker's first line adds when payloads are encrypted, so a person sees it."""
    from durable_plan.protect.encryption import codec_of

    codec = codec_of(client.config(active_config=True)["data_converter"])
    return f", payloads encrypted with key {codec.keyring.newest[0]}" if codec else ""
