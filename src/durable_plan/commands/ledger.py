"""`durable-plan show` and `durable-plan approve`: a plan workflow on a server, from a shell."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import shlex
import sys
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from durable_plan.commands import EXIT_FAILED, EXIT_OK
from durable_plan.commands.server import client_command, connect, plan_handle
from durable_plan.progress_view import (
    ApprovalHint,
    LiveView,
    console_for,
    lines_from_result,
    renderable,
)

if TYPE_CHECKING:
    from temporalio.client import WorkflowExecutionDescription

    from durable_plan.temporal.client import PlanHandle

WATCH_INTERVAL_S = 0.5
QUERY_TIMEOUT = timedelta(seconds=5)


def approval_hint(workflow_id: str, address: str, namespace: str) -> ApprovalHint:
    """The command that answers a step's approval gate, ready to paste."""

    def hint(step_id: str, digest: str | None) -> str:
        words = ["durable-plan", "approve", workflow_id, step_id]
        if digest:
            words += ["--digest", digest]
        words += ["--address", address]
        if namespace != "default":
            words += ["--namespace", namespace]
        return f"{shlex.join(words)}   (or --reject --reason TEXT)"

    return hint


# --- show -----------------------------------------------------------------------------------


def show(args: argparse.Namespace) -> int:
    client_command(_show(args))


async def _show(args: argparse.Namespace) -> int:
    client = await connect(args.address, args.namespace, encrypt=args.encrypt)
    handle, description = await plan_handle(client, args.workflow_id, args.address)
    hint = approval_hint(args.workflow_id, args.address, args.namespace)
    console = console_for(sys.stdout)
    if args.watch and _running(description) and not args.json:
        view = LiveView(console, title=f"plan {args.workflow_id}", hint=hint, appear_after=0)
        waiting = asyncio.ensure_future(_wait(handle))
        while not waiting.done():
            # A plan that ends while it is queried can take its worker with it (a `run`
            # that served it exits): the query fails, and the next turn sees the end.
            with contextlib.suppress(Exception):
                view.update(await handle.progress())
            await asyncio.wait([waiting], timeout=WATCH_INTERVAL_S)
        view.close()
        description = await handle.handle.describe()
    elif args.watch:
        await _wait(handle)
        description = await handle.handle.describe()
    status, lines, failure = await ledger(handle, description)
    if args.json:
        print(json.dumps(lines, indent=2))
    else:
        print(f"plan {args.workflow_id}: {status}" + (f": {failure}" if failure else ""))
        if lines is not None:
            console.print(renderable(lines, hint=hint))
    if not args.watch:
        return EXIT_OK
    return EXIT_OK if status == "completed" and _clean(lines) else EXIT_FAILED


async def _wait(handle: PlanHandle) -> None:
    try:
        await handle.handle.result()
    except Exception:
        return  # the plan failed or was cancelled: `ledger` says how


def _running(description: WorkflowExecutionDescription) -> bool:
    from temporalio.client import WorkflowExecutionStatus

    return description.status == WorkflowExecutionStatus.RUNNING


def _clean(lines: list[dict[str, Any]] | None) -> bool:
    return lines is not None and all(line["phase"] in ("ok", "not_taken") for line in lines)


async def ledger(
    handle: PlanHandle, description: WorkflowExecutionDescription
) -> tuple[str, list[dict[str, Any]] | None, str | None]:
    """(status, ledger lines or None, failure message) of a plan workflow in any state.

    A running plan answers the ``progress`` query; a completed one has its ledger in
    its result (no worker needed); for one that failed, was cancelled or terminated,
    the query replays its history on a worker, if one polls its task queue.
    """
    from durable_plan.temporal.client import PlanFailed

    status = description.status.name.lower() if description.status else "unknown"
    if _running(description):
        return status, await handle.progress(), None
    failure: str | None = None
    try:
        return status, lines_from_result(await handle.result()), None
    except PlanFailed as exc:
        failure = str(exc)
    except Exception as exc:  # cancelled, terminated, timed out
        _refuse_without_keys(exc)
        failure = f"{type(exc).__name__}: {exc}"
    try:
        lines: list[dict[str, Any]] = await handle.handle.query(
            "progress", rpc_timeout=QUERY_TIMEOUT
        )
    except Exception:
        return status, None, f"{failure} (no worker answered for its ledger)"
    return status, lines, failure


def _refuse_without_keys(exc: Exception) -> None:
    """A result this process cannot open (encrypted history, no or wrong keys): exit 2."""
    from durable_plan.commands import EXIT_BAD_INPUT, CommandError
    from durable_plan.encryption import missing_keys_message

    message = missing_keys_message(exc)
    if message is not None:
        raise CommandError(EXIT_BAD_INPUT, message) from None


# --- approve --------------------------------------------------------------------------------


def approve(args: argparse.Namespace) -> int:
    client_command(_approve(args))


async def _approve(args: argparse.Namespace) -> int:
    client = await connect(args.address, args.namespace, encrypt=args.encrypt)
    handle, description = await plan_handle(client, args.workflow_id, args.address)
    if not _running(description):
        status = description.status.name.lower() if description.status else "ended"
        print(
            f"durable-plan: refused: plan {args.workflow_id} is {status}; no step awaits approval",
            file=sys.stderr,
        )
        return EXIT_FAILED
    try:
        taken = await handle.decide(
            args.step_id, not args.reject, args.reason, args_digest=args.digest
        )
    except ValueError as err:
        print(f"durable-plan: refused: {err}", file=sys.stderr)
        return EXIT_FAILED
    print(f"{args.step_id}: {taken}")
    return EXIT_OK
