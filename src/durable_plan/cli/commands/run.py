"""`durable-plan run`: a plan file, checked with its inputs, then run with a live ledger.

In-process (``--local``) the plan runs on ``run_checked``; otherwise on a Temporal
server (``--address``, or an embedded dev server started for the run) with a
worker for the tools module in this process unless ``--no-worker``. Either way
the same table shows progress on a terminal (stderr) and the ``PlanResult`` is
printed as JSON on stdout, so ``durable-plan run ... | jq`` works in CI (that display:
``run_display.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import re
import uuid
from collections.abc import AsyncIterator, Awaitable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from durable_plan.check.plan_file.checking import check_plan_file
from durable_plan.check.plan_file.inputs import parse_input_args, resolve_inputs
from durable_plan.check.plan_file.reading import load_plan_file
from durable_plan.check.plan_file.records import FileProblem, PlanFile, PlanFileError
from durable_plan.cli.commands import (
    DEFAULT_TASK_QUEUE,
    EXIT_BAD_INPUT,
    EXIT_NO_SERVER,
    CommandError,
)
from durable_plan.cli.commands.files import _lines
from durable_plan.cli.commands.ledger import QUERY_TIMEOUT, approval_hint
from durable_plan.cli.commands.run_display import Display
from durable_plan.cli.commands.server import client_command, connect
from durable_plan.cli.progress_view import (
    lines_from_run,
)
from durable_plan.server.activity_logs import one_line_activity_failures

if TYPE_CHECKING:
    from temporalio.client import Client

    from durable_plan.check import CheckedPlan
    from durable_plan.run.engine import PlanRun
    from durable_plan.tools.registry import ToolRegistry


@dataclass
class Prepared:
    """Everything checked before anything runs."""

    pf: PlanFile
    checked: CheckedPlan
    registry: ToolRegistry
    inputs: dict[str, Any]


def run(args: argparse.Namespace) -> int:
    prepared = prepare(args)
    if args.local:
        return asyncio.run(_run_local(prepared, args))
    # The worker in this process: the table (and, at the end, one line per failed step)
    # reports each step's attempts, so the SDK's per-attempt tracebacks are dropped.
    one_line_activity_failures(drop_plan_steps=True, prefix="worker: ")
    client_command(_run_durable(prepared, args))


def prepare(args: argparse.Namespace) -> Prepared:
    """The plan file, the tools and the inputs, all checked: bad input exits 2, runs nothing."""
    from durable_plan.cli.tools_module import ToolsModuleError, load_tools

    try:
        pf = load_plan_file(args.file)
    except PlanFileError as exc:
        raise CommandError(EXIT_BAD_INPUT, _lines(exc)) from None
    if not args.tools:
        raise CommandError(
            EXIT_BAD_INPUT,
            "run needs --tools MODULE: the module whose `registry` holds the plan's tools "
            "(e.g. --tools examples.plan_tools)",
        )
    try:
        registry = load_tools(args.tools)
        if args.plans:  # a copy: the module's registry stays as its module made it
            registry = registry.with_tools([])
        for directory in args.plans:  # saved plans, after the tools they call
            registry.add_plans(directory)
    except PlanFileError as exc:
        raise CommandError(EXIT_BAD_INPUT, _lines(exc)) from None
    except (ToolsModuleError, ValueError) as exc:
        raise CommandError(EXIT_BAD_INPUT, str(exc)) from None
    durable = not args.local
    _check_breakpoints(getattr(args, "breakpoints", None) or [], durable)
    catalog = registry.catalog(durable=durable)
    # Every problem at once: the plan's and the inputs' (a missing input was reported only
    # after a plan problem was fixed, and a plan problem that --local alone causes hid it).
    problems: list[FileProblem] = []
    inputs: dict[str, Any] = {}
    try:
        check_plan_file(pf, catalog=catalog, durable=durable)
    except PlanFileError as exc:
        problems.extend(exc.problems)
    if not pf.problems:  # the file's own (an unusable inputs schema) say it once already
        try:
            inputs = resolve_inputs(pf, parse_input_args(pf, args.inputs))
        except PlanFileError as exc:
            problems.extend(exc.problems)
    try:
        if problems:
            raise PlanFileError(problems)
        checked = check_plan_file(pf, catalog=catalog, inputs=inputs, durable=durable)
    except PlanFileError as exc:
        text = _lines(exc)
        if args.local and any(p.code == "not_plannable" for p in exc.problems):
            text += " (in-process nobody can approve a step: run it without --local)"
        raise CommandError(EXIT_BAD_INPUT, text) from None
    return Prepared(pf, checked, registry, inputs)


def _check_breakpoints(patterns: list[str], durable: bool) -> None:
    """``--break`` patterns, checked before anything runs (a typo would never pause)."""
    from durable_plan.language.step_path import StepPathError
    from durable_plan.run.breakpoints import Breakpoints

    try:
        Breakpoints.of(patterns)
    except StepPathError as exc:
        raise CommandError(EXIT_BAD_INPUT, f"--break: {exc}") from None
    if patterns and not durable:
        raise CommandError(
            EXIT_BAD_INPUT,
            "--break needs a server (answer with `durable-plan continue|skip|abort`); "
            "in-process, pass execute_plan(breakpoints=..., on_pause=...) from Python",
        )


# --- in-process -----------------------------------------------------------------------------


async def _run_local(prepared: Prepared, args: argparse.Namespace) -> int:
    from durable_plan.local.agents import agent_steps
    from durable_plan.local.runner import run_checked

    registry = prepared.registry
    invoker = agent_steps(registry.invoke, registry, registry.catalog().plannable)
    runs: list[PlanRun] = []
    work = run_checked(
        prepared.checked, invoker, tool_timeouts=registry.timeouts(), on_start=runs.append
    )
    display = Display(prepared.pf, args.quiet, None)
    result = await display.follow(work, lambda: _local_lines(runs))
    return display.finish(result)


async def _local_lines(runs: list[PlanRun]) -> list[dict[str, Any]] | None:
    return lines_from_run(runs[0]) if runs else None


# --- on a Temporal server -------------------------------------------------------------------


async def _run_durable(prepared: Prepared, args: argparse.Namespace) -> int:
    from durable_plan.temporal.client.start import PlanFailed, start_plan

    async with _server(args) as server:
        address = server.address
        client = await connect(
            address, args.namespace, encrypt=args.encrypt, payload_storage=server.own or None
        )
        queue = args.task_queue or (
            DEFAULT_TASK_QUEUE if args.no_worker else f"durable-plan-run-{uuid.uuid4().hex[:12]}"
        )
        workflow_id = args.workflow_id or f"plan-{_slug(prepared.pf.title)}-{uuid.uuid4().hex[:8]}"
        async with _worker(client, queue, prepared.registry, args.no_worker):
            handle = await _start(
                start_plan(
                    client,
                    prepared.pf.plan,
                    task_queue=queue,
                    registry=prepared.registry,
                    workflow_id=workflow_id,
                    inputs=prepared.inputs,
                    breakpoints=list(getattr(args, "breakpoints", None) or []),
                    # The header says in words when no worker polls (below), not a warning
                    # with this file's name, line and source.
                    if_no_worker="ignore",
                ),
                workflow_id,
            )
            hint = approval_hint(workflow_id, address, args.namespace)
            display = Display(prepared.pf, args.quiet, hint)
            display.note(f"plan {workflow_id} {server.described}, task queue {queue}")
            if getattr(args, "breakpoints", None):
                display.note(
                    f"breakpoints {', '.join(args.breakpoints)}: answer a paused call with "
                    f"durable-plan continue|skip|abort {workflow_id} PATH --address {address}"
                )
            if args.no_worker and not await _has_pollers(client, queue):
                display.note(
                    f"no worker polls task queue {queue!r} yet; start one: durable-plan worker "
                    f"--tools {args.tools} --task-queue {queue} --address {address}"
                )

            async def lines() -> list[dict[str, Any]] | None:
                try:
                    return list(await handle.progress(rpc_timeout=QUERY_TIMEOUT))
                except Exception:
                    return None  # not started yet, or a query that timed out: try again

            try:
                result = await display.follow(handle.result(), lines, handle.events())
            except PlanFailed as exc:
                return display.failed(str(exc), await lines())
    return display.finish(result)


@dataclass
class Server:
    """Where the plan runs, and the words that say so in the header."""

    address: str
    described: str
    own: bool = False
    """Started for this run: no process but this one reaches it, so External Storage is on
    (this process's worker reads what its client stores), whatever the environment says."""


@contextlib.asynccontextmanager
async def _server(args: argparse.Namespace) -> AsyncIterator[Server]:
    """One rule with every other command: the server given (``--address`` or
    ``$TEMPORAL_ADDRESS``), else the dev server at 127.0.0.1:7233 when one answers there
    (``durable-plan dev``: where ``worker``, ``show`` and ``approve`` look too), else a dev
    server started for this run and stopped with it. ``--embedded`` always starts one;
    ``--no-worker`` never does (no other worker could reach it)."""
    from durable_plan.server.connection import DEFAULT_ADDRESS

    if args.address:
        yield Server(args.address, f"on {args.address}")
        return
    if not args.embedded and await _answers(DEFAULT_ADDRESS):
        yield Server(DEFAULT_ADDRESS, f"on the dev server already running at {DEFAULT_ADDRESS}")
        return
    if args.no_worker:
        raise CommandError(
            EXIT_NO_SERVER,
            f"--no-worker runs the plan on a server that a `durable-plan worker` reaches, and "
            f"no Temporal server answers at {DEFAULT_ADDRESS}: start one with `durable-plan "
            "dev`, or pass --address HOST:PORT",
        )
    from durable_plan.server.devserver import DevServer, DevServerError, DevServerNotFound

    try:
        server = DevServer(headless=True, namespace=args.namespace, temporal_cli=args.temporal_cli)
        await server.start_async()
    except DevServerNotFound as exc:
        raise CommandError(EXIT_NO_SERVER, str(exc)) from None
    except DevServerError as exc:
        first = str(exc).splitlines()[0]
        raise CommandError(
            EXIT_NO_SERVER, f"the embedded dev server did not start: {first}"
        ) from None
    try:
        yield Server(
            server.target,
            f"on a dev server started for this run at {server.target} (it stops when the run "
            "ends; `durable-plan dev` keeps one up)",
            own=True,
        )
    finally:
        server.stop()  # before the process leaves with os._exit, which skips atexit


ANSWER_S = 0.5


async def _answers(address: str) -> bool:
    """Something accepts connections at ``address`` (a server that is not Temporal then
    fails the connect with its own one-line message)."""
    host, _, port = address.rpartition(":")
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, int(port)), ANSWER_S)
    except (OSError, TimeoutError, ValueError):
        return False
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return True


@contextlib.asynccontextmanager
async def _worker(
    client: Client, queue: str, registry: ToolRegistry, no_worker: bool
) -> AsyncIterator[None]:
    if no_worker:
        yield
        return
    from durable_plan.temporal.worker.helpers import plan_worker, tool_worker

    async with contextlib.AsyncExitStack() as workers:
        await workers.enter_async_context(plan_worker(client, task_queue=queue, registry=registry))
        # This process has the code of the tools routed elsewhere: it serves their queues too.
        for tool_queue in registry.task_queues():
            if registry.routed_to(tool_queue):
                await workers.enter_async_context(
                    tool_worker(client, task_queue=tool_queue, registry=registry)
                )
        yield


async def _start(starting: Awaitable[Any], workflow_id: str) -> Any:
    from temporalio.exceptions import WorkflowAlreadyStartedError

    try:
        return await starting
    except WorkflowAlreadyStartedError:
        raise CommandError(
            EXIT_BAD_INPUT,
            f"a workflow with id {workflow_id!r} is already running; pick another --workflow-id",
        ) from None


async def _has_pollers(client: Client, queue: str) -> bool:
    from temporalio.api.enums.v1 import TaskQueueType
    from temporalio.api.taskqueue.v1 import TaskQueue
    from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest

    response = await client.workflow_service.describe_task_queue(
        DescribeTaskQueueRequest(
            namespace=client.namespace,
            task_queue=TaskQueue(name=queue),
            task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
        )
    )
    return bool(response.pollers)


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:40] or "plan"
