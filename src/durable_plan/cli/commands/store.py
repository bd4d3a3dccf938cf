"""`durable-plan sweep-store`: the retention sweep for results kept by reference.

A plan deletes what it stored when it closes; objects survive only when a plan asked to keep
them (``keep_stored_results``) or its workflow was terminated (no code runs then). Run this
from cron or a CI job against the store the workers use.

Age alone is not enough: a plan may wait a week for an approval, its results still in use.
So the sweep first asks the Temporal server which workflows are running (one visibility
query) and keeps every object of a plan that is; with no server it refuses, unless told
``--no-running-check``.
"""

from __future__ import annotations

import argparse
import re

from durable_plan.cli.commands import EXIT_BAD_INPUT, EXIT_OK, CommandError
from durable_plan.protect.result_store import (
    STORE_ENV,
    FileResultStore,
    IsRunning,
    S3ResultStore,
    store_from_env,
)

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$")
_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str) -> float:
    """``90``, ``90s``, ``15m``, ``12h``, ``7d`` as seconds."""
    match = _DURATION.match(text)
    if match is None:
        raise CommandError(
            EXIT_BAD_INPUT,
            f"sweep-store: --older-than {text!r} is not a duration; write e.g. 7d, 12h, 15m, 90s",
        )
    return float(match.group(1)) * _SECONDS[match.group(2)]


async def running_plans(args: argparse.Namespace) -> IsRunning:
    """Which plan runs the server says are running: ``(workflow id, chain) -> bool``."""
    from durable_plan.cli.commands.server import connect

    client = await connect(args.address, args.namespace, encrypt=False)
    running: set[tuple[str, str]] = set()
    ids: set[str] = set()
    async for execution in client.list_workflows('ExecutionStatus="Running"'):
        ids.add(execution.id)
        first = execution.raw_info.first_run_id or execution.run_id
        running.add((execution.id, first))

    def is_running(workflow_id: str, chain: str | None) -> bool:
        return workflow_id in ids if chain is None else (workflow_id, chain) in running

    return is_running


def sweep_store(args: argparse.Namespace) -> int:
    """Delete stored results older than ``--older-than`` whose plan is not running, and say
    how many and where (asking the server leaves through ``client_command``: the Temporal
    client's runtime can abort the interpreter while it finalizes)."""
    parse_duration(args.older_than)  # bad input is refused before anything is asked
    if args.no_running_check:
        return _sweep(args, None)
    from durable_plan.cli.commands.server import client_command

    async def checked() -> int:
        return _sweep(args, await running_plans(args))

    client_command(checked())


def _sweep(args: argparse.Namespace, is_running: IsRunning | None) -> int:
    older_than = parse_duration(args.older_than)
    try:
        store = store_from_env(args.store)
    except ValueError as exc:
        raise CommandError(EXIT_BAD_INPUT, f"sweep-store: {exc}") from None
    if not isinstance(store, FileResultStore | S3ResultStore):
        raise CommandError(EXIT_BAD_INPUT, f"sweep-store: {store!r} has no retention sweep")
    try:
        deleted = store.sweep(older_than_s=older_than, is_running=is_running)
    except Exception as exc:  # the store's own error (S3 credentials, permissions): one line
        raise CommandError(
            EXIT_BAD_INPUT, f"sweep-store: {store!r} could not be swept: {exc}"
        ) from None
    kept = "" if is_running is None else ", keeping those of running plans"
    print(f"deleted {deleted} stored result(s) older than {args.older_than} from {store!r}{kept}")
    _sweep_payloads(args, older_than, is_running)
    return EXIT_OK


def _sweep_payloads(
    args: argparse.Namespace, older_than: float, is_running: IsRunning | None
) -> None:
    """External Storage's payloads under the same store: a directory is swept here (keeping
    running workflows'); in S3 a lifecycle rule on the prefix expires them (README)."""
    from durable_plan.protect.payload_storage import FileStorageDriver, storage_driver

    driver = storage_driver(args.store)
    if not isinstance(driver, FileStorageDriver):
        return

    running = None
    if is_running is not None:
        check = is_running

        def running(workflow_id: str) -> bool:
            return check(workflow_id, None)

    deleted = driver.sweep(older_than, running, namespace=args.namespace)
    kept = "" if is_running is None else ", keeping those of running workflows"
    where = driver.root
    print(
        f"deleted {len(deleted)} stored payload(s) older than {args.older_than} from {where}{kept}"
    )


__all__ = ["STORE_ENV", "parse_duration", "sweep_store"]
