"""A plan's agent step, started as its child workflow (``AgentStepWorkflow``).

The plan workflow hands the step over here: its input is the step's own (prompt, schema,
tools, model) beside the plan's settings records, the routing and the hook relay adjusted
to the step; admission counts its input like any call's; the child's failure comes back
as the step's error (a ``ChildWorkflowError``'s cause, not "Child Workflow execution
failed").
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RawValue
from temporalio.exceptions import ChildWorkflowError

with workflow.unsafe.imports_passed_through():
    from durable_plan.check.saved_plans import tools_inside
    from durable_plan.language.agent_step import agent_step_spec
    from durable_plan.run.calls import StepCall
    from durable_plan.temporal.wire.ids import child_workflow_id
    from durable_plan.temporal.wire.messages import failure_message, json_payload
    from durable_plan.temporal.wire.plan_settings import HookRelay
    from durable_plan.temporal.wire.workflow_inputs import AgentStepInput, PlanInput
    from durable_plan.temporal.workflows.activity_calls import fairness_key
    from durable_plan.temporal.workflows.admission import Admission, Wanted, json_size
    from durable_plan.temporal.workflows.agent_workflow import AGENT_STEP_WORKFLOW_NAME
    from durable_plan.temporal.workflows.hook_relay import HookAsker
    from durable_plan.temporal.workflows.outcomes import Outcome, ms_since
    from durable_plan.temporal.workflows.sandbox_chain import own_chain
    from durable_plan.temporal.workflows.ui_summary import agent_step_summary


async def run_agent_step_child(
    call: StepCall, request: PlanInput, hooks: HookAsker, admission: Admission, wanted: Wanted
) -> Outcome | None:
    """An agent step: its loop in a child workflow, so its conversation stays out of the
    plan's history; None when it was withdrawn before it started."""
    spec = agent_step_spec(call.args, list(request.tools), request.models.default_model)
    route = hooks.route
    # Only where a call waits on a tool's own queue (a plan without routed tools starts
    # its agent steps without a fairness key).
    routed = any(request.tools[name].task_queue for name in spec.tools)
    tools = {name: request.tools[name] for name in spec.tools}
    plan_tools = {n: request.tools[n] for n in tools_inside(spec.tools, request.tools)}
    step_input = AgentStepInput(
        step_id=call.step_id,
        prompt=spec.prompt,
        output_schema=spec.output_schema,
        tools=tools,
        plan_tools=plan_tools,
        max_iterations=spec.max_iterations,
        model=spec.model,
        system_prompt=spec.system_prompt,
        bounds=request.bounds,
        retrying=request.retrying,
        routing=replace(request.routing, fairness_key=fairness_key(request) if routed else None),
        relay=route.relay(hooks.sent_bytes) if route is not None else HookRelay(),
        storage=request.storage,
        visibility=request.visibility,
        debugging=request.debugging,  # its calls pause, and are named from the root
        # Its sandbox tools, and those of the saved plans it may call: the plan's environment.
        chain=own_chain(request.chain, {**tools, **plan_tools}),
    )
    wire = step_input.to_wire()
    verdict = await admission.enter(json_size(wire), wanted=wanted)
    if verdict == "withdrawn":
        return None
    if verdict == "full":
        return False, admission.history_full_message(), 0.0, 0
    started = workflow.now()
    me = workflow.info()
    try:
        result = await workflow.execute_child_workflow(
            AGENT_STEP_WORKFLOW_NAME,
            RawValue(json_payload(wire)),  # the prompt's schema in its own key order
            id=child_workflow_id(me.workflow_id, "agent", call.step_id),
            task_queue=request.routing.task_queue or me.task_queue,
            result_type=dict,
            execution_timeout=timedelta(seconds=call.timeout_s) if call.timeout_s else None,
            static_summary=agent_step_summary(call.step_id, call.level, spec.prompt),
        )
    except ChildWorkflowError as exc:
        return False, failure_message(exc), ms_since(started), 1
    finally:
        admission.leave()
    return True, result, ms_since(started), 1
