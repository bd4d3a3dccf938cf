"""``AgentStepWorkflow``: one agent step of a durable plan, in its own child workflow.

The loop's conversation stays out of the plan's history: the plan workflow
starts ``<plan id>/agent/<step id>`` and gets back only the step's result. In
here a ``TemporalAgent`` runs ``agent_loop.run_agent_step`` (the same loop as
in-process): each model round is the Strands plugin's model activity, each
tool call the registry's tool activity, with the tool's own timeout, retries,
idempotency key (``<this workflow id>/<round>/<tool>/<n>``) and approval gate.
A crashed worker resumes the loop from history: no model round and no
completed tool call runs twice.

Each model call carries the whole conversation: with External Storage those calls are
references and history grows with the rounds; without it, with their square.
``MAX_ITERATIONS`` keeps ordinary loops far from Temporal's limits; a loop whose history
still passes ``max_history_bytes``, or whose next model call would pass Temporal's 2 MB per
payload, fails before that call, with a message that says so.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RawValue
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from strands.hooks import BeforeModelCallEvent
    from strands.types.tools import ToolGenerator, ToolResult, ToolSpec, ToolUse
    from temporalio.strands_agents import TemporalAgent

    from durable_plan.language.errors import describe_exception
    from durable_plan.language.options import ToolOptions
    from durable_plan.language.step_path import rooted
    from durable_plan.run.agent_loop import RoundTracker, run_agent_step, system_prompt
    from durable_plan.run.breakpoints import Breakpoints, Skipped
    from durable_plan.temporal.wire.hook_messages import HOOK_REPLY_SIGNAL
    from durable_plan.temporal.wire.messages import json_payload
    from durable_plan.temporal.wire.payload_limits import MAX_MODEL_INPUT_BYTES
    from durable_plan.temporal.wire.plan_settings import HookRelay
    from durable_plan.temporal.wire.workflow_inputs import AgentStepInput
    from durable_plan.temporal.workflows.activity_calls import ActivityCall, call_activity
    from durable_plan.temporal.workflows.admission import Admission
    from durable_plan.temporal.workflows.approvals import ApprovalDesk, ApprovalHandlers
    from durable_plan.temporal.workflows.conversation_room import model_input_bytes
    from durable_plan.temporal.workflows.event_stream import PlanEventStream, workflow_emitter
    from durable_plan.temporal.workflows.failures import root_cause
    from durable_plan.temporal.workflows.hook_relay import HookAsker, HookRoute
    from durable_plan.temporal.workflows.outcomes import Outcome
    from durable_plan.temporal.workflows.pauses import PauseDesk, PauseHandlers
    from durable_plan.temporal.workflows.pipeline import Stages
    from durable_plan.temporal.workflows.policy import CallPolicy, retry_policy
    from durable_plan.temporal.workflows.sandbox_chain import sandbox_scope
    from durable_plan.temporal.workflows.saved_plan_child import caller_of_agent, run_saved_plan
    from durable_plan.tools.named_tool import NamedTool
    from durable_plan.tools.results import tool_result

AGENT_STEP_WORKFLOW_NAME = "AgentStepWorkflow"
MODEL_TIMEOUT_S = 120.0
MODEL_ATTEMPTS = 3
"""A transient model error is retried by Temporal (it costs no round); a model that
keeps failing fails the step."""


@workflow.defn(name=AGENT_STEP_WORKFLOW_NAME, sandboxed=False)
class AgentStepWorkflow(ApprovalHandlers, PauseHandlers):
    """Runs one agent step; ``progress`` gives its round, tool calls and approvals."""

    def __init__(self) -> None:
        self.tracker = RoundTracker()
        self.desk = ApprovalDesk(None)  # call ids are made as the loop runs
        self.pauses = PauseDesk()
        self.calls = 0
        self.call_ids: set[str] = set()
        """Every call id issued (activity ids must differ within the workflow)."""
        self.admission: Admission | None = None
        self.hooks: HookAsker | None = None
        self.stream = PlanEventStream()

    @workflow.run
    async def run(self, raw: Any) -> Any:
        """The step's result as JSON text in its own key order (``json_payload``): the
        model's output as it wrote it, as in-process (the SDK's default converter sorts).
        ``raw``: the input's JSON form (``AgentStepInput.to_wire``)."""
        request = AgentStepInput.from_wire(raw)
        info = workflow.info()
        plan_id = info.parent.workflow_id if info.parent is not None else info.workflow_id
        events, _telemetry = workflow_emitter(
            plan_id, self.stream if request.visibility.stream_events else None
        )
        events.path_prefix = request.debugging.path_prefix
        self.tracker = RoundTracker(events, request.step_id)
        self.desk.events = events
        self.pauses = PauseDesk(
            Breakpoints(request.debugging.breakpoints),
            events,
            request.debugging.path_prefix,
            # The plan sets it (``Debugging.rooted_at``); an input built by hand: the parent.
            root_workflow_id=request.debugging.root_workflow_id or plan_id,
            waits=self.desk.waits,  # one drawing of the details for both kinds of wait
        )
        try:
            return RawValue(json_payload(await self._run(request)))
        finally:
            if self.admission is not None:
                await self.admission.settle()
            await self.stream.close()

    async def _run(self, request: AgentStepInput) -> dict[str, Any]:
        self.admission = Admission(
            max_task_bytes=request.bounds.max_task_bytes,
            max_history_bytes=request.bounds.max_history_bytes,
            max_result_bytes=request.bounds.max_result_bytes,
        )
        parent = workflow.info().parent
        # No key: the plan's own, its workflow id (``HookRelay.hook_key``).
        route = HookRoute.of(request.relay, parent.workflow_id if parent else "")
        self.hooks = HookAsker(route, self.admission)
        agent = TemporalAgent(
            model=request.model,
            task_queue=request.routing.model_task_queue,
            tools=[
                ActivityTool(name, options, request, self)
                for name, options in request.tools.items()
            ],
            system_prompt=system_prompt(request.system_prompt),
            callback_handler=None,
            # Each invoke_model row of the web UI says whose call it is (the type alone
            # does not); static, the SDK offers no per-call summary.
            summary=f"agent step {request.step_id}: model call",
            start_to_close_timeout=timedelta(seconds=MODEL_TIMEOUT_S),
            # The model activity heartbeats while it streams: a lost worker is noticed
            # after this, not after the whole start-to-close timeout.
            heartbeat_timeout=timedelta(seconds=request.retrying.model_heartbeat_timeout_s),
            # A model call has no side effect: one a lost worker cut short is retried
            # within the interruption allowance, not at the cost of the step.
            retry_policy=retry_policy(
                MODEL_ATTEMPTS + request.retrying.max_interruptions,
                request.retrying.retry_initial_interval_s,
            ),
        )
        agent.hooks.add_callback(
            BeforeModelCallEvent, lambda e: self._guard_history(request, e.agent)
        )
        try:
            return await run_agent_step(
                agent,
                request.prompt,
                request.output_schema,
                request.max_iterations,
                tracker=self.tracker,
            )
        except ApplicationError:
            raise
        except Exception as exc:  # Strands wraps failures: end the step, never the task
            cause = root_cause(exc)
            if isinstance(cause, ApplicationError):
                raise ApplicationError(cause.message, type=cause.type, non_retryable=True) from exc
            raise ApplicationError(
                f"agent step '{request.step_id}' failed: {describe_exception(cause)}",
                type="AgentStepFailed",
                non_retryable=True,
            ) from exc

    @workflow.query
    def progress(self) -> dict[str, Any]:
        """The loop so far: the current round, the tools called, calls awaiting approval."""
        return {
            "round": self.tracker.rounds,
            "tools_called": list(self.tracker.calls),
            "awaiting": self.desk.awaiting_details(),
            "paused": self.pauses.paused(),
        }

    @workflow.signal(name=HOOK_REPLY_SIGNAL)
    def hook_reply(self, reply: Any) -> None:
        """The agent's tool hooks answered for one tool call of the loop."""
        if self.hooks is not None:
            self.hooks.receive(reply)

    def _guard_history(self, request: AgentStepInput, agent: Any = None) -> None:
        if agent is not None and not request.storage.payloads_stored:
            # The model activity's input carries the conversation twice (measured with
            # temporalio-strands-agents 0.1.0: 2,464,341 bytes sent for 1,231,720 of messages):
            # measured as a conversation's are (conversation_room).
            carried = model_input_bytes(agent)
            if carried > MAX_MODEL_INPUT_BYTES:
                raise ApplicationError(
                    f"agent step '{request.step_id}' stopped after {self.tracker.rounds} "
                    f"rounds: its next model call would carry {carried // 1024} KiB, over "
                    "Temporal's 2 MB limit for one payload (the workflow could not send it); "
                    "give it tools that return less or fewer rounds, or turn on External "
                    "Storage (durable_plan.protect.payload_storage.PayloadStoragePlugin)",
                    type="AgentStepInputTooLarge",
                    non_retryable=True,
                )
        size = workflow.info().get_current_history_size()
        if size > request.bounds.max_history_bytes:
            raise ApplicationError(
                f"agent step '{request.step_id}' stopped after {self.tracker.rounds} rounds: its "
                f"history is {size // (1024 * 1024)} MiB, near Temporal's 50 MiB limit; give it "
                "fewer rounds (max_iterations) or tools that return less",
                type="AgentStepHistoryFull",
                non_retryable=True,
            )


class ActivityTool(NamedTool):
    """A registry tool inside an agent step: its activity, with its owner's rules."""

    def __init__(
        self, name: str, options: ToolOptions, request: AgentStepInput, owner: AgentStepWorkflow
    ) -> None:
        schema = options.input_schema or {"type": "object"}
        spec: ToolSpec = {
            "name": name,
            "description": options.description or name,
            "inputSchema": {"json": schema},
        }
        super().__init__(name, spec)
        self._options = options
        self._request = request
        self._owner = owner

    async def stream(
        self, tool_use: ToolUse, invocation_state: dict[str, Any], **kwargs: Any
    ) -> ToolGenerator:
        yield await self._call(tool_use)

    async def _call(self, tool_use: ToolUse) -> ToolResult:
        """One tool call of the loop through the plan's stages (``pipeline.Stages``); a
        failure goes back into the loop as the tool's error, not as a step failure."""
        owner = self._owner
        assert owner.hooks is not None and owner.admission is not None
        owner.calls += 1
        round_ = owner.tracker.rounds
        # Its path (``e1/agent.2/lookup``, ``~2`` for a second call in the round) is its
        # activity id, its approval's and its pause's name (``language.step_path``).
        call_id = owner.tracker.call_path(tool_use)
        if call_id is None or call_id in owner.call_ids:  # a toolUseId repeated in a message
            call_id = owner.tracker.spare_call_path(self._name, owner.calls)
        owner.call_ids.add(call_id)
        args = dict(tool_use.get("input") or {})
        stages = Stages(owner.hooks, owner.desk, owner.admission, owner.pauses)
        outcome = await stages.run(
            call_id,
            self._name,
            self._options,
            args,
            lambda args: (
                self._saved_plan(call_id, args)
                if self._options.kind == "plan"
                else call_activity(self._activity_call(call_id, round_, args))
            ),
        )
        assert outcome is not None  # nothing withdraws an agent step's calls
        if isinstance(outcome[1], Skipped):  # the agent goes on without it
            return _result(tool_use, False, f"{outcome[1].reason}: a person skipped this call")
        return _result(tool_use, outcome[0], outcome[1])

    async def _saved_plan(self, call_id: str, args: dict[str, Any]) -> Outcome:
        """A saved plan the agent calls: a child plan of this step (``saved_plan_child``)."""
        hooks = self._owner.hooks
        route = hooks.route if hooks is not None else None
        relay = route.relay(hooks.sent_bytes) if route is not None and hooks else HookRelay()
        caller = caller_of_agent(self._request)
        with self._owner.pauses.child(call_id, "plan"):  # its calls pause in it
            return await run_saved_plan(call_id, self._name, args, caller, relay, None)

    def _activity_call(self, call_id: str, round_: int, args: dict[str, Any]) -> ActivityCall:
        """The owner's rules for this call. Always a regular activity: an agent step's
        calls never ran as local activities, and histories recorded so must replay."""
        options, request = self._options, self._request
        policy = replace(
            CallPolicy.of(options, interruptions=request.retrying.max_interruptions), local=False
        )
        return ActivityCall(
            tool=self._name,
            activity_id=call_id,
            summary=rooted(request.debugging.path_prefix, call_id),
            args=args,
            options=options,
            policy=policy,
            task_queue=request.routing.task_queue,
            initial_interval_s=request.retrying.retry_initial_interval_s,
            max_result_bytes=request.bounds.max_result_bytes,
            wrapper_retries=policy.retries,
            fairness_key=request.routing.fairness_key,
            sandbox=sandbox_scope(  # the conversation's environment, from the trusted input
                request.chain,
                options,
                rooted(request.debugging.path_prefix, call_id),
            ),
        )


def _result(tool_use: ToolUse, ok: bool, value: Any) -> ToolResult:
    return tool_result(tool_use["toolUseId"], ok, value)
