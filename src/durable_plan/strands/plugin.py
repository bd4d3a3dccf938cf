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
import dataclasses
import json
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from strands import Agent
from strands.hooks import AfterToolsEvent, BeforeInvocationEvent
from strands.plugins import Plugin
from strands.types.tools import AgentTool, ToolGenerator, ToolResult, ToolSpec, ToolUse
from temporalio import workflow
from temporalio.exceptions import ApplicationError, ChildWorkflowError

from durable_plan.check import CheckedPlan, ToolCatalog, check_plan
from durable_plan.language.errors import PlanRejected, describe_exception
from durable_plan.language.options import ToolOptions
from durable_plan.language.patterns import matches_patterns
from durable_plan.language.plan import DEFAULT_MAX_STEPS, PlanResult
from durable_plan.language.schema import PLAN_TOOL_NAME, plan_input_schema, plan_tool_description
from durable_plan.local.agents import agent_steps
from durable_plan.local.hooked import hooked_invoker
from durable_plan.local.runner import run_checked
from durable_plan.run.calls import Invoker
from durable_plan.run.hooks import ToolHooks
from durable_plan.run.reuse import (
    DEFAULT_MAX_BYTES,
    REMEMBERED_KEY,
    Recall,
    Remembered,
    StepMemory,
    repair_hint,
    reusable_tools,
)
from durable_plan.run.summary import failure_text, result_for_model
from durable_plan.temporal.client import checked_input
from durable_plan.temporal.hook_relay import RelayDesk, hook_inbox
from durable_plan.temporal.ids import child_workflow_id
from durable_plan.temporal.legacy_relay import RELAY_V2_PATCH, LegacyHookRelay, legacy_relay
from durable_plan.temporal.messages import (
    DEFAULT_MAX_HISTORY_BYTES,
    PlanInput,
    failure_message,
)
from durable_plan.temporal.recovery import Salvage, recover
from durable_plan.temporal.ui_summary import plan_details, plan_summary
from durable_plan.temporal.workflow import PLAN_WORKFLOW_NAME
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
DEFAULT_HOOK_RELAY_BYTES = 16 * 1024 * 1024
"""What one plan's requests to the agent's tool hooks may add to the conversation's history."""
ONE_AT_A_TIME_PATCH = "plans-one-at-a-time"
"""Conversations whose plans run one after another (earlier ones ran them side by side)."""
RECOVER_LEDGER_PATCH = "recover-ledger"
"""Conversations that read back an ended plan's ledger (earlier ones did not)."""
CONVERSATION_MAX_HISTORY_BYTES = DEFAULT_MAX_HISTORY_BYTES
"""A conversation past this starts no more plans (Temporal terminates it at 50 MiB)."""
INTERRUPTED_REFUSAL = (
    "cannot run a plan while the agent is waiting for a person's answer to an interrupt: "
    "answer the interrupt first"
)

_WORKFLOW_INTERNALS: tuple[type[BaseException], ...] = (
    workflow.NondeterminismError,
    workflow.ReadOnlyContextError,
)


class WorkflowPlanPlugin(Plugin):
    """Adds ``submit_workflow_plan`` to an ``Agent`` or a ``TemporalAgent``.

    Args:
        plannable: tool-name patterns that may appear in plans, e.g. ``["*",
            "!delete_files"]`` (later patterns win, ``*`` matches anywhere). Required
            when the agent has interventions, so a human approval is never skipped.
        max_steps: the step limit per plan.
        honor_final: end the turn with a final plan's results, without another model
            call (default). ``False`` asks the model once more, for prose.
        registry: the tools as a ``ToolRegistry``; required inside a ``TemporalAgent``,
            where plan steps run as the registry's activities. On a plain agent the
            agent's own tools are used when it is omitted. Either way the agent's MCP
            servers (``MCPClient``, ``TemporalMCPClient``) add their tools as
            ``<server>__<tool>`` (``durable_plan.tools.mcp``).
        task_queue: task queue of the plan workflow and its activities (default: the
            parent workflow's).
        approval_required: tool-name patterns that need a person's approval.
        models: for in-process agent steps, the Strands models (or factories) a step may
            name in ``model``; a step naming none uses the agent's model. Durably, models
            are the names registered through ``StrandsPlugin(models=...)``.
        remember_steps, remember_bytes: the bounds of the conversation's memory of steps
            that ended ok, which later plans reuse and read as ``prior.<id>``
            (``durable_plan.run.reuse``); past them the least recently used are forgotten.
            0 turns the memory off.
        remember_across_turns: keep that memory from one invocation of the agent (one
            user request) to the next. Off by default: a repair happens within the request
            that failed, and a user who asks again ("attack again") means it to run again.
        never_reuse: tool-name patterns whose steps always run again (any tool, MCP tools
            included); the registry's ``reuse=False`` does the same per tool.
        agent_models: model-name patterns an agent step may name in ``model`` (the default
            model, the agent's own, needs no name); in-process the names of ``models`` are
            allowed too. An agent step naming any other model is refused at check time.
        hooked_tools: tool-name patterns whose plan steps pass the agent's tool hooks
            (default: every tool). Durably each such step sends its arguments and result
            through the conversation's history; narrow it to the tools your hooks act on.
        hook_relay_bytes: durably, the most one plan may add to the conversation's history
            for its hooks (requests carry each step's arguments and result); a step past
            it fails, saying so.
    """

    name = PLUGIN_NAME

    def __init__(
        self,
        plannable: Sequence[str] | None = None,
        *,
        max_steps: int = DEFAULT_MAX_STEPS,
        honor_final: bool = True,
        registry: ToolRegistry | None = None,
        task_queue: str | None = None,
        approval_required: Sequence[str] = (),
        max_result_bytes: int | None = None,
        models: Mapping[str, Any] | None = None,
        remember_steps: int = 64,
        remember_bytes: int = DEFAULT_MAX_BYTES,
        plan_options: Mapping[str, Any] | None = None,
        remember_across_turns: bool = False,
        never_reuse: Sequence[str] = (),
        agent_models: Sequence[str] = (),
        hooked_tools: Sequence[str] | None = None,
        hook_relay_bytes: int = DEFAULT_HOOK_RELAY_BYTES,
    ) -> None:
        super().__init__()
        self.plan_options = durable_plan_options(plan_options)
        """Extra fields of each durable plan's ``PlanInput`` (``store_over_bytes``,
        ``return_stored``, ``keep_stored_results``, ``retry_initial_interval_s``, ...)."""
        self.plannable = list(plannable) if plannable is not None else None
        self.max_steps = max_steps
        self.honor_final = honor_final
        self.registry = registry
        self.task_queue = task_queue
        self.approval_required = list(approval_required)
        self.max_result_bytes = max_result_bytes
        self.models = dict(models or {})
        self._final_answers: dict[str, str] = {}
        self.results: deque[PlanResult] = deque(maxlen=MAX_RESULTS_KEPT)
        self.plans_run = 0
        self.memory = StepMemory(remember_steps, remember_bytes)
        """Steps that ended ok in this conversation's plans: durably, part of the agent
        workflow's state (rebuilt from the plan results in its history on replay)."""
        self.remember_across_turns = remember_across_turns
        self.never_reuse = list(never_reuse)
        self.agent_models = list(agent_models)
        self.hooked_tools = list(hooked_tools) if hooked_tools is not None else None
        self.hook_relay_bytes = hook_relay_bytes
        self._one_at_a_time: asyncio.Lock | None = None
        """Plans of one agent run one after another, even when the model asks for two in one
        turn: each gets its own number and sees what the one before it ran."""
        self._gate_patterns: list[str] = []
        self._agent: Any = None
        self._mcp_servers: dict[str, Any] = {}
        """The agent's MCP servers by name: their tools join each plan's catalogue as
        ``<server>__<tool>`` (``durable_plan.tools.mcp``)."""

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
        agent.hooks.add_callback(AfterToolsEvent, self._end_turn_with_final_plan)
        agent.hooks.add_callback(BeforeInvocationEvent, self._new_request)

    def _new_request(self, event: BeforeInvocationEvent) -> None:
        """A new invocation of the agent: a new request, whose plans must run again."""
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
            return _error(tool_use_id, INTERRUPTED_REFUSAL)
        if workflow.in_workflow() and not workflow.patched(ONE_AT_A_TIME_PATCH):
            return await self._submit(tool_use, agent)  # as recorded: plans side by side
        if self._one_at_a_time is None:
            self._one_at_a_time = asyncio.Lock()
        async with self._one_at_a_time:
            return await self._submit(tool_use, agent)

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
            checked = _check(raw, catalog, self.max_steps, durable, prior)
            recall = None
            if memory.enabled:
                reusable = reusable_tools(self.tool_options(registry))
                recall = memory.recall(checked, plan=self.plans_run + 1, reusable=reusable)
            hooks = ToolHooks(agent) if agent is not None else None
            if durable:
                result, learned = await self._run_child(
                    checked, registry, catalog, tool_use_id, hooks, agent, recall
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
            return _error(tool_use_id, str(exc))
        except _PlanFailed as exc:
            if exc.salvage is None:
                return _error(tool_use_id, f"The plan failed as a whole: {exc}")
            # The plan did part of its work: the model learns what, and a repair reuses it.
            result, learned = exc.salvage.result(), exc.salvage.remembered
            self._took(result, learned)
            text = f"The plan failed as a whole: {exc}\n" + failure_text(
                result, repair_hint(self.memory, result)
            )
            return {"toolUseId": tool_use_id, "status": "error", "content": [{"text": text}]}
        except Exception as exc:
            if isinstance(exc, _WORKFLOW_INTERNALS):
                raise  # Temporal's own control flow (nondeterminism, eviction) must escape
            # Whatever went wrong, the model hears it and the conversation goes on.
            return _error(tool_use_id, f"The plan failed as a whole: {describe_exception(exc)}")
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
            raise _PlanFailed(
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

    async def _run_child(
        self,
        checked: CheckedPlan,
        registry: ToolRegistry,
        catalog: ToolCatalog,
        tool_use_id: str,
        hooks: ToolHooks | None,
        agent: Any,
        recall: Recall | None,
    ) -> tuple[PlanResult, list[Remembered]]:
        """The plan as a child workflow: its result, and the steps it ran ok (to remember).

        While it runs, this body also answers its requests to the agent's tool hooks
        (``hook_relay``), so nothing of the plan outlives it in this workflow."""
        parent = workflow.info()
        room = CONVERSATION_MAX_HISTORY_BYTES - parent.get_current_history_size()
        if room <= 0:
            raise _PlanFailed(
                f"this conversation's history is {parent.get_current_history_size() // 2**20} "
                "MiB, near Temporal's 50 MiB limit for one workflow: no more plans can run in "
                "it; answer with what you have, and let the user start a new conversation"
            )
        # Only what this agent may plan travels: agent steps choose among these too.
        plannable = set(catalog.plannable)
        tools = {n: o for n, o in self.tool_options(registry).items() if n in plannable}
        limits: dict[str, Any] = dict(self.plan_options)
        if self.max_result_bytes is not None:
            limits["max_result_bytes"] = self.max_result_bytes
        child_id = child_workflow_id(parent.workflow_id, "plan", tool_use_id)
        desk: RelayDesk | None = None
        legacy: LegacyHookRelay | None = None
        gated = frozenset(n for n, o in tools.items() if o.requires_approval)
        if not workflow.patched(RELAY_V2_PATCH):
            # A conversation recorded by 0.1.0: its history speaks that relay (legacy_relay).
            if hooks is not None and hooks.any_callback:
                legacy = legacy_relay()
                legacy.register(child_id, hooks, gated)
                limits["hooks_workflow_id"] = parent.workflow_id
        elif hooks is not None and hooks.active:
            # Each step passes the agent's tool hooks, run here in the agent's workflow.
            desk = hook_inbox().open(child_id, hooks, gated)
            limits["hooks_workflow_id"] = parent.workflow_id
            limits["hook_key"] = child_id
            limits["hook_bytes"] = min(self.hook_relay_bytes, room)
            limits["hooked_tools"] = self.hooked_tools
        if recall is not None:
            limits["memory"] = recall.to_wire()
        request = checked_input(
            checked,
            tools,
            max_steps=self.max_steps,
            task_queue=self.task_queue,
            default_model=getattr(getattr(agent, "model", None), "_model_name", None),
            allowed_models=list(self.agent_models),
            **limits,
        )
        task_queue = self.task_queue or parent.task_queue
        handle = await workflow.start_child_workflow(
            PLAN_WORKFLOW_NAME,
            request.to_wire(),
            id=child_id,
            task_queue=task_queue,
            result_type=dict,
            static_summary=plan_summary(checked),
            static_details=plan_details(checked),
        )
        waiting = asyncio.ensure_future(handle)
        try:
            if desk is not None:
                await desk.serve(waiting)
            raw = await waiting
        except ChildWorkflowError as exc:
            salvage = None
            if legacy is None and workflow.patched(RECOVER_LEDGER_PATCH):
                salvage = await _salvage(exc, child_id, handle.first_execution_run_id, task_queue)
            raise _PlanFailed(failure_message(exc), salvage) from None
        finally:
            if not waiting.done():
                waiting.cancel()
            if legacy is not None:
                legacy.unregister(child_id)
        learned = [Remembered.from_wire(e) for e in raw.pop(REMEMBERED_KEY, None) or []]
        return PlanResult.model_validate(raw), learned


async def _salvage(
    exc: ChildWorkflowError, child_id: str, run_id: str | None, task_queue: str
) -> Salvage | None:
    """What a plan that ended as a whole had done: from its failure's details when it
    failed in its own code, else (cancelled, terminated, timed out) read from its history."""
    cause = exc.cause
    if isinstance(cause, ApplicationError):
        for detail in cause.details:
            salvage = Salvage.from_wire(detail)
            if salvage is not None:
                return salvage
        return None
    return await recover(child_id, run_id, task_queue)


class PlanTool(AgentTool):
    """The ``submit_workflow_plan`` tool, with an explicit schema and teaching description."""

    def __init__(self, plugin: WorkflowPlanPlugin) -> None:
        super().__init__()
        self._plugin = plugin
        self._spec: ToolSpec | None = None
        self._described: list[str] | None = None

    @property
    def tool_name(self) -> str:
        return PLAN_TOOL_NAME

    @property
    def tool_type(self) -> str:
        return "plan"

    @property
    def tool_spec(self) -> ToolSpec:
        if self._spec is not None and not self._plugin._mcp_servers:
            return self._spec
        # MCP servers list their tools as the conversation goes: describe them afresh.
        plannable = self._plugin.described_plannable()
        if self._spec is None or plannable != self._described:
            self._described = plannable
            self._spec = {
                "name": PLAN_TOOL_NAME,
                "description": plan_tool_description(
                    plannable, self._plugin.max_steps, mcp_servers=sorted(self._plugin._mcp_servers)
                ),
                "inputSchema": {"json": plan_input_schema()},
            }
        return self._spec

    async def stream(
        self, tool_use: ToolUse, invocation_state: dict[str, Any], **kwargs: Any
    ) -> ToolGenerator:
        yield await self._plugin.submit(tool_use, invocation_state.get("agent"))


class _PlanFailed(Exception):
    """The plan as a whole failed (child workflow failure, misconfiguration); ``salvage``:
    what it had done, when that could be found."""

    def __init__(self, message: str, salvage: Salvage | None = None) -> None:
        super().__init__(message)
        self.salvage = salvage


def unwrap_peer_input(raw: Any) -> Any:
    """Accept ``{"plan": {...}}``, the input shape of strands-plan-tool, as the plan itself.

    Prompts and transcripts written for that tool keep working. Only the exact
    one-key shape is unwrapped, so a plan's own fields are never guessed at.
    """
    if isinstance(raw, Mapping) and set(raw) == {"plan"}:
        inner = raw["plan"]
        if isinstance(inner, Mapping | str):
            return inner
    return raw


def _invoker_for(registry: ToolRegistry, agent: Any) -> Invoker:
    """The registry's tools, called with the agent in their invocation state (as Strands does)."""
    state = {"agent": agent} if agent is not None else {}

    async def invoke(name: str, args: dict[str, Any]) -> Any:
        return await registry.invoke(name, args, state)

    return invoke


def _check(
    raw: Any, catalog: ToolCatalog, max_steps: int, durable: bool, prior: list[str] | None
) -> CheckedPlan:
    if not durable:
        return check_plan(raw, catalog=catalog, max_steps=max_steps, prior=prior)
    # jsonata imports lazily; inside the workflow sandbox those imports are passed through.
    with workflow.unsafe.imports_passed_through():
        return check_plan(raw, catalog=catalog, max_steps=max_steps, durable=True, prior=prior)


def _error(tool_use_id: str, text: str) -> ToolResult:
    return {"toolUseId": tool_use_id, "status": "error", "content": [{"text": text}]}


_PLUGIN_SETS = frozenset(
    {
        "plan",
        "tools",
        "max_steps",
        "task_queue",
        "default_model",
        "memory",
        "hooks_workflow_id",
        "hook_key",
        "hook_bytes",
        "hooked_tools",
        "allowed_models",
    }
)
"""``PlanInput`` fields the plugin fills itself for each plan: not plan options."""


def durable_plan_options(options: Mapping[str, Any] | None) -> dict[str, Any]:
    """``plan_options`` checked when the plugin is built, so a misspelt option is an error
    then, not a child workflow that fails later: each key must be a ``PlanInput`` field
    the plugin does not set itself."""
    allowed = sorted(f.name for f in dataclasses.fields(PlanInput) if f.name not in _PLUGIN_SETS)
    given = dict(options or {})
    unknown = sorted(set(given) - set(allowed))
    if unknown:
        raise ValueError(
            f"plan_options: unknown option(s) {', '.join(unknown)}; "
            f"the options are: {', '.join(allowed)}"
        )
    return given
