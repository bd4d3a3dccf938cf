"""The `durable-plan` command line.

Each subcommand is one `_add_<name>(subparsers)` function that builds its parser and sets
`func`; adding a command means writing such a function and listing it in `_COMMANDS`, without
touching `main`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, TypeAlias

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
    p.add_argument(
        "--dynamic-config-value",
        metavar="KEY=VALUE",
        action="append",
        default=None,
        help="a server dynamic-config value; replaces the tuned default "
        "history.transferProcessorMaxPollRPS=100 (repeatable)",
    )
    p.add_argument(
        "--sqlite-pragma",
        metavar="PRAGMA=VALUE",
        action="append",
        default=None,
        help="a SQLite pragma for --db-filename; replaces the tuned default journal_mode=wal",
    )
    p.add_argument(
        "--untuned",
        action="store_true",
        help="run the server exactly as `temporal server start-dev` does (slower steps)",
    )
    _add_temporal_cli_option(p)
    p.set_defaults(func=run_dev)


def _pairs(values: list[str] | None, untuned: bool) -> dict[str, str] | None:
    """None keeps DevServer's tuned default; --untuned or explicit values replace it."""
    if values is None:
        return {} if untuned else None
    pairs: dict[str, str] = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"durable-plan dev: expected KEY=VALUE, got {item!r}")
        pairs[key] = value
    return pairs


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
        dynamic_config=_pairs(args.dynamic_config_value, args.untuned),
        sqlite_pragmas=_pairs(args.sqlite_pragma, args.untuned),
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


# --- show / decide: a running plan and its approvals ----------------------------------------


def _add_server_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--address",
        default=os.environ.get("TEMPORAL_ADDRESS", "127.0.0.1:7233"),
        help="Temporal server (default: $TEMPORAL_ADDRESS or %(default)s)",
    )
    p.add_argument(
        "--namespace",
        default=os.environ.get("TEMPORAL_NAMESPACE", "default"),
        help="namespace (default: $TEMPORAL_NAMESPACE or %(default)s)",
    )


def _add_show(subparsers: SubParsers) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser(
        "show",
        help="show a plan workflow's ledger; steps awaiting approval with their arguments",
    )
    p.add_argument("workflow_id", help="the plan workflow's id")
    p.add_argument("--json", action="store_true", help="print the progress lines as JSON")
    _add_server_options(p)
    p.set_defaults(func=lambda args: _client_command(_show(args)))


async def _show(args: argparse.Namespace) -> int:
    handle = await _plan_handle(args)
    lines = await handle.progress()
    if args.json:
        print(json.dumps(lines, indent=2))
        return 0
    print(render_progress(lines))
    return 0


def render_progress(lines: list[dict[str, Any]]) -> str:
    """The ledger as text; a step awaiting approval shows the arguments being approved."""
    out = []
    for line in lines:
        error = f"  {line['error']}" if line.get("error") else ""
        attempts = f" x{line['attempts']}" if line.get("attempts", 0) > 1 else ""
        out.append(f"{line['id']:<20} {line['tool']:<24} {line['phase']}{attempts}{error}")
        if line["phase"] == "awaiting_approval":
            out.append(f"    arguments: {json.dumps(line.get('args'), sort_keys=True)}")
            out.append(f"    digest:    {line.get('args_digest')}")
        for refused in line.get("refused_decisions", []):
            out.append(f"    {refused}")
    return "\n".join(out)


def _add_decide(subparsers: SubParsers) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser(
        "decide", help="approve or reject a step that is awaiting approval"
    )
    p.add_argument("workflow_id", help="the plan workflow's id")
    p.add_argument("step_id", help="the step awaiting approval")
    verdict = p.add_mutually_exclusive_group(required=True)
    verdict.add_argument("--approve", action="store_true")
    verdict.add_argument("--reject", action="store_true")
    p.add_argument("--reason", default="", help="why (shown to the model on a rejection)")
    p.add_argument(
        "--digest",
        help="the arguments' digest from `durable-plan show`: refuse if they changed",
    )
    _add_server_options(p)
    p.set_defaults(func=lambda args: _client_command(_decide(args)))


async def _decide(args: argparse.Namespace) -> int:
    handle = await _plan_handle(args)
    try:
        taken = await handle.decide(
            args.step_id, args.approve, args.reason, args_digest=args.digest
        )
    except ValueError as err:
        print(f"durable-plan: refused: {err}", file=sys.stderr)
        return 1
    print(f"{args.step_id}: {taken}")
    return 0


def _client_command(command: Coroutine[Any, Any, int]) -> int:
    """Run a command that talks to a server, then leave the process at once.

    The Temporal client's native runtime can abort the interpreter while it
    finalizes after a failed update ("PyGILState_Release ... must be current",
    exit -6), turning a clean refusal into a crash; exiting without
    finalization keeps the command's own exit code. Output is flushed first.
    """
    code = asyncio.run(command)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


async def _plan_handle(args: argparse.Namespace) -> Any:
    from temporalio.client import Client

    from durable_plan.temporal.client import PlanHandle

    client = await Client.connect(args.address, namespace=args.namespace)
    return PlanHandle(client.get_workflow_handle(args.workflow_id))


# --- entry point ----------------------------------------------------------------------------

_COMMANDS: list[Callable[[SubParsers], None]] = [_add_dev, _add_show, _add_decide]


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
