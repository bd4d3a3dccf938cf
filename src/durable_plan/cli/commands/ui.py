"""`durable-plan ui`: the plan console in the browser (``durable_plan.console``)."""

from __future__ import annotations

import argparse
import asyncio
import sys

from durable_plan.cli.commands import EXIT_BAD_INPUT, EXIT_OK, CommandError
from durable_plan.cli.commands.server import client_command, connect, keyring


def ui(args: argparse.Namespace) -> int:
    client_command(_ui(args))


async def _ui(args: argparse.Namespace) -> int:
    try:
        from durable_plan.console.serve import console_url, running_console
        from durable_plan.console.settings import ConsoleSettings
    except ImportError as exc:  # starlette or uvicorn missing
        raise CommandError(
            EXIT_BAD_INPUT,
            f"ui: {exc.name} is not installed; pip install 'durable-plan[ui]'",
        ) from None
    decodes = keyring(args.encrypt) is not None
    client = await connect(args.address, args.namespace, encrypt=args.encrypt)
    settings = ConsoleSettings.for_host(
        args.host,
        args.port,
        args.token,
        decodes=decodes,
        address=args.address,
        namespace=args.namespace,
        allowed_hosts=tuple(args.allowed_host),
    )
    try:
        async with running_console(client, settings) as port:
            keys = "with the keys of $DURABLE_PLAN_KEYS" if decodes else "without keys"
            print(
                f"plan console: {console_url(settings, port)} (server {args.address}, "
                f"namespace {args.namespace}, {keys}). Ctrl-C stops it",
                flush=True,
            )
            if settings.token and not args.token:
                print("the token was generated for this run; pass --token to fix one", flush=True)
            await asyncio.Event().wait()
    except OSError as exc:
        raise CommandError(
            EXIT_BAD_INPUT,
            f"ui: cannot listen on {args.host}:{args.port} ({exc.strerror}); pick another --port",
        ) from None
    print("plan console stopped", file=sys.stderr)
    return EXIT_OK
