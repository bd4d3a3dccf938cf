"""`durable-plan replay`: before deploying a version, check that it replays the plans in flight.

A plan can wait days for a person; the worker that takes it over after an upgrade replays its
history with the new code, and a history the new code cannot replay fails that plan with a
nondeterminism error. This command runs the same replay offline: histories from files
(``temporal workflow show --output json``, or a release's corpus directory) or straight from a
server (``--workflow-id``, ``--query``), with this installed version's workflows, the user's
own (``--workflows``) and the converter the workers use (Strands' converter; the keys in
``$DURABLE_PLAN_KEYS`` for sealed payloads). One line per workflow; exit 0 only if all replay.
The whole command is bounded (``--timeout``): a check that cannot answer must not hang a deploy.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import math
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from durable_plan.cli.commands import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK, CommandError

if TYPE_CHECKING:
    from temporalio.client import Client, WorkflowHistory

    from durable_plan.temporal.client.replay import ReplayOutcome

MANIFEST = "manifest.json"
"""A corpus directory's index (``scripts/record_histories.py``): names, workflow ids."""
SHOW_HINT = "write one with `temporal workflow show --workflow-id ID --output json > FILE`"
MAX_HISTORY_FILE_BYTES = 256 * 1024 * 1024
"""Temporal keeps at most 50 MB of events per run; as JSON (payloads in base64, field names)
a history is a few times larger, never this large."""


def replay(args: argparse.Namespace) -> int:
    """Replay every history named and print one line each; the exit code says whether all did."""
    started = time.monotonic()
    if not (args.paths or args.workflow_id or args.query):
        raise CommandError(
            EXIT_BAD_INPUT,
            "replay: name history files or directories, --workflow-id ID or --query QUERY",
        )
    if args.limit < 1:
        raise CommandError(EXIT_BAD_INPUT, f"replay: --limit must be at least 1, not {args.limit}")
    if not (math.isfinite(args.timeout) and args.timeout > 0):
        raise CommandError(
            EXIT_BAD_INPUT, f"replay: --timeout must be more than 0 seconds, not {args.timeout:g}"
        )
    # Everything local is read and checked before a server is asked or a worker built.
    from_files = [item for path in args.paths for item in _histories_at(Path(path))]
    workflows = [cls for spec in args.workflows for cls in _workflow_classes(spec)]
    plugins = _plugins(args.encrypt)
    if not (args.workflow_id or args.query) and not from_files:
        raise CommandError(EXIT_BAD_INPUT, "replay: no .json histories in " + _paths(args))

    from durable_plan.cli.commands.server import client_command, connect

    deadline = started + args.timeout

    async def command() -> int:
        fetched: list[tuple[str, WorkflowHistory]] = []
        if args.workflow_id or args.query:
            try:
                async with asyncio.timeout(deadline - time.monotonic()):
                    client = await connect(args.address, args.namespace, encrypt=False)
                    await _fetch(client, args.workflow_id, args.query, args.limit, fetched)
            except TimeoutError:
                raise CommandError(
                    EXIT_FAILED,
                    f"replay: no answer within {args.timeout:g} s (--timeout): the server had "
                    f"sent {_histories(len(fetched))} by then; give it more time "
                    "(--timeout SECONDS) or fewer workflows (--limit, a narrower --query)",
                ) from None
            if not (from_files or fetched):
                raise CommandError(EXIT_BAD_INPUT, f"replay: no workflow matches {args.query!r}")
        return await _replay_and_report(
            [*from_files, *fetched], workflows, plugins, args.timeout, deadline
        )

    # Through client_command, files alone too: past the deadline a replayer may be left
    # waiting on its thread, and the process leaves at once (exit_now) instead of joining it.
    client_command(command())


async def _replay_and_report(
    histories: list[tuple[str, WorkflowHistory]],
    workflows: list[type],
    plugins: list[Any],
    timeout: float,
    deadline: float,
) -> int:
    from temporalio.runtime import Runtime, TelemetryConfig

    from durable_plan import __version__
    from durable_plan.temporal.client.replay import ReplayTimedOut
    from durable_plan.temporal.client.replay import replay as replay_histories

    # A failed replay is the answer here, not an incident: the SDK's warnings and tracebacks
    # of each failing workflow task would bury the one line that says where it diverged.
    quiet = Runtime(telemetry=TelemetryConfig(logging=None))
    logger = logging.getLogger("temporalio")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        outcomes: list[ReplayOutcome] = await replay_histories(
            histories,
            workflows=workflows,
            plugins=plugins,
            timeout=max(0.0, deadline - time.monotonic()),
            runtime=quiet,
        )
    except ReplayTimedOut as exc:
        for outcome in exc.answered:
            print(outcome.line(), flush=True)
        raise CommandError(
            EXIT_FAILED,
            f"replay: no answer within {timeout:g} s (--timeout): {len(exc.answered)} of "
            f"{_histories(len(histories))} answered, {exc.waiting!r} was still replaying; give "
            "it more time (--timeout SECONDS) or replay that one alone (--workflow-id ID) to "
            "see whether it ever ends",
        ) from None
    finally:
        logger.setLevel(level)
    for outcome in outcomes:
        print(outcome.line(), flush=True)
    failed = sum(not outcome.ok for outcome in outcomes)
    verdict = "all replay" if not failed else f"{failed} do not replay"
    print(
        f"replay: {_histories(len(outcomes))} on durable-plan {__version__}: {verdict}",
        file=sys.stderr,
    )
    return EXIT_FAILED if failed else EXIT_OK


def _histories(count: int) -> str:
    return f"{count} histor{'y' if count == 1 else 'ies'}"


def _histories_at(path: Path) -> Iterator[tuple[str, WorkflowHistory]]:
    """A file, a directory of files, or a corpus directory (named by its manifest)."""
    if path.is_dir():
        manifest = path / MANIFEST
        if manifest.is_file():
            yield from _corpus(path, manifest)
            return
        for file in sorted(path.glob("*.json")):
            yield _history_file(file, file.stem)
        return
    if not path.is_file():
        raise CommandError(EXIT_BAD_INPUT, f"replay: no history file or directory {str(path)!r}")
    yield _history_file(path, path.stem)


def _corpus(root: Path, manifest: Path) -> Iterator[tuple[str, WorkflowHistory]]:
    try:
        entries = json.loads(manifest.read_text())["histories"]
        named = sorted((str(name), str(entry["workflow_id"])) for name, entry in entries.items())
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise CommandError(
            EXIT_BAD_INPUT,
            f"replay: {manifest} is not a corpus manifest ({type(exc).__name__}: {exc}); "
            'it maps "histories" to {name: {"workflow_id": ...}}',
        ) from None
    for name, workflow_id in named:
        yield _history_file(root / f"{name}.json", f"{root.name}/{name}", workflow_id)


def _history_file(
    file: Path, name: str, workflow_id: str | None = None
) -> tuple[str, WorkflowHistory]:
    from temporalio.client import WorkflowHistory

    try:
        size = file.stat().st_size
    except OSError as exc:
        raise CommandError(
            EXIT_BAD_INPUT, f"replay: cannot read {str(file)!r}: {exc.strerror}"
        ) from None
    if size > MAX_HISTORY_FILE_BYTES:
        raise CommandError(
            EXIT_BAD_INPUT,
            f"replay: {str(file)!r} is {size:,} bytes, more than any history Temporal keeps "
            f"(50 MB of events; at most {MAX_HISTORY_FILE_BYTES:,} bytes as JSON)",
        )
    try:
        text = file.read_text()
        history = WorkflowHistory.from_json(workflow_id or file.stem, text)
    except OSError as exc:
        raise CommandError(
            EXIT_BAD_INPUT, f"replay: cannot read {str(file)!r}: {exc.strerror}"
        ) from None
    except Exception as exc:  # json, protobuf parsing: the file is not a history
        reason = " ".join(str(exc).split())[:200]
        raise CommandError(
            EXIT_BAD_INPUT,
            f"replay: {str(file)!r} is not a workflow history in JSON ({reason}); {SHOW_HINT}",
        ) from None
    if not history.events:
        raise CommandError(EXIT_BAD_INPUT, f"replay: {str(file)!r} has no events; {SHOW_HINT}")
    return name, history


async def _fetch(
    client: Client,
    workflow_ids: list[str],
    query: str | None,
    limit: int,
    fetched: list[tuple[str, WorkflowHistory]],
) -> None:
    """Into ``fetched`` (so that a deadline knows how far it came): the histories of
    ``workflow_ids``, then of what ``query`` lists."""
    from temporalio.service import RPCError, RPCStatusCode

    for workflow_id in workflow_ids:
        try:
            history = await client.get_workflow_handle(workflow_id).fetch_history()
        except RPCError as exc:
            if exc.status is RPCStatusCode.NOT_FOUND:
                raise CommandError(
                    EXIT_BAD_INPUT, f"replay: no workflow {workflow_id!r} on the server"
                ) from None
            raise
        fetched.append((workflow_id, history))
    if query:
        try:
            async for execution in client.list_workflows(query, limit=limit):
                handle = client.get_workflow_handle(execution.id, run_id=execution.run_id)
                fetched.append((execution.id, await handle.fetch_history()))
        except RPCError as exc:
            if exc.status is RPCStatusCode.INVALID_ARGUMENT:
                raise CommandError(
                    EXIT_BAD_INPUT,
                    f"replay: the server refuses --query {query!r}: {exc.message}",
                ) from None
            raise


def _workflow_classes(spec: str) -> list[type]:
    """``MODULE:CLASS`` (one class), or ``MODULE`` (every workflow class it defines)."""
    from durable_plan.cli.tools_module import ToolsModuleError, import_user_module

    target, _, attribute = spec.partition(":")
    if not target:
        raise CommandError(EXIT_BAD_INPUT, f"replay: --workflows {spec!r}: name a module")
    if target.endswith(".py") or "/" in target or "\\" in target:
        # The workflow sandbox re-imports a workflow's module by its name; a file loaded by
        # path has none it can import ("Failed validating workflow ...", a traceback).
        dotted = target.removesuffix(".py").replace("\\", "/").strip("/").replace("/", ".")
        raise CommandError(
            EXIT_BAD_INPUT,
            f"replay: --workflows {spec!r}: name the module, not its file (e.g. {dotted}), "
            "importable from where you run the command",
        )
    try:
        module = import_user_module(target, spec)
    except ToolsModuleError as exc:
        raise CommandError(EXIT_BAD_INPUT, f"replay: --workflows: {exc}") from None
    if attribute:
        value = getattr(module, attribute, None)
        if not isinstance(value, type) or not _is_workflow(value):
            raise CommandError(
                EXIT_BAD_INPUT,
                f"replay: --workflows {spec!r}: {attribute!r} is not a @workflow.defn class",
            )
        return [value]
    found = [
        value
        for value in vars(module).values()
        if _is_workflow(value) and value.__module__ == module.__name__
    ]
    if not found:
        raise CommandError(
            EXIT_BAD_INPUT, f"replay: --workflows {spec!r}: the module defines no workflow class"
        )
    return found


def _is_workflow(value: object) -> bool:
    return isinstance(value, type) and hasattr(value, "__temporal_workflow_definition")


def _plugins(encrypt: bool | None) -> list[Any]:
    """The workers' converter: Strands' (conversations' payloads), External Storage (a
    history's large payloads are references, read from the store), with keys the seal."""
    from temporalio.strands_agents import StrandsPlugin

    from durable_plan.cli.commands.server import keyring
    from durable_plan.protect.payload_storage import with_payload_storage

    plugins: list[Any] = with_payload_storage([StrandsPlugin(models={})])
    keys = keyring(encrypt)
    if keys is not None:
        from durable_plan.protect.encryption import EncryptionPlugin

        plugins.append(EncryptionPlugin(keys))
    return plugins


def _paths(args: argparse.Namespace) -> str:
    return ", ".join(repr(str(p)) for p in args.paths)
