"""Starting plans from outside a workflow: ``start_plan`` / ``run_plan``.

The plan is checked here first, so a bad plan fails in the caller and starts
no workflow. Results come back as the same ``PlanResult`` the in-process
runner returns.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from temporalio.client import (
    Client,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowUpdateFailedError,
)
from temporalio.service import RPCError

from durable_plan.agent_step import AGENT_TOOL
from durable_plan.approval import ApprovalPolicy
from durable_plan.check import CheckedPlan, ToolCatalog, check_plan
from durable_plan.ids import child_workflow_id
from durable_plan.plan import DEFAULT_MAX_STEPS, Plan, PlanResult
from durable_plan.temporal.messages import (
    DEFAULT_MAX_RESULT_BYTES,
    ApprovalDecision,
    PlanInput,
    failure_message,
)
from durable_plan.temporal.workflow import PLAN_WORKFLOW_NAME
from durable_plan.tools import ToolOptions, ToolRegistry


class PlanFailed(RuntimeError):
    """The plan workflow itself failed (not a step: the plan as a whole)."""


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
    tools = tool_table(registry)
    catalog = replace(ToolCatalog.from_options(tools), default_model=model)
    checked = check_plan(
        plan, catalog=catalog, max_steps=max_steps, durable=True, inputs=extra.get("inputs")
    )
    return checked_input(
        checked,
        tools,
        max_steps=max_steps,
        max_result_bytes=max_result_bytes,
        default_model=model,
        **extra,
    )


def checked_input(checked: CheckedPlan, tools: dict[str, ToolOptions], **fields: Any) -> PlanInput:
    """The workflow input for a plan the caller has already checked."""
    plan = checked.plan.model_dump(mode="json", exclude_defaults=True)
    return PlanInput(plan=plan, tools=tools, **fields)


@dataclass
class PlanHandle:
    """A started plan: wait for its result, read its progress, approve its gated steps."""

    handle: WorkflowHandle[Any, Any]

    @property
    def id(self) -> str:
        return self.handle.id

    async def result(self) -> PlanResult:
        try:
            raw = await self.handle.result()
        except WorkflowFailureError as exc:
            raise PlanFailed(failure_message(exc)) from exc
        result = PlanResult.model_validate(raw)
        # The data converter may sort keys; give results back in plan order.
        order = [o.id for o in result.ledger if o.id in result.returned]
        return result.model_copy(update={"returned": {k: result.returned[k] for k in order}})

    async def progress(self) -> list[dict[str, Any]]:
        """The ledger so far; running steps carry their live attempt and last failure.

        The workflow only learns an activity's attempts when it ends, so for
        steps still running the server's pending-activity view (activity id =
        step id) fills in the current attempt and the error of the last one.
        """
        lines: list[dict[str, Any]] = await self.handle.query("progress")
        for line in lines:
            if line["tool"] == AGENT_TOOL and line["phase"] == "running":
                await self._agent_progress(line)
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

    async def _agent_progress(self, line: dict[str, Any]) -> None:
        """A running agent step's round, tool calls and approvals, from its child workflow."""
        child = self.handle._client.get_workflow_handle(
            child_workflow_id(self.handle.id, "agent", line["id"])
        )
        try:
            loop: dict[str, Any] = await child.query("progress")
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
        try:
            result: str = await self.handle.execute_update(
                "decide_step", ApprovalDecision(step_id, approved, reason, args_digest)
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
    **extra: Any,
) -> PlanHandle:
    """Check, then start ``PlanWorkflow``; returns at once with a handle.

    ``start_options`` go to ``Client.start_workflow`` (timeouts, search attributes...);
    ``extra`` fields go into ``PlanInput`` (``max_returned_bytes``, ``task_queue`` ...).
    """
    request = plan_input(
        plan, registry, max_steps=max_steps, max_result_bytes=max_result_bytes, **extra
    )
    handle = await client.start_workflow(
        PLAN_WORKFLOW_NAME,
        request,
        id=workflow_id or f"plan-{uuid.uuid4()}",
        task_queue=task_queue,
        # A worker for this queue in this process gets the first workflow task in the
        # start response, saving a server round trip; elsewhere it is a no-op.
        **{"request_eager_start": True, **dict(start_options or {})},
    )
    return PlanHandle(handle)


async def run_plan(
    client: Client,
    plan: Plan | Mapping[str, Any] | str,
    *,
    task_queue: str,
    registry: ToolRegistry | Mapping[str, ToolOptions],
    **kwargs: Any,
) -> PlanResult:
    """Start a plan and wait for its ``PlanResult``."""
    handle = await start_plan(client, plan, task_queue=task_queue, registry=registry, **kwargs)
    return await handle.result()
