"""A saved plan's call (``plan__<name>``), started as a child ``PlanWorkflow``.

The calling plan (or an agent step's loop) hands the call over here after the call's
stages (``pipeline.Stages``: a pause, the hooks, admission): the child's input is the
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
        MAX_PLAN_DEPTH,
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
    from durable_plan.temporal.workflows.admission import Admission, Wanted, json_size
    from durable_plan.temporal.workflows.hook_relay import HookAsker
    from durable_plan.temporal.workflows.outcomes import Outcome, ms_since
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
    if nesting.depth > MAX_PLAN_DEPTH:  # the caller's check refuses it: a hand-written input
        return (
            False,
            f"{tool} at {nesting.path_prefix}: saved plans nest at most {MAX_PLAN_DEPTH} deep",
            0.0,
            0,
        )
    try:
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


async def run_saved_plan_step(
    call: StepCall,
    request: PlanInput,
    hooks: HookAsker,
    admission: Admission,
    wanted: Wanted,
    memory: Recall | None = None,
) -> Outcome | None:
    """A plan's step (or map item) calling a saved plan, as an agent step's child is
    started (``agent_step_child``): admission counts the child's input like any call's, and
    the hook relay goes down with the room this plan has left; None when it was withdrawn
    before it started."""
    route = hooks.route
    relay = route.relay(hooks.sent_bytes) if route is not None else HookRelay()
    saved = request.tools[call.tool].saved_plan or {}
    size = json_size(call.args) + json_size(saved) + json_size(table_to_wire(request.tools))
    verdict = await admission.enter(size, wanted=wanted)
    if verdict == "withdrawn":
        return None
    if verdict == "full":
        return False, admission.history_full_message(), 0.0, 0
    try:
        return await run_saved_plan(
            call.step_id, call.tool, call.args, request, relay, call.timeout_s, memory
        )
    finally:
        admission.leave()
