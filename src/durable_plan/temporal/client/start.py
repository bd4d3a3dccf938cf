"""Starting plans from outside a workflow: ``start_plan`` / ``run_plan``.

The plan is checked here first, so a bad plan fails in the caller and starts
no workflow. Results come back as the same ``PlanResult`` the in-process
runner returns.

A plan runs only where a worker (``plan_worker``) polls its task queue; without
one it waits, durably and silently. ``start_plan`` therefore asks the server
whether anything polls the queue and warns (or raises, or stays quiet: the
``if_no_worker`` option) instead of leaving the caller waiting without a word.
"""

from __future__ import annotations

import asyncio
import uuid
import warnings
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any, Literal

from temporalio.client import (
    Client,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowUpdateFailedError,
)
from temporalio.common import RawValue, TypedSearchAttributes
from temporalio.service import RPCError

from durable_plan.check import CheckedPlan, ToolCatalog, check_plan
from durable_plan.language.agent_step import AGENT_TOOL
from durable_plan.language.plan import DEFAULT_MAX_STEPS, Plan, PlanResult
from durable_plan.run.events import PlanEvent
from durable_plan.run.reuse import REMEMBERED_KEY
from durable_plan.temporal.client.pause_controls import PauseControls
from durable_plan.temporal.client.pollers import worker_seen
from durable_plan.temporal.client.status_attribute import client_sees_plan_status
from durable_plan.temporal.client.subscribe import POLL_COOLDOWN, plan_events
from durable_plan.temporal.wire.ids import child_workflow_id
from durable_plan.temporal.wire.messages import (
    PLAN_WORKFLOW_NAME,
    ApprovalDecision,
    failure_message,
    json_payload,
)
from durable_plan.temporal.wire.payload_limits import client_stores_payloads
from durable_plan.temporal.wire.plan_settings import DEFAULT_MAX_RESULT_BYTES, Models, PlanSettings
from durable_plan.temporal.wire.result_form import plan_result_of
from durable_plan.temporal.wire.workflow_inputs import PlanInput
from durable_plan.temporal.workflows.approvals import DECIDE_UPDATE
from durable_plan.temporal.workflows.failures import PlanFailed as PlanFailed
from durable_plan.temporal.workflows.plan_request import (
    checked_input as checked_input,  # re-exported
)
from durable_plan.temporal.workflows.plan_status import PLAN_STATUS, start_attributes
from durable_plan.temporal.workflows.ui_summary import plan_metadata
from durable_plan.tools.approval import ApprovalPolicy
from durable_plan.tools.registry import ToolOptions, ToolRegistry

NoWorker = Literal["warn", "raise", "ignore"]
"""What ``start_plan`` does when no worker polls the task queue (see ``start_plan``)."""


class NoWorkerError(RuntimeError):
    """No worker polls the task queue (``if_no_worker="raise"``); no workflow was started."""


class NoWorkerWarning(UserWarning):
    """No worker polls the task queue: the plan waits until one does (``if_no_worker="warn"``)."""


def no_worker_message(task_queue: str, address: str, fix: str | None = None) -> str:
    """One line: which queue has no worker, on which server, and how to start one."""
    fix = fix or (
        f"the plan waits until one does: run plan_worker(client, task_queue={task_queue!r}, "
        "registry=...) in a process that stays up"
    )
    return f"no worker polls task queue {task_queue!r} on {address}; {fix}"


def tool_queues(
    checked: CheckedPlan, tools: Mapping[str, ToolOptions], model_task_queue: str | None = None
) -> dict[str, list[str]]:
    """The task queues of their own that the plan's calls run on, with what waits there:
    the tools routed to each (plan steps, map and reduce bodies, and the tools an agent
    step may call, resolved as the workflow resolves them) and, when the plan has an agent
    step, its model calls' queue. What ``start_plan`` needs workers for, besides its own."""
    named, agent_tools = checked.tools_called(list(tools))
    queues: dict[str, list[str]] = {}
    for name in sorted({*named, *agent_tools}):
        queue = tools[name].task_queue
        if queue is not None:
            queues.setdefault(queue, []).append(name)
    if checked.has_agent_steps and model_task_queue:
        queues.setdefault(model_task_queue, []).append(MODEL_CALLS)
    return queues


MODEL_CALLS = "agent steps' model calls"


def _serve_fix(queue: str, names: list[str]) -> str:
    """How to start what waits on ``queue``: a model worker, or the tools' worker."""
    waiting = ", ".join(names)
    if names == [MODEL_CALLS]:
        return (
            f"{waiting} wait until one does: run model_worker(client, task_queue={queue!r}) "
            "on a client with StrandsPlugin(models=...)"
        )
    fix = (
        f"the steps of {waiting} wait until one does: run tool_worker(client, "
        f"task_queue={queue!r}, registry=...) (durable-plan worker --tools MODULE "
        f"--tools-only --task-queue {queue})"
    )
    if MODEL_CALLS in names:
        fix += f", and model_worker(client, task_queue={queue!r}) for the model calls"
    return fix


async def _unpolled_queues(
    client: Client, task_queue: str, checked: CheckedPlan, request: PlanInput
) -> list[str]:
    """One line per queue the plan needs that no worker polls (its own first): asked in
    parallel, each the courtesy ``worker_seen`` is (a yes remembered for a while)."""
    queues = tool_queues(checked, request.tools, request.routing.model_task_queue)
    queues.pop(task_queue, None)  # a tool routed to the plan's own queue: the plan's worker
    seen = await asyncio.gather(
        worker_seen(client, task_queue),
        *(worker_seen(client, queue, activities=True) for queue in queues),
    )
    address = _address(client)
    lines = [] if seen[0] else [no_worker_message(task_queue, address)]
    for (queue, names), polled in zip(queues.items(), seen[1:], strict=True):
        if not polled:
            lines.append(no_worker_message(queue, address, _serve_fix(queue, names)))
    return lines


def _address(client: Client) -> str:
    return str(client.service_client.config.target_host)


def tool_table(
    registry: ToolRegistry | Mapping[str, ToolOptions], approval: ApprovalPolicy | None = None
) -> dict[str, ToolOptions]:
    """Per-tool durable rules, the form ``PlanInput`` carries (approval gates applied)."""
    if isinstance(registry, ToolRegistry):
        return registry.options(approval)
    return (approval or ApprovalPolicy()).options(registry)


def plan_input(
    plan: Plan | Mapping[str, Any] | str,
    registry: ToolRegistry | Mapping[str, ToolOptions],
    *,
    max_steps: int = DEFAULT_MAX_STEPS,
    max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES,
    model: str | None = None,
    **extra: Any,
) -> PlanInput:
    """Check ``plan`` against the tools (raises ``PlanRejected``) and build the workflow input.

    ``model``: the model of agent steps that name none, a name registered through
    ``StrandsPlugin(models=...)`` on the worker's client.
    """
    return _prepare(
        plan, registry, max_steps=max_steps, max_result_bytes=max_result_bytes, model=model, **extra
    )[1]


def _prepare(
    plan: Plan | Mapping[str, Any] | str,
    registry: ToolRegistry | Mapping[str, ToolOptions],
    *,
    max_steps: int,
    max_result_bytes: int,
    model: str | None,
    **extra: Any,
) -> tuple[CheckedPlan, PlanInput]:
    """The checked plan (the UI's summary is built from it) and the workflow input.

    ``allowed_models`` (in ``extra``): model-name patterns an agent step may name; by
    default none (steps use ``model``, the default), as the plugin does."""
    tools = tool_table(registry)
    inputs = extra.pop("inputs", None)
    memory = extra.pop("memory", None)
    settings = PlanSettings.of(extra)
    models = Models(default_model=model, allowed_models=list(settings.models.allowed_models or []))
    settings = replace(
        settings,
        bounds=replace(settings.bounds, max_steps=max_steps, max_result_bytes=max_result_bytes),
        models=models,
    )
    catalog = replace(
        ToolCatalog.from_options(tools), default_model=model, models=models.allowed_models
    )
    checked = check_plan(plan, catalog=catalog, max_steps=max_steps, durable=True, inputs=inputs)
    request = checked_input(checked, tools, settings, inputs=inputs, memory=memory)
    return checked, request


@dataclass
class PlanHandle(PauseControls):
    """A started plan: wait for its result, read its progress, approve its gated steps,
    answer its breakpoints (``PauseControls``: ``paused``, ``continue_``, ``skip``, ``abort``)."""

    handle: WorkflowHandle[Any, Any]

    @property
    def id(self) -> str:
        return self.handle.id

    async def result(self) -> PlanResult:
        try:
            raw = await self.handle.result()
        except WorkflowFailureError as exc:
            raise PlanFailed(failure_message(exc)) from exc
        if isinstance(raw, dict) and REMEMBERED_KEY in raw:
            # A plan started with a conversation's memory returns what it learned beside
            # the result (the plugin keeps it; a PlanHandle gives the result alone).
            raw = {k: v for k, v in raw.items() if k != REMEMBERED_KEY}
        return plan_result_of(raw).in_plan_order()

    async def progress(self, *, rpc_timeout: timedelta | None = None) -> list[dict[str, Any]]:
        """The ledger so far; running steps carry their live attempt and last failure.

        The workflow only learns an activity's attempts when it ends, so for
        steps still running the server's pending-activity view (activity id =
        step id) fills in the current attempt and the error of the last one.
        A query is answered by a worker: with none polling, the server waits its own
        timeout (about 40 s) before ``RPCError``; ``rpc_timeout`` bounds that wait.
        """
        lines: list[dict[str, Any]] = await self.handle.query("progress", rpc_timeout=rpc_timeout)
        for line in lines:
            if line["tool"] == AGENT_TOOL and line["phase"] == "running":
                await self._agent_progress(line, rpc_timeout)
        if any(line["phase"] == "running" and line["tool"] != AGENT_TOOL for line in lines):
            description = await self.handle.describe()
            pending = {p.activity_id: p for p in description.raw_description.pending_activities}
            for line in lines:
                info = pending.get(line["id"])
                if line["phase"] == "running" and info is not None:
                    line["attempts"] = info.attempt
                    if info.HasField("last_failure"):
                        line["error"] = info.last_failure.message
        return lines

    def events(
        self,
        from_offset: int = 0,
        *,
        follow_agent_steps: bool = True,
        poll_cooldown: timedelta = POLL_COOLDOWN,
    ) -> AsyncIterator[PlanEvent]:
        """The plan's events as they happen (``durable_plan.run.events``): an async iterator
        that ends after ``plan_finished``. Each plan event has its ``offset``; after a
        disconnect, resume with ``from_offset=last.offset + 1``. With
        ``follow_agent_steps`` an agent step's rounds and tool calls are merged in (from
        its child workflow's stream; they carry no plan offset)."""
        return plan_events(
            self.handle,
            from_offset,
            follow_agent_steps=follow_agent_steps,
            poll_cooldown=poll_cooldown,
        )

    async def _agent_progress(self, line: dict[str, Any], rpc_timeout: timedelta | None) -> None:
        """A running agent step's round, tool calls and approvals, from its child workflow."""
        child = self.handle._client.get_workflow_handle(
            child_workflow_id(self.handle.id, "agent", line["id"])
        )
        try:
            loop: dict[str, Any] = await child.query("progress", rpc_timeout=rpc_timeout)
        except RPCError:
            return  # not started yet
        line.update(loop)

    async def decide(
        self, step_id: str, approved: bool, reason: str = "", *, args_digest: str | None = None
    ) -> str:
        """Approve or reject a step that is awaiting approval (ValueError if it is not).

        ``args_digest`` (from ``progress()``) binds the decision to the arguments the
        person saw: if the step's arguments have another digest, it is refused.
        """
        try:  # ``step_id``: a path, sent to the workflow that holds the call
            result: str = await self._update(
                step_id, DECIDE_UPDATE, lambda c: ApprovalDecision(c, approved, reason, args_digest)
            )
        except WorkflowUpdateFailedError as exc:
            raise ValueError(failure_message(exc)) from None
        return result


async def start_plan(
    client: Client,
    plan: Plan | Mapping[str, Any] | str,
    *,
    task_queue: str,
    registry: ToolRegistry | Mapping[str, ToolOptions],
    workflow_id: str | None = None,
    max_steps: int = DEFAULT_MAX_STEPS,
    max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES,
    start_options: Mapping[str, Any] | None = None,
    if_no_worker: NoWorker = "warn",
    **extra: Any,
) -> PlanHandle:
    """Check, then start ``PlanWorkflow``; returns at once with a handle.

    A ``plan_worker`` for ``task_queue`` (with the same tools) must run somewhere: this
    process or another. ``if_no_worker`` says what happens when none polls the queue:
    ``"warn"`` (default) starts the plan and warns with a ``NoWorkerWarning`` that it will
    wait; ``"raise"`` raises ``NoWorkerError`` and starts nothing (scripts and CI that
    should fail fast); ``"ignore"`` starts it quietly (workers that come later on purpose).
    Warning rather than raising by default because starting before the workers is valid
    Temporal (a deploy, workers scaled from zero: the plan waits durably), while waiting
    without a word is what leaves people stuck. The check costs one request, sent
    alongside the start (``"raise"``: before it), and up to a second only when the queue
    looks empty.

    ``start_options`` go to ``Client.start_workflow`` (timeouts, search attributes...);
    ``extra`` fields go into ``PlanInput`` (``max_returned_bytes``, ``task_queue`` ...).
    The web UI shows the plan's steps by level as the workflow's summary;
    ``ui_metadata="details"`` adds a table of them as its details, ``"full"`` a summary on
    each step's activity too (each is history the plan carries: ``ui_summary``).
    """
    extra.setdefault("payloads_stored", client_stores_payloads(client))
    if "plan_status_attribute" not in extra:
        # Only where the namespace has it: an upsert of an attribute it lacks fails the
        # plan's workflow task forever (``plan_status``).
        extra["plan_status_attribute"] = await client_sees_plan_status(client)
    checked, request = _prepare(
        plan,
        registry,
        max_steps=max_steps,
        max_result_bytes=max_result_bytes,
        model=extra.pop("model", None),
        **extra,
    )
    if if_no_worker == "raise":
        missing = await _unpolled_queues(client, task_queue, checked, request)
        if missing:
            raise NoWorkerError("; ".join(missing))
    summary, details = plan_metadata(checked, request.visibility.ui_metadata)
    options: dict[str, Any] = {
        # A worker for this queue in this process gets the first workflow task in the
        # start response, saving a server round trip; elsewhere it is a no-op.
        "request_eager_start": True,
        "static_summary": summary,
        **({"static_details": details} if details is not None else {}),
        **dict(start_options or {}),
    }
    if request.visibility.plan_status_attribute:
        options["search_attributes"] = _with_status(options.get("search_attributes"))
    start = client.start_workflow(
        PLAN_WORKFLOW_NAME,
        # JSON text in the plan's own key order: the SDK's default converter would sort
        # every object's keys, a literal argument's too (a tool, and the model, see them).
        RawValue(json_payload(request.to_wire())),
        id=workflow_id or f"plan-{uuid.uuid4()}",
        task_queue=task_queue,
        **options,
    )
    if if_no_worker != "warn":
        return PlanHandle(await start)
    handle, missing = await asyncio.gather(
        start, _unpolled_queues(client, task_queue, checked, request)
    )
    for line in missing:
        warnings.warn(NoWorkerWarning(line), stacklevel=2)
    return PlanHandle(handle)


def _with_status(given: Any) -> Any:
    """The caller's search attributes and ``PlanStatus=running`` (unless they set it, or
    gave the untyped form, which does not mix with the typed one)."""
    if given is None:
        return start_attributes()
    if isinstance(given, TypedSearchAttributes):
        if any(pair.key.name == PLAN_STATUS.name for pair in given):
            return given
        return TypedSearchAttributes([*given, *start_attributes()])
    return given


async def run_plan(
    client: Client,
    plan: Plan | Mapping[str, Any] | str,
    *,
    task_queue: str,
    registry: ToolRegistry | Mapping[str, ToolOptions],
    **kwargs: Any,
) -> PlanResult:
    """Start a plan and wait for its ``PlanResult`` (a ``plan_worker`` must poll
    ``task_queue``; see ``start_plan`` for ``if_no_worker`` and the other options)."""
    handle = await start_plan(client, plan, task_queue=task_queue, registry=registry, **kwargs)
    return await handle.result()
