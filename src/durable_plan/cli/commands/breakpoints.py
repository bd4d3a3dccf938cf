"""`durable-plan continue|skip|abort WORKFLOW [PATH]`: answer a call paused at a breakpoint.

``answer_breakpoint`` is the one way to answer (the browser console calls it too): the plan
must be running and a worker must answer (an update waits for one without end), then
``PlanHandle.answer`` sends the answer to the workflow that holds the call, found from its
path (``temporal/client/pause_controls.py``). Without a PATH the one paused call is
answered; with several paused, the command lists them and answers none.
"""

from __future__ import annotations

import argparse
import sys

from temporalio.client import Client

from durable_plan.cli.commands import EXIT_FAILED, EXIT_OK
from durable_plan.cli.commands.server import client_command, connect, plan_handle


class BreakpointRefused(Exception):
    """An answer not taken: the message says why (not running, nothing paused there...)."""


def continue_(args: argparse.Namespace) -> int:
    client_command(_answer(args, "continue"))


def skip(args: argparse.Namespace) -> int:
    client_command(_answer(args, "skip"))


def abort(args: argparse.Namespace) -> int:
    client_command(_answer(args, "abort"))


async def _answer(args: argparse.Namespace, action: str) -> int:
    client = await connect(args.address, args.namespace, encrypt=args.encrypt)
    try:
        path, said = await answer_breakpoint(
            client, args.workflow_id, args.path, action, address=args.address
        )
    except BreakpointRefused as err:
        print(f"durable-plan: refused: {err}", file=sys.stderr)
        return EXIT_FAILED
    print(f"{path}: {said}" + (" (the plan is cancelled)" if action == "abort" else ""))
    return EXIT_OK


async def answer_breakpoint(
    client: Client, workflow_id: str, path: str | None, action: str, *, address: str = ""
) -> tuple[str, str]:
    """(the path answered, the action taken) for the call paused at ``path`` of plan
    ``workflow_id`` (None: the one paused call); ``BreakpointRefused`` otherwise,
    ``CommandError`` for an unknown workflow."""
    from temporalio.client import WorkflowExecutionStatus
    from temporalio.service import RPCError

    from durable_plan.cli.commands.ledger import QUERY_TIMEOUT, no_worker_answered

    handle, description = await plan_handle(client, workflow_id, address)
    if description.status != WorkflowExecutionStatus.RUNNING:
        status = description.status.name.lower() if description.status else "ended"
        raise BreakpointRefused(f"plan {workflow_id} is {status}; no call is paused")
    try:  # an update waits for a worker without end: ask one first, briefly
        await handle.handle.query("progress", rpc_timeout=QUERY_TIMEOUT)
        if path is None:
            paused = [p["path"] for p in await handle.paused()]
            if len(paused) != 1:
                listed = ", ".join(paused) or "none"
                raise BreakpointRefused(
                    f"plan {workflow_id}: name the call to answer (paused: {listed})"
                )
            path = paused[0]
    except RPCError:
        late = no_worker_answered(description).replace("for its ledger", "to take an answer")
        raise BreakpointRefused(f"plan {workflow_id}: {late}") from None
    try:
        return path, await handle.answer(path, action)
    except ValueError as err:
        raise BreakpointRefused(str(err)) from None


def paused_lines(paused: list[dict[str, object]], workflow_id: str) -> list[str]:
    """What `show` prints for the calls paused now: one line each, and how to answer."""
    lines = []
    for pause in paused:
        lines.append(f"paused at {pause['path']} (tool {pause.get('tool')})")
        lines.append(
            f"    answer: durable-plan continue {workflow_id} {pause['path']}   (or skip, abort)"
        )
    return lines
