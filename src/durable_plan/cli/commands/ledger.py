"""`durable-plan show` and `durable-plan approve`: a plan workflow on a server, from a shell."""

from __future__ import annotations

import argparse
import asyncio
import json
import shlex
import sys
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from durable_plan.cli.commands import EXIT_FAILED, EXIT_OK
from durable_plan.cli.commands.server import client_command, connect, is_agent_step, plan_handle
from durable_plan.cli.event_watch import Watch, follow_events
from durable_plan.cli.progress_view import (
    ApprovalHint,
    LiveView,
    console_for,
    lines_from_result,
    print_ledger,
)

if TYPE_CHECKING:
    from temporalio.client import Client, WorkflowExecutionDescription

    from durable_plan.temporal.client.start import PlanHandle

WATCH_INTERVAL_S = 0.5
QUERY_TIMEOUT = timedelta(seconds=5)


def approval_hint(workflow_id: str, address: str, namespace: str) -> ApprovalHint:
    """The command that answers a step's approval gate, ready to paste; for a tool call
    inside an agent step, the command that answers it on the step's child workflow."""
    from durable_plan.temporal.wire.ids import child_workflow_id

    def hint(step_id: str, digest: str | None, *, agent_step: str | None = None) -> str:
        target = (
            workflow_id
            if agent_step is None
            else child_workflow_id(workflow_id, "agent", agent_step)
        )
        words = ["durable-plan", "approve", target, step_id]
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
    if is_agent_step(description):
        return await _show_agent_step(args, handle, description)
    hint = approval_hint(args.workflow_id, args.address, args.namespace)
    console = console_for(sys.stdout)
    if args.watch and _running(description) and not args.json:
        view = LiveView(console, title=f"plan {args.workflow_id}", hint=hint, appear_after=0)
        waiting = asyncio.ensure_future(_wait(handle))

        async def query() -> list[dict[str, Any]] | None:
            try:
                return await handle.progress(rpc_timeout=QUERY_TIMEOUT)
            except Exception:
                return None

        # The table starts from the ledger so far, then the stream from its next event.
        first = await query()
        if first is not None:
            view.update(first)
        watch = Watch()
        watcher = asyncio.ensure_future(follow_events(handle.events(), query, view.update, watch))
        while not waiting.done():
            await asyncio.wait([waiting], timeout=WATCH_INTERVAL_S)
            failed = watcher.done() and watcher.exception() is not None
            if (failed or watch.quiet()) and not waiting.done():
                # No stream (a worker from before streams): poll. No worker answers now,
                # or a plan that ends while it is queried took its worker with it (a `run`
                # that served it exits): keep the last view; the next turn sees the end.
                lines = await query()
                if lines is not None:
                    view.update(lines)
        if not watcher.done():  # its next read has plan_finished (see `run`)
            await asyncio.wait([watcher], timeout=2.0)
        if not watcher.done():
            watcher.cancel()
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
            print_ledger(console, lines, hint=hint)
            for text in await paused_now(handle, lines, args.workflow_id):
                print(text)
    if not args.watch:
        return EXIT_OK
    return EXIT_OK if status == "completed" and _clean(lines) else EXIT_FAILED


async def paused_now(
    handle: PlanHandle, lines: list[dict[str, Any]], workflow_id: str
) -> list[str]:
    """``paused at <path>`` for each call paused now (none asked of a plan that has no
    running step), with the command that answers it (``commands.breakpoints``)."""
    from durable_plan.cli.commands.breakpoints import paused_lines

    if not any(line["phase"] in ("paused", "running") for line in lines):
        return []
    try:
        return paused_lines(await handle.paused(), workflow_id)
    except Exception:  # a worker from before breakpoints, or none answers: the table said it
        return []


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
    from temporalio.service import RPCError

    from durable_plan.temporal.client.start import PlanFailed

    status = description.status.name.lower() if description.status else "unknown"
    if _running(description):
        try:
            return status, await handle.progress(rpc_timeout=QUERY_TIMEOUT), None
        except RPCError:
            return status, None, no_worker_answered(description)
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


async def _show_agent_step(
    args: argparse.Namespace, handle: PlanHandle, description: WorkflowExecutionDescription
) -> int:
    """An agent step's child workflow: its round, the tools it called, and the tool calls
    awaiting a person (each decided here, on the child, with `approve CHILD CALL_ID`)."""
    if args.watch:
        await _wait(handle)
        description = await handle.handle.describe()
    state = await agent_step_state(handle, description)
    if args.json:
        print(json.dumps(state, indent=2))
    else:
        for text in agent_step_lines(args.workflow_id, state, args.address, args.namespace):
            print(text)
    if not args.watch:
        return EXIT_OK
    return EXIT_OK if state["status"] == "completed" else EXIT_FAILED


async def agent_step_state(
    handle: PlanHandle, description: WorkflowExecutionDescription
) -> dict[str, Any]:
    """``status`` and, running, the ``progress`` query's round, tools called and calls
    awaiting approval; ended, its result or its failure (no worker needed for either)."""
    from temporalio.service import RPCError

    from durable_plan.temporal.wire.messages import failure_message

    status = description.status.name.lower() if description.status else "unknown"
    if _running(description):
        try:
            progress: dict[str, Any] = await handle.handle.query(
                "progress", rpc_timeout=QUERY_TIMEOUT
            )
        except RPCError:
            return {"status": status, "error": no_worker_answered(description)}
        return {"status": status, **progress}
    try:
        result = await handle.handle.result()
    except Exception as exc:  # failed, cancelled, terminated, timed out
        _refuse_without_keys(exc)
        return {"status": status, "error": failure_message(exc)}
    return {"status": status, "result": result}


def agent_step_lines(
    workflow_id: str, state: dict[str, Any], address: str, namespace: str
) -> list[str]:
    """What `show` prints for an agent step's child workflow."""
    lines = [f"agent step {workflow_id}: {state['status']}"]
    if "round" in state:
        lines[0] += f", round {state['round']}"
    result = state.get("result")
    calls = state.get("tools_called")
    if calls is None and isinstance(result, dict):
        calls = result.get("tools_called")
    if calls:
        called = ", ".join(f"{c.get('tool')} (round {c.get('round')})" for c in calls)
        lines.append(f"tools called: {called}")
    else:
        lines.append("tools called: none yet" if "round" in state else "tools called: none")
    if isinstance(result, dict):
        lines.append(
            f"iterations: {result.get('iterations')}, final: "
            f"{json.dumps(result.get('final'))}, output: {json.dumps(result.get('output'))}"
        )
    if state.get("error"):
        lines.append(f"failed: {state['error']}")
    hint = approval_hint(workflow_id, address, namespace)
    for call in state.get("awaiting") or ():
        digest = call.get("args_digest")
        lines.append(f"tool call {call['id']} awaits approval:")
        lines.append(f"    arguments: {json.dumps(call.get('args'), sort_keys=True)}")
        lines.append(f"    digest:    {digest}")
        lines.append(f"    answer:    {hint(call['id'], digest)}")
    return lines


def no_worker_answered(description: WorkflowExecutionDescription) -> str:
    """Why a running workflow's ledger is unknown: a query needs a worker, and none
    answered (the server would have waited about 40 s, then printed a traceback)."""
    seconds = QUERY_TIMEOUT.total_seconds()
    return (
        f"no worker answered for its ledger within {seconds:g} s; start one polling task "
        f"queue {description.task_queue!r} (durable-plan worker --tools MODULE --task-queue "
        f"{description.task_queue})"
    )


def _refuse_without_keys(exc: Exception) -> None:
    """A result this process cannot open (encrypted history, no or wrong keys): exit 2."""
    from durable_plan.cli.commands import EXIT_BAD_INPUT, CommandError
    from durable_plan.protect.encryption import missing_keys_message

    message = missing_keys_message(exc)
    if message is not None:
        raise CommandError(EXIT_BAD_INPUT, message) from None


# --- approve --------------------------------------------------------------------------------


def approve(args: argparse.Namespace) -> int:
    client_command(_approve(args))


async def _approve(args: argparse.Namespace) -> int:
    client = await connect(args.address, args.namespace, encrypt=args.encrypt)
    try:
        taken = await take_decision(
            client,
            args.workflow_id,
            args.step_id,
            approved=not args.reject,
            reason=args.reason,
            digest=args.digest,
            address=args.address,
        )
    except DecisionRefused as err:
        print(f"durable-plan: refused: {err}", file=sys.stderr)
        return EXIT_FAILED
    print(f"{args.step_id}: {taken}")
    return EXIT_OK


class DecisionRefused(Exception):
    """A decision the workflow did not take: it is not running, no worker answers, the
    step is not awaiting one, or the arguments' digest changed (the message says which)."""


async def take_decision(
    client: Client,
    workflow_id: str,
    step_id: str,
    *,
    approved: bool,
    reason: str = "",
    digest: str | None = None,
    address: str = "",
) -> str:
    """Approve or reject ``step_id`` of a plan, an agent step's child or a conversation's
    direct call: what `durable-plan approve` does, and what the browser console calls, so
    both take a decision the same way (a running workflow, a worker that answers first,
    then the ``decide_step`` update with the digest). ``DecisionRefused`` otherwise;
    ``CommandError`` for an unknown workflow."""
    from durable_plan.temporal.wire.messages import PLAN_WORKFLOW_NAME
    from durable_plan.temporal.workflows.direct_calls import DIRECT_CALLS_QUERY, DIRECT_PREFIX

    direct = step_id.startswith(DIRECT_PREFIX)  # a conversation's direct call
    handle, description = await plan_handle(client, workflow_id, address, any_workflow=direct)
    if is_agent_step(description):
        what, awaits, query = "agent step", "no tool call", "progress"
    elif description.workflow_type == PLAN_WORKFLOW_NAME:
        what, awaits, query = "plan", "no step", "progress"
    else:
        what, awaits, query = "conversation", "no direct call", DIRECT_CALLS_QUERY
    if not _running(description):
        status = description.status.name.lower() if description.status else "ended"
        raise DecisionRefused(f"{what} {workflow_id} is {status}; {awaits} awaits approval")
    from temporalio.service import RPCError

    try:  # an update waits for a worker without end: ask one first, briefly
        await handle.handle.query(query, rpc_timeout=QUERY_TIMEOUT)
    except RPCError:
        late = no_worker_answered(description).replace("for its ledger", "to take a decision")
        raise DecisionRefused(f"{what} {workflow_id}: {late}") from None
    try:
        return await handle.decide(step_id, approved, reason, args_digest=digest)
    except ValueError as err:
        raise DecisionRefused(str(err)) from None
