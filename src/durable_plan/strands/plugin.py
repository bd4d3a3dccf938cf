"""``WorkflowPlanPlugin``: gives a Strands agent the ``submit_workflow_plan`` tool.

One plugin, two runners (as pydantic-ai does for its agents): on a plain
``strands.Agent`` the plan runs in-process and truly concurrently; inside a
``TemporalAgent`` (the tool body then runs in workflow code) the plan is checked
in the parent, so a bad plan costs no child workflow, and then runs durably as
a ``PlanWorkflow`` child with the readable id ``<parent id>/plan/<toolUseId>``.

Approval gates are never bypassed. On a plain agent a gated tool is refused at
check time ("call it directly"); in a durable plan the gated step pauses its
workflow until a person approves or rejects it.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from strands import Agent
from strands.hooks import AfterToolsEvent, BeforeInvocationEvent
from strands.interrupt import _InterruptState
from strands.plugins import Plugin
from strands.types.tools import ToolResult, ToolUse
from temporalio import workflow

from durable_plan.check import ToolCatalog
from durable_plan.language.options import ToolOptions
from durable_plan.language.patterns import matches_patterns
from durable_plan.language.plan import PlanResult
from durable_plan.language.schema import PLAN_TOOL_NAME
from durable_plan.run.reuse import (
    Remembered,
    StepMemory,
)
from durable_plan.strands.carried import (
    PlanToolState,
    carried_state,
    continue_stream,
)
from durable_plan.strands.options import (
    DEFAULT_BOUNDS,
    DEFAULT_MEMORY,
    DEFAULT_PRESENTATION,
    DEFAULT_RELAY,
    DEFAULT_TELEMETRY,
    OPTION_RECORDS,
    PlanBounds,
    Presentation,
    StepMemoryOptions,
    StorageRelay,
    Telemetry,
    durable_plan_options,
)
from durable_plan.strands.plan_tool import PlanFailed, PlanTool, error_result
from durable_plan.strands.result_fit import fitted
from durable_plan.strands.submission import submit_plan
from durable_plan.strands.tool_description import (
    described_plannable,
    described_tools,
)
from durable_plan.tools.approval import ApprovalPolicy, gated_patterns
from durable_plan.tools.mcp import (
    is_mcp_agent_tool,
    mcp_servers,
)
from durable_plan.tools.registry import ToolRegistry

PLUGIN_NAME = "durable-plan"
MAX_RESULTS_KEPT = 64
"""``results`` keeps the last plans of a conversation, not all of them forever."""
INTERRUPTED_REFUSAL = (
    "cannot run a plan while the agent is waiting for a person's answer to an interrupt: "
    "answer the interrupt first"
)


class WorkflowPlanPlugin(Plugin):
    """Adds ``submit_workflow_plan`` to an ``Agent`` or a ``TemporalAgent``, and (with a
    ``registry``) the registry's tools for direct calls.

    Args:
        plannable: tool-name patterns that may appear in plans, e.g. ``["*",
            "!delete_files"]`` (later patterns win, ``*`` matches anywhere). Required
            when the agent has interventions, so a human approval is never skipped.
        registry: the tools as a ``ToolRegistry``; required inside a ``TemporalAgent``,
            where plan steps run as the registry's activities. On a plain agent the
            agent's own tools are used when it is omitted. Either way the agent's MCP
            servers (``MCPClient``, ``TemporalMCPClient``) add their tools as
            ``<server>__<tool>`` (``durable_plan.tools.mcp``).
        task_queue: task queue of the plan workflow and its activities (default: the
            parent workflow's).
        approval_required: tool-name patterns that need a person's approval (in plans and
            in direct calls alike).
        models: for in-process agent steps, the Strands models (or factories) a step may
            name in ``model``; a step naming none uses the agent's model. Durably, models
            are the names registered through ``StrandsPlugin(models=...)``.
        agent_models: model-name patterns an agent step may name in ``model`` (the default
            model, the agent's own, needs no name); in-process the names of ``models`` are
            allowed too. An agent step naming any other model is refused at check time.
        direct_tools: with a ``registry``, give the agent the registry's tools it does not
            carry already, for direct calls, through the pipeline plan steps take (the
            owner's rules, approvals, hooks, limits: ``agent_tools.durable_tools``).
            ``False``: an agent that only plans.
        bounds: ``PlanBounds(max_steps, max_result_bytes)``.
        memory: ``StepMemoryOptions(remember_steps, remember_bytes, remember_across_turns,
            never_reuse)``: what later plans of a request reuse.
        relay: ``StorageRelay(plan_options, hooked_tools, hook_relay_bytes)``: what a
            durable plan keeps and sends back through the conversation.
        telemetry: ``Telemetry(plan_stream)``: where each plan a conversation starts is
            announced.
        presentation: ``Presentation(honor_final, signatures)``: what the model is shown.
        options: the records' fields as keywords, as before the records
            (``max_steps=5`` is ``bounds=PlanBounds(max_steps=5)``); the records' docstrings
            (``durable_plan.strands.options``) say what each does.
    """

    name = PLUGIN_NAME

    def __init__(
        self,
        plannable: Sequence[str] | None = None,
        *,
        registry: ToolRegistry | None = None,
        task_queue: str | None = None,
        approval_required: Sequence[str] = (),
        models: Mapping[str, Any] | None = None,
        agent_models: Sequence[str] = (),
        direct_tools: bool = True,
        bounds: PlanBounds = DEFAULT_BOUNDS,
        memory: StepMemoryOptions = DEFAULT_MEMORY,
        relay: StorageRelay = DEFAULT_RELAY,
        telemetry: Telemetry = DEFAULT_TELEMETRY,
        presentation: Presentation = DEFAULT_PRESENTATION,
        **options: Any,
    ) -> None:
        super().__init__()
        records: dict[str, Any] = {
            "bounds": bounds,
            "memory": memory,
            "relay": relay,
            "telemetry": telemetry,
            "presentation": presentation,
        }
        for key, value in options.items():  # the keywords from before the records
            record = OPTION_RECORDS.get(key)
            if record is None:
                raise TypeError(
                    f"WorkflowPlanPlugin() got an unexpected keyword argument {key!r}; its "
                    f"options are {', '.join(sorted(OPTION_RECORDS))} (or their records: "
                    "bounds=PlanBounds(...), memory=StepMemoryOptions(...), "
                    "relay=StorageRelay(...), telemetry=Telemetry(...), "
                    "presentation=Presentation(...))"
                )
            records[record] = replace(records[record], **{key: value})
        self.bounds: PlanBounds = records["bounds"]
        self.memory_options: StepMemoryOptions = records["memory"]
        self.relay: StorageRelay = records["relay"]
        self.telemetry: Telemetry = records["telemetry"]
        self.presentation: Presentation = records["presentation"]
        self.direct_tools = direct_tools
        """Give the agent the registry's tools for direct calls too (those it does not carry
        already), through the same pipeline as plan steps (``agent_tools.durable_tools``);
        False: an agent that only plans (its model is sent the plan tool alone)."""
        self.signatures: bool | None = self.presentation.signatures
        self.plan_stream = self.telemetry.plan_stream
        self.plan_options = durable_plan_options(self.relay.plan_options)
        """Extra fields of each durable plan's ``PlanInput`` (``store_over_bytes``,
        ``return_stored``, ``keep_stored_results``, ``retry_initial_interval_s``, ...)."""
        self.plannable = list(plannable) if plannable is not None else None
        self.max_steps = self.bounds.max_steps
        self.honor_final = self.presentation.honor_final
        self.registry = registry
        self.task_queue = task_queue
        self.approval_required = list(approval_required)
        self.max_result_bytes = self.bounds.max_result_bytes
        self.models = dict(models or {})
        self._final_answers: dict[str, str] = {}
        self.results: deque[PlanResult] = deque(maxlen=MAX_RESULTS_KEPT)
        self.plans_run = 0
        self.memory = StepMemory(
            self.memory_options.remember_steps, self.memory_options.remember_bytes
        )
        """Steps that ended ok in this conversation's plans: durably, part of the agent
        workflow's state (rebuilt from the plan results in its history on replay)."""
        self.remember_across_turns = self.memory_options.remember_across_turns
        self.never_reuse = list(self.memory_options.never_reuse)
        self.agent_models = list(agent_models)
        hooked = self.relay.hooked_tools
        self.hooked_tools = list(hooked) if hooked is not None else None
        self.hook_relay_bytes = self.relay.hook_relay_bytes
        self._one_at_a_time: asyncio.Lock | None = None
        """Plans of one agent run one after another, even when the model asks for two in one
        turn: each gets its own number and sees what the one before it ran."""
        self._gate_patterns: list[str] = []
        self._agent: Any = None
        self._resumed_interrupt: dict[str, Any] | None = None
        """A pending interrupt carried from the previous run (``resume``), for the agent."""
        self._mcp_servers: dict[str, Any] = {}
        """The agent's MCP servers by name: their tools join each plan's catalogue as
        ``<server>__<tool>`` (``durable_plan.tools.mcp``)."""

    # -- a conversation that continues as new ------------------------------------

    def carry_over(self) -> PlanToolState:
        """What the next run of this conversation needs of the plan tool: pass it in the
        ``continue_as_new`` argument, and to `resume` there (with the agent's messages).

        It carries the plan count, the memory of steps (so a repair in the next run still
        reuses what earlier plans charged), the agent's pending interrupt (a person's answer
        still to come), and the ``plan_stream``'s state (the next run's
        ``WorkflowStream(prior_state=state.stream)`` goes on with its offsets). Call it
        between turns, as ``workflows/conversation.py`` does: a plan still running when the
        run continues as new (one awaiting a person's approval, say) would be terminated
        with it; between turns none is, and an interrupt pending is carried.

        The interrupt is bounded (``carried.carried_interrupt``: the results of the turn's
        tools that ran already become previews past ``MAX_CARRIED_INTERRUPT_BYTES``), so the
        argument stays under the 2 MB a payload may have. One that cannot be cut enough ends
        the workflow with a non-retryable error saying why: a continue-as-new the server
        refuses would fail the workflow task on every retry."""
        return carried_state(
            getattr(self._agent, "_interrupt_state", None),
            self.plans_run,
            self.memory,
            self.plan_stream,
        )

    def resume(self, state: PlanToolState | None) -> None:
        """Continue where the previous run of the conversation left off (None: a new one)."""
        if state is None:
            return
        if self.plans_run:
            raise ValueError("resume() belongs before the first plan of this run")
        self.plans_run = state.plans_run
        self.memory.restore(state.remembered, state.forgotten)
        if state.stream is not None and self.plan_stream is not None:
            continue_stream(self.plan_stream, state.stream)
        self._resumed_interrupt = state.interrupt
        if self._agent is not None:
            self._restore_interrupt(self._agent)

    def _restore_interrupt(self, agent: Any) -> None:
        """The pending interrupt carried from the previous run, onto the agent (once)."""
        carried, self._resumed_interrupt = self._resumed_interrupt, None
        if carried is not None:
            agent._interrupt_state = _InterruptState.from_dict(carried)

    # -- Strands plugin protocol ---------------------------------------------

    def init_agent(self, agent: Agent) -> None:
        if self._agent is not None and self._agent is not agent:
            # Its gates and final answers belong to one agent: sharing would let a plan on
            # a gated agent run with another agent's (missing) approvals.
            raise ValueError(
                "this WorkflowPlanPlugin is already attached to another agent: create one "
                "plugin per agent (it holds that agent's approval gates and answers)"
            )
        self._agent = agent
        self._restore_interrupt(agent)
        handlers = list(getattr(getattr(agent, "_intervention_registry", None), "handlers", []))
        if handlers and self.plannable is None:
            names = ", ".join(getattr(h, "name", type(h).__name__) for h in handlers)
            raise ValueError(
                f"this agent has interventions ({names}): pass WorkflowPlanPlugin(plannable=[...]) "
                'naming the tools that are safe to batch, e.g. ["*", "!delete_files"], so a '
                "human approval is never skipped silently"
            )
        self._gate_patterns = gated_patterns(handlers)
        self._mcp_servers = mcp_servers(agent)
        agent.tool_registry.register_tool(PlanTool(self))
        if self.direct_tools and self.registry is not None:
            self._add_direct_tools(agent, self.registry)
        agent.hooks.add_callback(AfterToolsEvent, self._end_turn_with_final_plan)
        agent.hooks.add_callback(BeforeInvocationEvent, self._new_request)
        if workflow.in_workflow():
            # Durably, without External Storage, a model call too large to send is not made:
            # the turn ends saying why, where its workflow task would fail forever. What the
            # plan tool returns is bounded so that this is the last resort (``_fitted``).
            with workflow.unsafe.imports_passed_through():
                from durable_plan.temporal.workflows.conversation_room import watch_model_calls

            watch_model_calls(agent)

    def _add_direct_tools(self, agent: Agent, registry: ToolRegistry) -> None:
        """The registry's tools the agent does not carry already (``tools=`` wins: its own
        ``durable_tools(...)`` or tools), each a caller of the path every tool call takes
        (``agent_tools``): in a workflow the tool's activity after the plan's stages,
        in-process its limits and approvals; gated by the plugin's patterns as plans are."""
        with workflow.unsafe.imports_passed_through():  # in the workflow sandbox
            from durable_plan.temporal.workflows.agent_tools import durable_tools

        carried = set(agent.tool_registry.registry)
        for tool in durable_tools(
            registry, task_queue=self.task_queue, approval_required=self.approval_required
        ):
            if tool.tool_name not in carried:
                agent.tool_registry.register_tool(tool)

    def _new_request(self, event: BeforeInvocationEvent) -> None:
        """A new invocation of the agent: a new request, whose plans must run again. An
        invocation that answers an interrupt is the same request going on: what its plans
        ran stays remembered (a repair after the person's answer reuses it)."""
        if getattr(getattr(event.agent, "_interrupt_state", None), "activated", False):
            return
        if not self.remember_across_turns:
            self.memory.clear()

    def _end_turn_with_final_plan(self, event: AfterToolsEvent) -> None:
        """A final plan whose steps all ran ends the turn with its results as the answer."""
        results = [b["toolResult"] for b in event.message["content"] if "toolResult" in b]
        answers = [self._final_answers.pop(r["toolUseId"], None) for r in results]
        if results and all(a is not None for a in answers):
            event.end_turn = "\n".join(a for a in answers if a is not None)

    # -- the tool body --------------------------------------------------------

    async def submit(self, tool_use: ToolUse, agent: Any) -> ToolResult:
        """Check and run one submitted plan; never raises (errors are values for the model).

        Plans of one agent run one at a time, in the order the model asked for them."""
        tool_use_id = tool_use["toolUseId"]
        if getattr(getattr(agent, "_interrupt_state", None), "activated", False):
            # As Strands refuses a direct tool call while a person's answer is pending.
            return error_result(tool_use_id, INTERRUPTED_REFUSAL)
        if self._one_at_a_time is None:
            self._one_at_a_time = asyncio.Lock()
        async with self._one_at_a_time:
            # Fitted before the next plan starts, so that plan counts what this one handed out.
            return self._fitted(await self._submit(tool_use, agent), agent)

    def _fitted(self, result: ToolResult, agent: Any) -> ToolResult:
        return fitted(self, result, agent)

    async def _submit(self, tool_use: ToolUse, agent: Any) -> ToolResult:
        return await submit_plan(self, tool_use, agent)

    def _took(self, result: PlanResult, learned: list[Remembered]) -> None:
        """A plan ended (as a whole or not): count it and remember what it ran ok."""
        self.results.append(result)
        self.plans_run += 1
        self.memory.remember(learned, result)

    def tool_options(self, registry: ToolRegistry) -> dict[str, ToolOptions]:
        """The durable tool table: the owner's options with every approval gate applied and
        the plugin's ``never_reuse`` patterns (one place for both runners)."""
        options = registry.options(self.approval)
        if not self.never_reuse:
            return options
        return {
            name: replace(o, reuse=False) if matches_patterns(name, self.never_reuse) else o
            for name, o in options.items()
        }

    def catalog(self, registry: ToolRegistry, *, durable: bool) -> ToolCatalog:
        """Plannable tools; gated ones are refused in-process and allowed (paused) durably."""
        plannable = self.plannable if self.plannable is not None else ["*"]
        catalog = registry.catalog(plannable, approval=self.approval, durable=durable)
        tools = {n: s for n, s in catalog.tools.items() if n != PLAN_TOOL_NAME}
        # An agent step without a model uses the agent's own; naming one needs the owner's
        # allow-list (in-process, the models given to the plugin are allowed too).
        models = [*self.agent_models, *([] if durable else list(self.models))]
        return ToolCatalog(tools, default_model="the agent's model", models=models)

    @property
    def approval(self) -> ApprovalPolicy:
        """Who must approve what: the plugin's patterns and the agent's interventions."""
        return ApprovalPolicy.of(self.approval_required, self._gate_patterns)

    # -- internals ------------------------------------------------------------

    def _registry_for(self, agent: Any, durable: bool) -> ToolRegistry:
        if self.registry is not None:
            return self.registry
        if durable:
            raise PlanFailed(
                "inside a workflow, WorkflowPlanPlugin needs registry=ToolRegistry([...]) so plan "
                "steps can run as activities"
            )
        tools = [
            t
            for name, t in agent.tool_registry.registry.items()
            # An MCPClient's tools join under their server's name (mcp_tools.py).
            if name != PLAN_TOOL_NAME and not is_mcp_agent_tool(t)
        ]
        return ToolRegistry(tools)

    def described_plannable(self) -> list[str] | None:
        """The plannable names the plan tool's description lists (None: not listed)."""
        return described_plannable(self)

    def described_tools(self) -> tuple[dict[str, str], dict[str, str]]:
        """Each plannable tool's return shape and signature, as the description states them
        (``tool_description.described_tools``); never raises."""
        return described_tools(self)
