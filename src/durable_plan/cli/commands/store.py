"""`durable-plan sweep-store`: the retention sweep for results kept by reference.

A plan deletes what it stored when it closes; objects survive only when a plan asked to keep
them (``keep_stored_results``) or its workflow was terminated (no code runs then). Run this
from cron or a CI job against the store the workers use.

Age alone is not enough: a plan may wait a week for an approval, its results still in use.
So the sweep first asks the Temporal server which workflows are running (one visibility
query) and keeps every object of a plan that is; with no server it refuses, unless told
``--no-running-check``. Plans start while it walks, so each plan's objects are checked again
right before they go (`running_plans`, and the stores' sweeps read each object's age again).
``--dry-run`` lists what would go and deletes nothing. One sweep of a directory runs at a
time (a second says so and stops); any error, the server's included, is one line.
"""

from __future__ import annotations

import argparse
import asyncio
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from durable_plan.cli.commands import (
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    EXIT_NO_SERVER,
    EXIT_OK,
    CommandError,
)
from durable_plan.protect.result_store import (
    STORE_ENV,
    FileResultStore,
    S3ResultStore,
    store_from_env,
)
from durable_plan.protect.sweep_files import IsRunning, SweepRunning

if TYPE_CHECKING:
    from temporalio.client import Client

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


RECHECK_TIMEOUT_S = 30.0
"""The longest one owner's fresh check may take before the sweep stops (deleting nothing
more)."""


async def running_plans(args: argparse.Namespace) -> IsRunning:
    """Whether a plan run is still running: ``(workflow id, chain) -> bool``, for a sweep
    that runs in a thread (``asyncio.to_thread``) while this loop serves the questions.

    One visibility query lists the running workflows first; a plan not on that list is asked
    about again (one describe) when the sweep is about to delete its objects, because plans
    start while the sweep walks: a plan started again with the same id and input reuses its
    stored input, and the list, taken before, does not know it runs."""
    from durable_plan.cli.commands.server import connect

    client = await connect(args.address, args.namespace, encrypt=False)
    running: set[tuple[str, str]] = set()
    ids: set[str] = set()
    async for execution in client.list_workflows('ExecutionStatus="Running"'):
        ids.add(execution.id)
        first = execution.raw_info.first_run_id or execution.run_id
        running.add((execution.id, first))
    loop = asyncio.get_running_loop()

    def is_running(workflow_id: str, chain: str | None) -> bool:
        if (workflow_id in ids) if chain is None else ((workflow_id, chain) in running):
            return True
        now = asyncio.run_coroutine_threadsafe(running_now(client, workflow_id, chain), loop)
        try:
            return now.result(RECHECK_TIMEOUT_S)
        except TimeoutError:
            now.cancel()
            raise TimeoutError(
                f"the server did not say within {RECHECK_TIMEOUT_S:g} s whether workflow "
                f"{workflow_id!r} is running"
            ) from None

    return is_running


async def running_now(client: Client, workflow_id: str, chain: str | None) -> bool:
    """The server's answer now: is the workflow's latest run running (and, with ``chain``,
    one of that chain)? An unknown workflow is not running."""
    from temporalio.client import WorkflowExecutionStatus
    from temporalio.service import RPCError, RPCStatusCode

    try:
        description = await client.get_workflow_handle(workflow_id).describe()
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            return False
        raise
    if description.status != WorkflowExecutionStatus.RUNNING:
        return False
    if chain is None:
        return True
    info = description.raw_description.workflow_execution_info
    first: str = info.first_run_id or description.run_id
    return first == chain


def sweep_store(args: argparse.Namespace) -> int:
    """Delete stored results older than ``--older-than`` whose plan is not running, and say
    how many and where (asking the server leaves through ``client_command``: the Temporal
    client's runtime can abort the interpreter while it finalizes). ``--dry-run``: say what
    would go, one line each, and delete nothing."""
    parse_duration(args.older_than)  # bad input is refused before anything is asked
    if args.no_running_check:
        return _sweep(args, None)
    from durable_plan.cli.commands.server import client_command

    async def checked() -> int:
        # In a thread: the sweep's fresh checks are answered by this loop meanwhile.
        return await asyncio.to_thread(_sweep, args, await running_plans(args))

    client_command(checked())


def _sweep(args: argparse.Namespace, is_running: IsRunning | None) -> int:
    older_than = parse_duration(args.older_than)
    dry_run = bool(getattr(args, "dry_run", False))
    try:
        store = store_from_env(args.store)
    except ValueError as exc:
        raise CommandError(EXIT_BAD_INPUT, f"sweep-store: {exc}") from None
    if not isinstance(store, FileResultStore | S3ResultStore):
        raise CommandError(EXIT_BAD_INPUT, f"sweep-store: {store!r} has no retention sweep")
    deleted = _swept(
        repr(store),
        lambda: store.sweep(
            older_than_s=older_than,
            is_running=is_running,
            dry_run=dry_run,
            report=_would_delete if dry_run else None,
        ),
    )
    _say(args, f"{deleted} stored result(s)", repr(store), "plans", is_running, dry_run)
    _sweep_payloads(args, older_than, is_running, dry_run)
    return EXIT_OK


DRY_RUN_NOTE = " (dry run: nothing deleted)"
T = TypeVar("T")


def _swept(where: str, sweep: Callable[[], T]) -> T:
    """``sweep()``, its failure one line naming the error: the store's own (S3 credentials,
    permissions, a file system's), the server's while a plan's owner is asked again (an
    ``RPCError``, a timeout: nothing more is deleted then), another sweep running."""
    from temporalio.service import RPCError

    try:
        return sweep()
    except SweepRunning as exc:
        raise CommandError(EXIT_FAILED, f"sweep-store: {exc}") from None
    except (RPCError, TimeoutError) as exc:
        raise CommandError(
            EXIT_NO_SERVER,
            f"sweep-store: {where} could not be swept (stopped, deleting nothing more): "
            f"{_error_text(exc)}; check the server at --address, then run it again",
        ) from None
    except Exception as exc:
        raise CommandError(
            EXIT_BAD_INPUT, f"sweep-store: {where} could not be swept: {_error_text(exc)}"
        ) from None


def _error_text(exc: BaseException) -> str:
    """``TypeName: message``; the type alone when the message is empty (a bare timeout)."""
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _say(
    args: argparse.Namespace,
    what: str,
    where: str,
    owners: str,
    is_running: IsRunning | None,
    dry_run: bool,
) -> None:
    kept = "" if is_running is None else f", keeping those of running {owners}"
    verb = "would delete" if dry_run else "deleted"
    print(
        f"{verb} {what} older than {args.older_than} from {where}{kept}"
        f"{DRY_RUN_NOTE if dry_run else ''}",
        flush=True,
    )


def _would_delete(where: str) -> None:
    print(f"would delete {where}", flush=True)


def _sweep_payloads(
    args: argparse.Namespace, older_than: float, is_running: IsRunning | None, dry_run: bool
) -> None:
    """External Storage's payloads under the same store: a directory is swept here (keeping
    running workflows'); in S3 a lifecycle rule on the prefix expires them (README)."""
    from durable_plan.protect.payload_file_driver import FileStorageDriver
    from durable_plan.protect.payload_storage import storage_driver

    driver = storage_driver(args.store)
    if not isinstance(driver, FileStorageDriver):
        return

    running = None
    if is_running is not None:
        check = is_running

        def running(workflow_id: str) -> bool:
            return check(workflow_id, None)

    deleted = _swept(
        str(driver.root),
        lambda: driver.sweep(
            older_than,
            running,
            namespace=args.namespace,
            dry_run=dry_run,
            report=_would_delete if dry_run else None,
        ),
    )
    _say(
        args,
        f"{len(deleted)} stored payload(s)",
        str(driver.root),
        "workflows",
        is_running,
        dry_run,
    )


__all__ = ["STORE_ENV", "parse_duration", "sweep_store"]
