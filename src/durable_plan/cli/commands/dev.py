"""`durable-plan dev`: a local Temporal dev server in the foreground."""

from __future__ import annotations

import argparse
import sys

from durable_plan.cli.commands import EXIT_BAD_INPUT, EXIT_FAILED, CommandError
from durable_plan.server.devserver import DevServer, DevServerError, DevServerNotFound


def _pairs(values: list[str] | None, untuned: bool) -> dict[str, str] | None:
    """None keeps DevServer's tuned default; --untuned or explicit values replace it."""
    if values is None:
        return {} if untuned else None
    pairs: dict[str, str] = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise CommandError(EXIT_BAD_INPUT, f"dev: expected KEY=VALUE, got {item!r}")
        pairs[key] = value
    return pairs


def _codec_endpoint(args: argparse.Namespace) -> list[str]:
    endpoint = getattr(args, "ui_codec_endpoint", None)
    return ["--ui-codec-endpoint", endpoint] if endpoint else []


def run_dev(args: argparse.Namespace) -> int:
    ui_port = None if args.headless else (args.ui_port or args.port + 1000)
    if ui_port is not None and ui_port > 65535:
        raise CommandError(
            EXIT_BAD_INPUT,
            f"dev: the web UI's default port, --port + 1000 = {ui_port}, is past 65535; pass "
            "--ui-port PORT, or --headless",
        )
    try:
        server = DevServer(
            port=args.port,
            ui_port=ui_port,
            headless=args.headless,
            db_filename=args.db_filename,
            temporal_cli=args.temporal_cli,
            dynamic_config=_pairs(args.dynamic_config_value, args.untuned),
            sqlite_pragmas=_pairs(args.sqlite_pragma, args.untuned),
            extra_args=_codec_endpoint(args),
        )
    except DevServerNotFound as err:
        # A setup problem, not a bug: one line with the fix.
        raise CommandError(EXIT_BAD_INPUT, str(err)) from None
    try:
        server.start()
    except DevServerError as err:
        raise CommandError(EXIT_FAILED, str(err)) from None
    try:
        storage = args.db_filename or "in memory (lost on stop; --db-filename PATH keeps it)"
        print(f"Temporal dev server: {server.target}  (namespace {server.namespace})", flush=True)
        if server.ui_url:
            print(f"Web UI:              {server.ui_url}", flush=True)
            if args.ui_codec_endpoint:
                print(f"UI codec endpoint:   {args.ui_codec_endpoint}", flush=True)
        print(f"Storage:             {storage}", flush=True)
        print(f"Server log:          {server.log_path}", flush=True)
        print("Press Ctrl-C to stop.", flush=True)
        code = server.run_foreground()
    finally:
        server.stop()
    if code != 0:
        print(f"Temporal dev server exited with code {code}:\n{server.log_tail()}", file=sys.stderr)
        return EXIT_FAILED
    print("Stopped.", flush=True)
    return 0
