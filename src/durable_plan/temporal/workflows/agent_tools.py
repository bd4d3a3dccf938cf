"""The registry's tools as Strands tools, for calls the model makes directly.

A direct call is one more caller of the path every tool call takes, with the owner's rules
applied where they are applied for plan steps, never copied here:

* inside a workflow (a ``TemporalAgent`` conversation) it passes the plan's stages
  (``direct_calls.call_directly``: a person's approval, admission, the tool's activity
  under its ``CallPolicy``), the same activity a plan step uses, so one worker
  registration serves both;
* in-process (a plain Strands ``Agent``) a gated tool stops the agent with a Strands
  interrupt until a person answers (``tools.approval.ask_in_process``), and the call runs
  under the tool's limits (``call_slot``) and its owner's timeout (``tools.deadline``), as
  a plan step of the in-process runner does.

Either way the agent's own tool hooks run around the call: Strands runs them for every
tool. Results go back as JSON blocks, so the model sees exactly the shape a plan binding
would address.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from strands.types.tools import AgentTool, ToolGenerator, ToolResult, ToolUse
from temporalio import workflow

from durable_plan.temporal.workflows.conversation_room import fit_tool_result
from durable_plan.temporal.workflows.direct_calls import call_directly
from durable_plan.tools.approval import ApprovalPolicy, ask_in_process
from durable_plan.tools.deadline import within
from durable_plan.tools.named_tool import NamedTool
from durable_plan.tools.registry import Tool, ToolRegistry
from durable_plan.tools.results import tool_result


class DurableTool(NamedTool):
    """One registry tool exposed to the model; an activity when called from a workflow."""

    def __init__(
        self,
        tool: Tool,
        task_queue: str | None = None,
        approval: ApprovalPolicy | None = None,
        registry: ToolRegistry | None = None,
    ) -> None:
        super().__init__(tool.name, tool.tool_spec_json)
        self._tool = tool
        self._task_queue = task_queue
        # In-process calls wait on the limits of the tool's queue, merged over the tools of
        # ``registry`` there (``ToolRegistry.call_slot``), as a plan step's do.
        self._registry = registry if registry is not None else ToolRegistry().with_tools([tool])
        gated = (approval or ApprovalPolicy()).requires(tool.name, tool.options)
        # The owner's rules with every gate applied, as a plan's tool table carries them.
        self._options = replace(tool.options, requires_approval=gated)

    async def stream(
        self, tool_use: ToolUse, invocation_state: dict[str, Any], **kwargs: Any
    ) -> ToolGenerator:
        args = dict(tool_use.get("input") or {})
        if workflow.in_workflow():
            ok, value, _ms, _attempts = await call_directly(
                self._name, self._options, tool_use["toolUseId"], args, self._task_queue
            )
            # The conversation's next model call carries this result (twice): it gets the
            # room that call has, as a plan's results do (``conversation_room``).
            yield fit_tool_result(invocation_state.get("agent"), returned(tool_use, ok, value))
            return
        ok, value = await self._in_process(tool_use, args, invocation_state, kwargs)
        yield returned(tool_use, ok, value)

    async def _in_process(
        self,
        tool_use: ToolUse,
        args: dict[str, Any],
        invocation_state: dict[str, Any],
        kwargs: dict[str, Any],
    ) -> tuple[bool, Any]:
        """The call in this process. A person is asked first (raising Strands'
        ``InterruptException`` until they answer, which stops the agent); a rejection
        means the tool never runs."""
        if self._options.requires_approval:
            rejected = ask_in_process(tool_use, invocation_state, kwargs.get("_tool_context"))
            if rejected is not None:
                return False, rejected
        tool, options, registry = self._tool, self._options, self._registry

        async def invoke() -> Any:
            async with registry.call_slot(tool.name):  # its queue's limits, as for a step
                return await tool.invoke(args, invocation_state)

        ok, value, _ms = await within(invoke, options.timeout_s)
        return ok, value


def returned(tool_use: ToolUse, ok: bool, value: Any) -> ToolResult:
    """What a direct call hands back to the conversation: the one place its value is made,
    in both runners (durably then fitted to the conversation's room)."""
    return tool_result(tool_use["toolUseId"], ok, value)


def durable_tools(
    registry: ToolRegistry,
    *,
    task_queue: str | None = None,
    approval_required: Sequence[str] = (),
) -> list[AgentTool]:
    """Every tool of ``registry`` as a Strands tool (activities inside workflows).

    ``approval_required``: tool-name patterns a person must approve besides the tools
    registered with ``requires_approval=True`` (give the ``WorkflowPlanPlugin`` the same, so
    a plan's steps and a direct call are gated alike). Saved plans (``plan__*``) are not
    among them: one runs as a plan's step (a one-step plan calls it), never directly."""
    approval = ApprovalPolicy.of(approval_required)
    return [
        DurableTool(tool, task_queue, approval, registry)
        for tool in registry
        if tool.kind != "plan"
    ]
