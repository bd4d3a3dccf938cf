"""The `durable-plan` command line.

Each subcommand is one `_add_<name>(subparsers)` function that builds its parser and sets
`func`; adding a command means writing such a function and listing it in `_COMMANDS`, without
touching `main`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import TypeAlias

from durable_plan import __version__
from durable_plan.devserver import DevServer, DevServerError, DevServerNotFound

SubParsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
Handler = Callable[[argparse.Namespace], int]

EXIT_SETUP = 2  # the same code argparse uses for a usage error: the fix is on the user's side


# --- dev ------------------------------------------------------------------------------------


def _add_dev(subparsers: SubParsers) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser(
        "dev",
        help="run a local Temporal dev server in the foreground (Ctrl-C stops it)",
        description="Run `temporal server start-dev` on 127.0.0.1 until Ctrl-C. Without "
        "--db-filename all workflows are kept in memory and lost when it stops.",
    )
    p.add_argument("--port", type=int, default=7233, help="gRPC port (default: %(default)s)")
    p.add_argument("--ui-port", type=int, help="web UI port (default: --port + 1000)")
    p.add_argument("--headless", action="store_true", help="no web UI")
    p.add_argument("--db-filename", metavar="PATH", help="sqlite file that keeps state")
    _add_temporal_cli_option(p)
    p.set_defaults(func=run_dev)


def _add_temporal_cli_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--temporal-cli",
        metavar="PATH",
        help="the `temporal` binary (default: $TEMPORAL_CLI, this venv's bin, then PATH)",
    )


def run_dev(args: argparse.Namespace) -> int:
    ui_port = None if args.headless else (args.ui_port or args.port + 1000)
    server = DevServer(
        port=args.port,
        ui_port=ui_port,
        headless=args.headless,
        db_filename=args.db_filename,
        temporal_cli=args.temporal_cli,
    )
    server.start()
    try:
        storage = args.db_filename or "in memory (lost on stop; --db-filename PATH keeps it)"
        print(f"Temporal dev server: {server.target}  (namespace {server.namespace})", flush=True)
        if server.ui_url:
            print(f"Web UI:              {server.ui_url}", flush=True)
        print(f"Storage:             {storage}", flush=True)
        print(f"Server log:          {server.log_path}", flush=True)
        print("Press Ctrl-C to stop.", flush=True)
        code = server.run_foreground()
    finally:
        server.stop()
    if code != 0:
        print(f"Temporal dev server exited with code {code}:\n{server.log_tail()}", file=sys.stderr)
        return 1
    print("Stopped.", flush=True)
    return 0


# --- entry point ----------------------------------------------------------------------------

_COMMANDS: list[Callable[[SubParsers], None]] = [_add_dev]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="durable-plan", description="Temporal-durable plan executor for LLM agents."
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for add in _COMMANDS:
        add(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    func: Handler | None = getattr(args, "func", None)
    if func is None:
        parser.print_help(sys.stderr)
        return EXIT_SETUP
    try:
        return func(args)
    except DevServerNotFound as err:
        # A setup problem, not a bug: one line with the fix, no traceback.
        print(f"durable-plan: error: {err}", file=sys.stderr)
        return EXIT_SETUP
    except DevServerError as err:
        print(f"durable-plan: error: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
