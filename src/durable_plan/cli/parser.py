"""The `durable-plan` argument parser: one `_add_<name>(subparsers)` function per subcommand.

Each builds its parser and names its handler as "module:function" under
`durable_plan.cli.commands`, as text: building every parser imports no command's module, so
`--version`, `--help` and `validate` answer without importing Strands or the Temporal client
(a second or more). The options several subcommands share are in ``cli.arguments``.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable

from durable_plan import __version__
from durable_plan.cli.arguments import (
    KEYS_ENV,
    TOOLS_HELP,
    Parser,
    SubParsers,
    add_encryption_option,
    add_server_options,
    add_temporal_cli_option,
    command_parser,
    port_number,
    port_or_zero,
)
from durable_plan.cli.commands import DEFAULT_TASK_QUEUE, EXIT_CODES_HELP, TOOLS_ENV

# --- dev ------------------------------------------------------------------------------------


def _add_dev(subparsers: SubParsers) -> None:
    p = command_parser(
        subparsers,
        "dev",
        "dev:run_dev",
        help="run a local Temporal dev server in the foreground (Ctrl-C stops it)",
        description="Run `temporal server start-dev` on 127.0.0.1 until Ctrl-C. Without "
        "--db-filename all workflows are kept in memory and lost when it stops.",
    )
    p.add_argument(
        "--port", type=port_number, default=7233, help="gRPC port (default: %(default)s)"
    )
    p.add_argument("--ui-port", type=port_number, help="web UI port (default: --port + 1000)")
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
    p.add_argument(
        "--ui-codec-endpoint",
        metavar="URL",
        help="the web UI decodes payloads there: a `durable-plan codec-server` (encrypted history)",
    )
    add_temporal_cli_option(p)


# --- plan files: validate, graph, run -------------------------------------------------------


def _add_validate(subparsers: SubParsers) -> None:
    p = command_parser(
        subparsers,
        "validate",
        "files:validate",
        help="check plan files without running them: every problem in every file",
        description="Check plan files (YAML or JSON): the plan, its inputs schema, and with "
        "--tools the tool names and arguments. Prints every problem as FILE:LINE: step, field: "
        "message. Fix: ... and exits 1 if there is any.",
    )
    p.add_argument("files", nargs="+", metavar="FILE", help="plan files (.yaml, .yml, .json)")
    p.add_argument("--tools", metavar="MODULE", default=os.environ.get(TOOLS_ENV), help=TOOLS_HELP)
    p.add_argument("--json", action="store_true", help="print the result as JSON")


def _add_graph(subparsers: SubParsers) -> None:
    p = command_parser(
        subparsers,
        "graph",
        "files:graph",
        help="draw a plan file's DAG (Mermaid, DOT, or SVG/PNG with Graphviz)",
        description="Draw the plan's steps and dependencies: levels left to right, `when` "
        "conditions on the edges they read, `join: any` steps with dashed inputs, returned "
        "steps in bold. Without -o, prints Mermaid (or --format dot) to stdout.",
    )
    p.add_argument("file", metavar="FILE", help="a plan file")
    p.add_argument(
        "-o",
        "--output",
        metavar="OUT",
        help="write OUT; the suffix picks the format: .svg, .png (Graphviz `dot`), .mmd, .dot",
    )
    p.add_argument("--format", choices=["mermaid", "dot"], default="mermaid", help="for stdout")


def _add_run(subparsers: SubParsers) -> None:
    p = command_parser(
        subparsers,
        "run",
        "run:run",
        help="run a plan file, in-process or on a Temporal server, with live progress",
        description="Check the plan file and its inputs, then run it: with --local in this "
        "process; with --address on that Temporal server; by default on the dev server at "
        "127.0.0.1:7233 when one answers there (`durable-plan dev`), else on a dev server "
        "started for this run. Unless --no-worker, a worker for the tools module runs "
        "in this process. A live table shows progress on a terminal (stderr); the result is "
        "printed as JSON on stdout.",
    )
    p.add_argument("file", metavar="FILE", help="a plan file")
    p.add_argument(
        "--input",
        "-i",
        dest="inputs",
        metavar="NAME=VALUE",
        action="append",
        default=[],
        help="an input value (repeatable); text for string inputs, JSON otherwise",
    )
    p.add_argument("--tools", metavar="MODULE", default=os.environ.get(TOOLS_ENV), help=TOOLS_HELP)
    where = p.add_mutually_exclusive_group()
    where.add_argument("--local", action="store_true", help="run in this process, no server")
    where.add_argument(
        "--address",
        default=os.environ.get("TEMPORAL_ADDRESS"),
        help="run on this Temporal server HOST:PORT (default: $TEMPORAL_ADDRESS, else "
        "127.0.0.1:7233 when a server answers there, else a dev server for this run)",
    )
    where.add_argument(
        "--embedded",
        action="store_true",
        help="run on a dev server started for this run, even when one answers at 127.0.0.1:7233",
    )
    p.add_argument(
        "--namespace",
        default=os.environ.get("TEMPORAL_NAMESPACE", "default"),
        help="namespace (default: $TEMPORAL_NAMESPACE or %(default)s)",
    )
    p.add_argument(
        "--task-queue",
        metavar="QUEUE",
        help=f"task queue (default: a new one for this run; {DEFAULT_TASK_QUEUE!r} with "
        "--no-worker)",
    )
    p.add_argument(
        "--no-worker",
        action="store_true",
        help="start no worker here: one started with `durable-plan worker` runs the steps",
    )
    p.add_argument("--workflow-id", metavar="ID", help="the plan workflow's id (default: new)")
    p.add_argument(
        "--quiet",
        "-q",
        action="store_true",
        help="no progress table or notes on stderr, only a failed step's one line",
    )
    add_encryption_option(p)
    add_temporal_cli_option(p)


# --- a plan on a server: show, approve (decide), worker -------------------------------------


def _add_show(subparsers: SubParsers) -> None:
    p = command_parser(
        subparsers,
        "show",
        "ledger:show",
        help="show a plan workflow's ledger; steps awaiting approval with their arguments",
        description="The ledger of a running or finished plan workflow: the same table "
        "`durable-plan run` shows live.",
    )
    p.add_argument("workflow_id", help="the plan workflow's id")
    p.add_argument("--watch", action="store_true", help="redraw until the plan ends")
    p.add_argument("--json", action="store_true", help="print the progress lines as JSON")
    add_server_options(p)


def _add_approve(subparsers: SubParsers) -> None:
    p = command_parser(
        subparsers,
        "approve",
        "ledger:approve",
        help="approve (or --reject) a step that is awaiting approval",
    )
    p.add_argument("workflow_id", help="the plan workflow's id")
    p.add_argument("step_id", help="the step awaiting approval")
    p.add_argument("--reject", action="store_true", help="reject instead of approving")
    p.add_argument("--reason", default="", help="why (shown to the model on a rejection)")
    p.add_argument(
        "--digest", help="the arguments' digest from `durable-plan show`: refuse if they changed"
    )
    add_server_options(p)


def _add_decide(subparsers: SubParsers) -> None:
    p = command_parser(
        subparsers,
        "decide",
        "ledger:approve",
        help="approve or reject a step that is awaiting approval (older spelling of approve)",
    )
    p.add_argument("workflow_id", help="the plan workflow's id")
    p.add_argument("step_id", help="the step awaiting approval")
    verdict = p.add_mutually_exclusive_group(required=True)
    verdict.add_argument("--approve", action="store_true")
    verdict.add_argument("--reject", action="store_true")
    p.add_argument("--reason", default="", help="why (shown to the model on a rejection)")
    p.add_argument(
        "--digest", help="the arguments' digest from `durable-plan show`: refuse if they changed"
    )
    add_server_options(p)


def _add_worker(subparsers: SubParsers) -> None:
    p = command_parser(
        subparsers,
        "worker",
        "worker:worker",
        help="run a worker for a tools module: plan workflows and one activity per tool",
        description="Poll a task queue for plan workflows and the tools module's tools until "
        "Ctrl-C or SIGTERM (running steps may finish first). Start plans on the same queue: "
        "`durable-plan run FILE --address ... --no-worker --task-queue QUEUE`.",
    )
    p.add_argument("--tools", metavar="MODULE", default=os.environ.get(TOOLS_ENV), help=TOOLS_HELP)
    p.add_argument(
        "--task-queue", metavar="QUEUE", default=DEFAULT_TASK_QUEUE, help="(default: %(default)s)"
    )
    p.add_argument(
        "--tools-only",
        action="store_true",
        help="serve only the tools the module routes to --task-queue (task_queue= or "
        "registry.route), with their limits, and no plan workflows: the worker of a GPU "
        "machine, a private network, a rate-limited API",
    )
    add_server_options(p)


# --- encrypted history: keygen, codec-server ------------------------------------------------


def _add_keygen(subparsers: SubParsers) -> None:
    p = command_parser(
        subparsers,
        "keygen",
        "codec:keygen",
        help=f"make an AES-256 key for encrypted history, as ID:BASE64 for ${KEYS_ENV}",
        description=f"Print a new random key as ID:BASE64KEY on stdout: export {KEYS_ENV}="
        '"$(durable-plan keygen)". With --rotate, print the current keys with the new one '
        "appended (the newest seals new payloads; the old ones still open theirs).",
    )
    p.add_argument("--id", help="the key's id (default: kYYYYMMDD)")
    p.add_argument(
        "--rotate", action="store_true", help=f"append to ${KEYS_ENV} and print all the keys"
    )


def _add_codec_server(subparsers: SubParsers) -> None:
    p = command_parser(
        subparsers,
        "codec-server",
        "codec:codec_server",
        help="serve /encode and /decode so the Temporal web UI shows encrypted payloads",
        description=f"A remote codec endpoint for the web UI, with the keys in ${KEYS_ENV}. "
        "The person's browser sends the payloads it shows to this server, so it must reach "
        "it; anyone who can reach it can decrypt, so it listens on 127.0.0.1 by default.",
    )
    p.add_argument("--host", default="127.0.0.1", help="listen address (default: %(default)s)")
    p.add_argument(
        "--port", type=port_or_zero, default=8081, help="(default: %(default)s; 0: a free one)"
    )
    p.add_argument(
        "--ui-origin",
        metavar="URL",
        action="append",
        help="a web UI origin allowed to call it, e.g. http://localhost:8233 (repeatable; "
        "default: the dev server's UI at localhost:8233 and 127.0.0.1:8233)",
    )
    p.add_argument(
        "--namespace",
        action="append",
        help="answer only for this namespace (repeatable; default: any)",
    )
    p.add_argument(
        "--allowed-host",
        metavar="HOST[:PORT]",
        action="append",
        default=[],
        help="a name this server is reached by, besides loopback ones: a request without an "
        "Origin must name it in its Host header (repeatable; guards against DNS rebinding)",
    )
    p.add_argument("--verbose", "-v", action="store_true", help="one line per request")


# --- results kept by reference: the retention sweep -----------------------------------------


def _add_sweep_store(subparsers: SubParsers) -> None:
    p = command_parser(
        subparsers,
        "sweep-store",
        "store:sweep_store",
        help="delete results kept by reference that are older than a duration (retention)",
        description="Plans delete what they stored when they close; this removes what "
        "outlived its plan (keep_stored_results, a terminated workflow). The store is "
        "--store, else $DURABLE_PLAN_STORE (a directory or s3://bucket/prefix), else the "
        "temp-dir default the workers use.",
    )
    p.add_argument(
        "--older-than",
        required=True,
        metavar="DURATION",
        help="delete objects written longer ago than this: 7d, 12h, 15m, 90s",
    )
    p.add_argument("--store", help="a directory or s3://bucket/prefix (default: the workers')")
    p.add_argument(
        "--no-running-check",
        action="store_true",
        help="delete by age alone, without asking the server which plans still run",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="list what would be deleted, one line each, and delete nothing",
    )
    add_server_options(p)


# --- upgrades: replay recorded histories on this version ------------------------------------


REPLAY_TIMEOUT_S = 600.0
"""`durable-plan replay`'s bound by default (``--timeout``): ``--limit``'s thousand histories
replay in a minute or two; a server that lists slowly or a replay that never ends fails a
deploy's check with a message instead of leaving it waiting."""


def _add_replay(subparsers: SubParsers) -> None:
    p = command_parser(
        subparsers,
        "replay",
        "replay:replay",
        help="replay workflow histories on this version: run it before deploying an upgrade",
        description="Replay histories with this version's workflows, as the upgraded workers "
        "will when they take over the plans in flight, and print one line per workflow: ok, "
        "or the first event where this version parts from the one that recorded it. Files "
        "come from `temporal workflow show --workflow-id ID --output json`; a directory is "
        "read whole (a release's corpus, tests/histories/<version>/, by its manifest). "
        "Exit 0 only when every history replays.",
    )
    p.add_argument("paths", nargs="*", metavar="PATH", help="history files or directories")
    p.add_argument(
        "--workflow-id",
        metavar="ID",
        action="append",
        default=[],
        help="fetch this workflow's history from the server (repeatable)",
    )
    p.add_argument(
        "--query",
        metavar="QUERY",
        help="fetch every workflow a visibility query lists, e.g. 'ExecutionStatus=\"Running\"'",
    )
    p.add_argument(
        "--limit",
        type=int,
        default=1000,
        help="at most this many workflows from --query (default: %(default)s)",
    )
    p.add_argument(
        "--workflows",
        metavar="MODULE[:CLASS]",
        action="append",
        default=[],
        help="your own workflow classes (your conversation workflows), besides the plan "
        "workflows: a module (every @workflow.defn class in it) or MODULE:CLASS (repeatable)",
    )
    p.add_argument(
        "--timeout",
        metavar="SECONDS",
        type=float,
        default=REPLAY_TIMEOUT_S,
        help="give up after this long, fetching included, with exit 1: a check that cannot "
        "answer must not hang a deploy (default: %(default)g)",
    )
    add_server_options(p)


# --- the whole parser ----------------------------------------------------------------------

_COMMANDS: list[Callable[[SubParsers], None]] = [
    _add_validate,
    _add_graph,
    _add_run,
    _add_show,
    _add_approve,
    _add_worker,
    _add_dev,
    _add_decide,
    _add_keygen,
    _add_codec_server,
    _add_sweep_store,
    _add_replay,
]


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="durable-plan",
        description="Temporal-durable plan executor for LLM agents.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=EXIT_CODES_HELP,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    subparsers: SubParsers = parser.add_subparsers(
        dest="command", metavar="COMMAND", parser_class=Parser
    )
    for add in _COMMANDS:
        add(subparsers)
    return parser
