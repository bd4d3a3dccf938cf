"""The `durable-plan` argument parser: one `_add_<name>(subparsers)` function per subcommand.

Each builds its parser and names its handler as "module:function" under
`durable_plan.cli.commands`, as text: building every parser imports no command's module, so
`--version`, `--help` and `validate` answer without importing Strands or the Temporal client
(a second or more). The options several subcommands share are in ``cli.arguments``; the
operator's subcommands (a plan on a server, keys, the sweep, replay), in
``cli.operations_parser``.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable

from durable_plan import __version__
from durable_plan.cli.arguments import (
    TOOLS_HELP,
    Parser,
    SubParsers,
    add_encryption_option,
    add_temporal_cli_option,
    command_parser,
    help_epilog,
    port_number,
)
from durable_plan.cli.commands import DEFAULT_TASK_QUEUE, TOOLS_ENV
from durable_plan.cli.operations_parser import (
    _add_approve,
    _add_breakpoint_answers,
    _add_codec_server,
    _add_decide,
    _add_keygen,
    _add_replay,
    _add_show,
    _add_sweep_store,
    _add_ui,
    _add_worker,
)

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
    p.add_argument(
        "--plans",
        metavar="DIR",
        action="append",
        default=[],
        help="register the plan files of DIR as saved plans, tools named plan__<file stem> "
        "(repeatable; each is checked first: one that cannot register stops the run)",
    )
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
        "--break",
        dest="breakpoints",
        action="append",
        default=[],
        metavar="PATTERN",
        help="pause before the calls this step path pattern names (e2, 'e1/agent.*/charge*'); "
        "repeatable; answer with `durable-plan continue|skip|abort WORKFLOW PATH`",
    )
    p.add_argument(
        "--quiet",
        "-q",
        action="store_true",
        help="no progress table or notes on stderr, only a failed step's one line",
    )
    add_encryption_option(p)
    add_temporal_cli_option(p)


# --- the whole parser ----------------------------------------------------------------------

_COMMANDS: list[Callable[[SubParsers], None]] = [
    _add_validate,
    _add_graph,
    _add_run,
    _add_show,
    _add_approve,
    _add_breakpoint_answers,
    _add_ui,
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
        epilog=help_epilog(None),
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    subparsers: SubParsers = parser.add_subparsers(
        dest="command", metavar="COMMAND", parser_class=Parser
    )
    for add in _COMMANDS:
        add(subparsers)
    return parser
