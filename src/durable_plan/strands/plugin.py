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
import contextlib
import json
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from strands import Agent
from strands.hooks import AfterToolsEvent, BeforeInvocationEvent
from strands.interrupt import _InterruptState
from strands.plugins import Plugin
from strands.types.tools import ToolResult, ToolResultContent, ToolUse
from temporalio import workflow
from temporalio.exceptions import ApplicationError

from durable_plan.check import CheckedPlan, ToolCatalog, check_plan
from durable_plan.check.shapes.docstrings import docstring_shape
from durable_plan.check.shapes.text import describe_shape, describe_signature
from durable_plan.language.errors import PlanRejected, describe_exception
from durable_plan.language.options import ToolOptions
from durable_plan.language.patterns import matches_patterns
from durable_plan.language.plan import PlanResult
from durable_plan.language.schema import PLAN_TOOL_NAME
from durable_plan.local.agents import agent_steps
from durable_plan.local.hooked import hooked_invoker
from durable_plan.local.runner import run_checked
from durable_plan.run.calls import Invoker
from durable_plan.run.hooks import ToolHooks
from durable_plan.run.references import fit_returned
from durable_plan.run.reuse import (
    Remembered,
    StepMemory,
    repair_hint,
    reusable_tools,
)
from durable_plan.run.summary import failure_text, result_for_model
from durable_plan.strands.carried import (
    PlanToolState,
    carried_interrupt,
    continue_stream,
    stream_state,
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
from durable_plan.strands.plan_tool import PlanFailed, PlanTool, error_result, unwrap_peer_input
from durable_plan.tools.approval import ApprovalPolicy, gated_patterns
from durable_plan.tools.mcp import (
    is_mcp_agent_tool,
    known_tools,
    listed_tools,
    mcp_servers,
    with_mcp_tools,
)
from durable_plan.tools.registry import ToolRegistry

PLUGIN_NAME = "durable-plan"
MAX_RESULTS_KEPT = 64
"""``results`` keeps the last plans of a conversation, not all of them forever."""
INTERRUPTED_REFUSAL = (
    "cannot run a plan while the agent is waiting for a person's answer to an interrupt: "
    "answer the interrupt first"
)

_WORKFLOW_INTERNALS: tuple[type[BaseException], ...] = (
    workflow.NondeterminismError,
    workflow.ReadOnlyContextError,
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
        interrupt = getattr(self._agent, "_interrupt_state", None)
        pending = interrupt if interrupt is not None and interrupt.activated else None
        carried: dict[str, Any] | None = None
        if pending is not None:
            try:
                carried = carried_interrupt(pending.to_dict())
            except ValueError as exc:
                if not workflow.in_workflow():
                    raise
                raise ApplicationError(str(exc), non_retryable=True) from None
        return PlanToolState(
            self.plans_run,
            self.memory.entries(),
            self.memory.forgotten,
            stream=stream_state(self.plan_stream) if self.plan_stream is not None else None,
            interrupt=carried,
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
        """Durably, what the conversation has room for (``temporal.conversation_room``): its
        next model call carries this result, and must still be sent. Past the room, the
        returned results that do not fit are previews, and a final plan ends no turn (the
        model answers from what it has); a final answer, which repeats the results in the
        conversation, is given only when both fit."""
        if agent is None or not workflow.in_workflow():
            return result
        with workflow.unsafe.imports_passed_through():  # deterministic code, loaded once
            from durable_plan.temporal.workflows.conversation_room import (
                fit_tool_result,
                json_bytes,
                result_room,
                result_share,
            )

        use_id = result["toolUseId"]
        answer = self._final_answers.get(use_id)
        alongside = 0
        if answer is not None:
            alongside = json_bytes(answer)
            share = result_share(result_room(agent, use_id))
            if json_bytes(result) + alongside > share:
                del self._final_answers[use_id]
                alongside = 0
        fitted = fit_tool_result(agent, result, shrink=self._previews, alongside=alongside)
        if fitted is not result:
            self._final_answers.pop(use_id, None)
        return fitted

    def _previews(self, result: ToolResult, room: int) -> ToolResult:
        """The plan's report with its returned results within ``room``: whole in ``returns``
        order while they fit, each of the rest a preview saying how the model can still
        reach it."""
        with workflow.unsafe.imports_passed_through():
            from durable_plan.temporal.workflows.conversation_room import json_bytes

        remembered = set(self.memory.ids) if self.memory.enabled else set()

        def omitted(step: str) -> str:
            reach = (
                f"a later plan of this request reads it whole as prior.{step}"
                if step in remembered
                else "to use part of it, run a step that returns only that part"
            )
            return f"too large for this conversation; the step ran ok: {reach}"

        blocks = result["content"]
        at = next((i for i, b in enumerate(blocks) if _report_of(b) is not None), None)
        if at is None:
            return result
        report = _report_of(blocks[at])
        assert report is not None

        def with_returned(returned: dict[str, Any]) -> ToolResult:
            block: ToolResultContent = {"json": {**report, "returned": returned}}
            return {**result, "content": [*blocks[:at], block, *blocks[at + 1 :]]}

        left = room - json_bytes(with_returned({}))
        returned, _ = fit_returned(report["returned"], left, json_bytes, omitted)
        return with_returned(returned)

    async def _submit(self, tool_use: ToolUse, agent: Any) -> ToolResult:
        tool_use_id = tool_use["toolUseId"]
        durable = workflow.in_workflow()
        learned: list[Remembered] = []
        try:
            registry = self._registry_for(agent, durable)
            if self._mcp_servers:
                mcp = await listed_tools(self._mcp_servers, durable=durable)
                registry = with_mcp_tools(registry, mcp)
            catalog = self.catalog(registry, durable=durable)
            memory = self.memory
            prior = memory.ids if memory.enabled else None
            raw = unwrap_peer_input(tool_use["input"])
            checked, catalog = _check(raw, catalog, self.max_steps, durable, prior)
            recall = None
            if memory.enabled:
                reusable = reusable_tools(self.tool_options(registry))
                recall = memory.recall(checked, plan=self.plans_run + 1, reusable=reusable)
            hooks = ToolHooks(agent) if agent is not None else None
            if durable:
                with workflow.unsafe.imports_passed_through():  # in the workflow sandbox
                    from durable_plan.strands.durable import run_child

                result, learned = await run_child(
                    self, checked, registry, catalog, tool_use_id, hooks, agent, recall
                )
            else:
                invoker = _invoker_for(registry, agent)
                if hooks is not None and hooks.active:
                    invoker = hooked_invoker(invoker, hooks, tool_use_id, self.hooked_tools)
                invoker = agent_steps(
                    invoker,
                    registry,
                    catalog.plannable,
                    models=self.models,
                    default_model=getattr(agent, "model", None),
                )
                result = await run_checked(
                    checked, invoker, tool_timeouts=registry.timeouts(), recall=recall
                )
                learned = recall.learned if recall is not None else []
        except PlanRejected as exc:
            if durable:  # a row in the conversation's history says why (``plan_status``)
                with workflow.unsafe.imports_passed_through():
                    from durable_plan.temporal.workflows.plan_status import note_rejection

                note_rejection(tool_use_id, [str(p) for p in exc.problems])
            return error_result(tool_use_id, str(exc))
        except PlanFailed as exc:
            if exc.salvage is None:
                return error_result(tool_use_id, f"The plan failed as a whole: {exc}")
            # The plan did part of its work: the model learns what, and a repair reuses it.
            result, learned = exc.salvage.result(), exc.salvage.remembered
            self._took(result, learned)
            text = f"The plan failed as a whole: {exc}\n" + failure_text(
                result, repair_hint(self.memory, result)
            )
            return error_result(tool_use_id, text)
        except Exception as exc:
            if isinstance(exc, _WORKFLOW_INTERNALS):
                raise  # Temporal's own control flow (nondeterminism, eviction) must escape
            # Whatever went wrong, the model hears it and the conversation goes on.
            text = f"The plan failed as a whole: {describe_exception(exc)}"
            return error_result(tool_use_id, text)
        self._took(result, learned)
        if not result.ok:
            report = result_for_model(result)
            text = failure_text(result, repair_hint(self.memory, result))
            return {
                "toolUseId": tool_use_id,
                "status": "error",
                "content": [{"text": text}, {"json": report}],
            }
        if result.final and self.honor_final:
            self._final_answers[tool_use_id] = json.dumps(result.returned)
        return {
            "toolUseId": tool_use_id,
            "status": "success",
            "content": [{"json": result_for_model(result)}],
        }

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
        if self.plannable == []:
            return []
        durable = workflow.in_workflow()
        registry = self.registry
        if registry is None and self._mcp_servers and not durable and self._agent is not None:
            registry = self._registry_for(self._agent, durable)
        if registry is None:
            return None
        if self._mcp_servers:
            try:
                registry = with_mcp_tools(registry, known_tools(self._mcp_servers, durable=durable))
            except ValueError:
                # Two tools share a name: Strands reads the tool spec on every model call,
                # so the spec goes without the list; a submitted plan gets the error.
                return None
        return self.catalog(registry, durable=durable).plannable

    def described_tools(self) -> tuple[dict[str, str], dict[str, str]]:
        """What the plan tool's description states of each plannable tool: its return shape
        (tool name -> shape) and, for a tool the model is not sent a spec of, its signature
        (tool name -> one line; ``signatures``). A shape stated is one the model reads
        nowhere else (from an annotation, an ``output_schema=`` option or an MCP server's
        ``outputSchema``): a docstring's ``Returns:`` line is in the tool's own description
        already, and the spec's size is paid on every model call. A signature carries its
        tool's shape, whatever declared it.

        Never raises: Strands reads the spec before every model call, and a spec without
        them is still a spec (a submitted plan meets the same error, as a message)."""
        try:
            return self._described_tools()
        except Exception as exc:
            if isinstance(exc, _WORKFLOW_INTERNALS):
                raise
            return {}, {}

    def _described_tools(self) -> tuple[dict[str, str], dict[str, str]]:
        if self.plannable == []:
            return {}, {}
        durable = workflow.in_workflow()
        registry = self.registry
        if registry is None and self._agent is not None and not durable:
            registry = self._registry_for(self._agent, durable)
        if registry is None:
            return {}, {}
        if self._mcp_servers:
            # Two tools sharing a name: the registry's own tools are still described.
            with contextlib.suppress(ValueError):
                registry = with_mcp_tools(registry, known_tools(self._mcp_servers, durable=durable))
        plannable = set(self.catalog(registry, durable=durable).plannable)
        shapes: dict[str, str] = {}
        signatures: dict[str, str] = {}
        for tool in registry:
            if tool.name not in plannable:
                continue
            shape = tool.options.output_schema
            try:  # one tool's odd schema costs its own line, not every tool's
                if self._needs_signature(tool.name):
                    signatures[tool.name] = describe_signature(
                        tool.name, tool.input_schema, tool.description, shape
                    )
                elif shape is not None and docstring_shape(tool.description) != shape:
                    shapes[tool.name] = describe_shape(shape)
            except Exception as exc:
                if isinstance(exc, _WORKFLOW_INTERNALS):
                    raise
                if self._needs_signature(tool.name):
                    signatures[tool.name] = f"{tool.name}(...)"
        return shapes, signatures

    def _needs_signature(self, name: str) -> bool:
        """Whether the model needs ``name``'s signature in the plan tool's description: with
        ``signatures=None``, when the agent does not send the tool's own spec (an MCP tool,
        ``<server>__<tool>``, is sent by its server's client)."""
        if self.signatures is not None:
            return self.signatures
        if self._agent is None:
            return True
        carried = getattr(getattr(self._agent, "tool_registry", None), "registry", {})
        server, sep, _ = name.partition("__")
        return name not in carried and not (sep and server in self._mcp_servers)


def _report_of(block: Any) -> dict[str, Any] | None:
    """The plan's report (``result_for_model``) in a content block of its tool result."""
    report = block.get("json") if isinstance(block, dict) else None
    if isinstance(report, dict) and isinstance(report.get("returned"), dict):
        return report
    return None


def _invoker_for(registry: ToolRegistry, agent: Any) -> Invoker:
    """The registry's tools, called with the agent in their invocation state (as Strands does)."""
    state = {"agent": agent} if agent is not None else {}

    async def invoke(name: str, args: dict[str, Any]) -> Any:
        return await registry.invoke(name, args, state)

    return invoke


def _check(
    raw: Any, catalog: ToolCatalog, max_steps: int, durable: bool, prior: list[str] | None
) -> tuple[CheckedPlan, ToolCatalog]:
    """The checked plan, and the catalogue it was checked with (durably, as recorded)."""
    if not durable:
        return check_plan(raw, catalog=catalog, max_steps=max_steps, prior=prior), catalog
    with workflow.unsafe.imports_passed_through():  # deterministic code, loaded once
        from durable_plan.temporal.workflows.versions import check_as_recorded

    used: list[ToolCatalog] = []

    def check(with_catalog: ToolCatalog) -> CheckedPlan:
        used.append(with_catalog)
        # jsonata imports lazily; inside the workflow sandbox they are passed through.
        with workflow.unsafe.imports_passed_through():
            return check_plan(
                raw, catalog=with_catalog, max_steps=max_steps, durable=True, prior=prior
            )

    # Shapes come from the tools' code, not from history: a plan the conversation ran before
    # a tool declared its shape gets the verdict it had on replay.
    checked = check_as_recorded(check, catalog, shapes_recorded=False)
    return checked, used[-1]
