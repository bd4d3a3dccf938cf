"""The parsers of the operator's subcommands: a plan on a server (``show``, ``approve``,
``decide``, ``worker``, and the console, ``ui``), encrypted history (``keygen``,
``codec-server``), the retention sweep (``sweep-store``) and upgrades (``replay``).

Apart from ``parser.py`` (the plan author's subcommands: ``dev``, ``validate``, ``graph``,
``run``, and the whole parser) so each module stays short enough to read; the same rule
holds here: each parser names its handler as text, importing no command's module.
"""

from __future__ import annotations

import os

from durable_plan.cli.arguments import (
    KEYS_ENV,
    TOOLS_HELP,
    SubParsers,
    add_server_options,
    command_parser,
    port_or_zero,
)
from durable_plan.cli.commands import DEFAULT_TASK_QUEUE, TOOLS_ENV

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


def _add_breakpoint_answers(subparsers: SubParsers) -> None:
    """``continue``, ``skip`` and ``abort``: answer a call paused at a breakpoint."""
    helps = {
        "continue": "let a call paused at a breakpoint go on (its approval still applies)",
        "skip": "skip a paused call: the step ends not_taken and its dependents are pruned",
        "abort": "end the plan at a paused call: it ends cancelled, with its ledger",
    }
    for action, text in helps.items():
        handler = "continue_" if action == "continue" else action
        p = command_parser(subparsers, action, f"breakpoints:{handler}", help=text)
        p.add_argument("workflow_id", help="the plan workflow's id")
        p.add_argument(
            "path",
            nargs="?",
            help="the paused call's step path (e2, e1/do.3, e1/agent.2/charge); "
            "default: the one paused call",
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


def _add_ui(subparsers: SubParsers) -> None:
    p = command_parser(
        subparsers,
        "ui",
        "ui:ui",
        help="serve the plan console: plans as live graphs in the browser; approve, cancel",
        description="Serve a web page listing the server's plans and conversations; a plan "
        "opens as its DAG, coloured live by its step events, each step's arguments, result "
        "and error a click away, approvals and cancellation as buttons. It listens on "
        "127.0.0.1 by default; any other --host requires a token on every request (--token, "
        f"or a new one printed in the URL). Sealed values show only with ${KEYS_ENV}.",
    )
    p.add_argument("--host", default="127.0.0.1", help="listen address (default: %(default)s)")
    p.add_argument(
        "--port", type=port_or_zero, default=8700, help="(default: %(default)s; 0: a free one)"
    )
    p.add_argument(
        "--token",
        default=os.environ.get("DURABLE_PLAN_UI_TOKEN"),
        help="required on every request (default: $DURABLE_PLAN_UI_TOKEN; for a --host other "
        "than loopback, a new one when not given)",
    )
    p.add_argument(
        "--allowed-host",
        metavar="HOST",
        action="append",
        default=[],
        help="a name the page is reached by without a token, besides loopback ones (DNS "
        "rebinding guard; repeatable)",
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
