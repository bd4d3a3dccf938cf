"""A saved plan's call (``plan__<name>``), started as a child ``PlanWorkflow``.

A plan's step and an agent step's loop both start it from the call's stages
(``pipeline.Stages``: the hooks, the approval gate, admission counting the child's whole
input, ``saved_plan_call_size``): the owner's rules hold for the call itself as for any
tool's. The child's input is the
caller's own, every settings record as it is (bounds, retrying, routing, the hook relay,
storage, visibility, breakpoints), with the saved plan as its plan, the call's arguments as
its inputs, and its place in the tree (``Debugging.path_prefix``) one level down. Its id
is derived from the caller's id and the call's path (``ids.child_workflow_id``), so it is
the same on replay and readable in the UI. The child checks its plan again against the
caller's tool table (the caller's plannable tools and owner's rules hold inside); its
result comes back as the step's (``run.nested``): the saved plan's returned results, or the
failure of its inner step, named by its full path.
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import replace
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RawValue
from temporalio.exceptions import ChildWorkflowError

with workflow.unsafe.imports_passed_through():
    from durable_plan.language.errors import StepFailure
    from durable_plan.language.options import ToolOptions
    from durable_plan.language.step_path import rooted
    from durable_plan.run.calls import StepCall
    from durable_plan.run.nested import (
        Nesting,
        learned_within,
        recall_within,
        saved_plan_inputs,
        saved_plan_outcome,
    )
    from durable_plan.run.reuse import REMEMBERED_KEY, Recall, Remembered
    from durable_plan.temporal.wire.ids import child_workflow_id
    from durable_plan.temporal.wire.messages import (
        PLAN_WORKFLOW_NAME,
        failure_message,
        json_payload,
    )
    from durable_plan.temporal.wire.plan_settings import HookRelay, Models
    from durable_plan.temporal.wire.result_form import plan_result_of
    from durable_plan.temporal.wire.tool_table import table_to_wire
    from durable_plan.temporal.wire.workflow_inputs import (
        AGENT_STEP_RECORDS,
        AgentStepInput,
        PlanInput,
    )
    from durable_plan.temporal.workflows.activity_calls import fairness_key
    from durable_plan.temporal.workflows.admission import Wanted, json_size
    from durable_plan.temporal.workflows.hook_relay import HookAsker
    from durable_plan.temporal.workflows.outcomes import Outcome, ms_since
    from durable_plan.temporal.workflows.pipeline import Stages
    from durable_plan.temporal.workflows.sandbox_chain import own_chain


def is_saved_plan_call(tools: dict[str, ToolOptions], tool: str) -> bool:
    """Whether ``tool`` of this tool table is a saved plan (run as a child plan)."""
    options = tools.get(tool)
    return options is not None and options.kind == "plan"


def caller_of_agent(request: AgentStepInput) -> PlanInput:
    """What an agent step's saved-plan call starts from: the step's records and tools (its
    own and those its saved plans call) as a plan's input would carry them. The step carries
    no model list: the saved plan's agent steps use the calling agent's model and may name
    no other (tighter than the plan's list, never looser)."""
    return PlanInput(
        plan={},
        tools={**request.tools, **request.plan_tools},
        models=Models(default_model=request.model, allowed_models=[]),
        **{name: getattr(request, name) for name in AGENT_STEP_RECORDS},
    )


async def run_saved_plan(
    call_id: str,
    tool: str,
    args: dict[str, Any],
    caller: PlanInput,
    relay: HookRelay,
    timeout_s: float | None,
    memory: Recall | None = None,
) -> Outcome:
    """Run the saved plan ``tool`` for the call ``call_id`` (its path in the caller's run)
    as a child plan, to the step's outcome. ``memory``: the caller's (a conversation's
    plan): the child reuses its entries of this call, and what the child learned joins it
    (``memory.nested``), even when the saved plan failed after those steps. Workflow code."""
    options = caller.tools[tool]
    nesting = Nesting(caller.debugging.path_prefix, caller.debugging.breakpoints).inner(call_id)
    try:
        nesting.check_depth(tool)
        values = saved_plan_inputs(tool, options.saved_plan or {}, args)
    except StepFailure as exc:
        return False, str(exc), 0.0, 0
    saved = options.saved_plan or {}
    recall = recall_within(memory, call_id)
    child = replace(
        caller,
        plan=dict(saved.get("plan") or {}),
        inputs=values,
        memory=recall.to_wire() if recall is not None else None,
        checked_by_sender=False,  # the child checks the saved plan itself
        relay=relay,
        # Its limited tools' calls wait in the caller's turn, not a turn of their own.
        routing=replace(caller.routing, fairness_key=fairness_key(caller)),
        debugging=replace(caller.debugging, path_prefix=nesting.path_prefix),
        chain=own_chain(caller.chain, caller.tools),  # sandbox tools: the caller's environment
    )
    started = workflow.now()
    me = workflow.info()
    timeouts = [t for t in (timeout_s, options.timeout_s) if t]
    try:
        raw = await workflow.execute_child_workflow(
            PLAN_WORKFLOW_NAME,
            RawValue(json_payload(child.to_wire())),
            id=child_workflow_id(me.workflow_id, "plan", call_id),
            task_queue=caller.routing.task_queue or me.task_queue,
            result_type=dict,
            execution_timeout=timedelta(seconds=min(timeouts)) if timeouts else None,
            static_summary=f"saved plan {tool} at {rooted(caller.debugging.path_prefix, call_id)}",
        )
    except ChildWorkflowError as exc:
        return False, f"{tool}: {failure_message(exc)}", ms_since(started), 1
    learned = raw.pop(REMEMBERED_KEY, None) if isinstance(raw, dict) else None
    if memory is not None and isinstance(learned, list):
        try:
            entries = [Remembered.from_wire(entry) for entry in learned]
        except TypeError:
            entries = []  # not ours: nothing is remembered, the step's result still counts
        memory.nested += learned_within(call_id, entries)
    try:
        value = saved_plan_outcome(tool, nesting, plan_result_of(raw))
    except StepFailure as exc:
        return False, str(exc), ms_since(started), 1
    except ValueError as exc:  # not a plan's result: a broken child must end the step
        return False, f"{tool}: unreadable result: {exc}", ms_since(started), 1
    return True, value, ms_since(started), 1


def saved_plan_call_size(caller: PlanInput, tool: str) -> int:
    """The bytes a call of the saved plan ``tool`` starts with besides its arguments: the
    child's input carries the saved plan and the caller's whole tool table. Admission
    counts them (``Stages.run``'s ``carried``), from a plan's step as from an agent's."""
    saved = caller.tools[tool].saved_plan or {}
    return json_size(saved) + json_size(table_to_wire(caller.tools))


def relay_of(hooks: HookAsker) -> HookRelay:
    """The hook relay a child started now carries: the caller's, with the room it has left
    (asked when the child starts, after the call's own before-hooks spent theirs)."""
    route = hooks.route
    return route.relay(hooks.sent_bytes) if route is not None else HookRelay()


async def run_saved_plan_step(
    call: StepCall,
    request: PlanInput,
    stages: Stages,
    wanted: Wanted,
    memory: Recall | None = None,
) -> Outcome | None:
    """A plan's step (or map item) calling a saved plan: the call passes the stages every
    call passes (``pipeline.Stages``: the owner's hooks and approval gate hold for the saved
    plan's call itself, as for an agent step's call of it), admission counting the child's
    whole input; None when it was withdrawn before it started."""

    async def start(args: dict[str, Any]) -> Outcome:
        listed = stages.pauses.child(call.step_id, "plan") if stages.pauses else nullcontext()
        with listed:  # its calls pause in it (``paused_children``)
            return await run_saved_plan(
                call.step_id,
                call.tool,
                args,
                request,
                relay_of(stages.hooks),
                call.timeout_s,
                memory,
            )

    return await stages.run(
        call.step_id,
        call.tool,
        request.tools[call.tool],
        call.args,
        start,
        wanted,
        carried=saved_plan_call_size(request, call.tool),
    )
