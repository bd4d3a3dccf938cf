"""Agent steps in-process: a plain Strands ``Agent`` per step, over the plan's own tools.

The runner stays ignorant of step kinds: ``agent_steps(invoke, ...)`` wraps
an invoker so that a call of the reserved tool ``agent`` runs the loop, and
every tool the loop calls goes through the same ``invoke`` as plan steps do
(the registry, the agent's hooks, the same timeouts). Tool failures go back
to the model as error results; they do not fail the step.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from strands import Agent
from strands.models import Model
from strands.types.tools import ToolGenerator, ToolUse

from durable_plan.language.agent_step import AGENT_TOOL, agent_step_spec
from durable_plan.language.errors import StepFailure
from durable_plan.local.pauses import current_gate
from durable_plan.local.saved_plans import nested_catalog, saved_plans
from durable_plan.run.agent_loop import RoundTracker, run_agent_step, system_prompt
from durable_plan.run.breakpoints import SKIPPED_REASON
from durable_plan.run.calls import Invoker
from durable_plan.run.events import current_step
from durable_plan.tools.deadline import within
from durable_plan.tools.named_tool import NamedTool
from durable_plan.tools.registry import Tool, ToolRegistry
from durable_plan.tools.results import tool_result

ModelSource = Model | Callable[[], Model]


def agent_steps(
    invoke: Invoker,
    registry: ToolRegistry,
    plannable: Sequence[str],
    *,
    models: Mapping[str, ModelSource] | None = None,
    default_model: ModelSource | None = None,
    around: Callable[[Invoker], Invoker] | None = None,
) -> Invoker:
    """``invoke``, plus the ``agent`` step kind run by a Strands ``Agent``.

    ``around``: what every tool call passes (the agent's tool hooks, ``local.hooked``),
    wrapped around saved plans too: a ``plan__*`` call is a tool call like any other.

    ``models`` maps the names a step may give in ``model`` to Strands models (or
    factories); ``default_model`` serves steps that name none (the parent
    agent's model, in the plugin).
    """
    named = dict(models or {})
    models_named = list(named) if models else None

    def model_for(name: str | None) -> Model:
        source = named.get(name) if name is not None else default_model
        if source is None:
            known = ", ".join(sorted(named)) or "none"
            raise StepFailure(
                f"agent step: no model named {name!r} (known: {known})"
                if name is not None
                else "agent step: no model given and no default model"
            )
        return source() if callable(source) and not isinstance(source, Model) else source

    # Saved plans (``plan__*``) run nested, their calls through this whole invoker.
    catalog = nested_catalog(
        registry, list(plannable), default_model=default_model is not None, models=models_named
    )
    invoke = saved_plans(invoke, catalog, lambda: invoke_with_agents, registry.timeouts())
    if around is not None:
        invoke = around(invoke)

    async def invoke_with_agents(tool: str, args: dict[str, Any]) -> Any:
        if tool != AGENT_TOOL:
            return await invoke(tool, args)
        spec = agent_step_spec(args, plannable)
        events, step_id = current_step()
        tracker = RoundTracker(events, step_id)
        agent = Agent(
            model=model_for(spec.model),
            tools=[InvokerTool(registry.get(name), invoke, tracker) for name in spec.tools],
            system_prompt=system_prompt(spec.system_prompt),
            callback_handler=None,
        )
        return await run_agent_step(
            agent, spec.prompt, spec.output_schema, spec.max_iterations, tracker=tracker
        )

    return invoke_with_agents


class InvokerTool(NamedTool):
    """A plan tool as the loop's model sees it; calls go through the plan's invoker, under
    the tool owner's timeout as a plan step's call is (``tools.deadline``)."""

    def __init__(self, tool: Tool, invoke: Invoker, tracker: RoundTracker | None = None) -> None:
        super().__init__(tool.name, tool.tool_spec_json)
        self._invoke = invoke
        self._timeout_s = tool.options.timeout_s
        self._tracker = tracker  # names the call's path (a breakpoint may pause it)

    async def stream(
        self, tool_use: ToolUse, invocation_state: dict[str, Any], **kwargs: Any
    ) -> ToolGenerator:
        args = dict(tool_use.get("input") or {})
        gate = current_gate()
        path = self._tracker.call_path(tool_use) if self._tracker is not None else None
        action = None
        if gate is not None and path is not None:
            action = await gate.check(path, self._name, args, None)
        if action == "skip":
            text = f"{SKIPPED_REASON}: a person skipped this call"  # as durably
            yield tool_result(tool_use["toolUseId"], False, text)
            return
        # A failure goes back into the loop, for the model to route around.
        ok, value, _ms = await within(lambda: self._invoke(self._name, args), self._timeout_s)
        yield tool_result(tool_use["toolUseId"], ok, value)
