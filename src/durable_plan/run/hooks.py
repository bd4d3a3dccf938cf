"""An agent's tool hooks, run around each plan step as around a direct tool call.

Whoever owns the agent may forbid or rewrite tool calls with Strands hooks
(``BeforeToolCallEvent``: cancel the call, change its input; ``AfterToolCallEvent``:
change its result). A plan step is a tool call the model asked for, so it goes
through the same hooks with the same semantics: a cancelled step fails with the
hook's message, a rewritten input is what the tool gets, a rewritten result is
what later steps see. In a ``TemporalAgent`` this runs in the parent workflow
(where the agent and its hooks live), asked by the plan workflow per step.

Interrupts (a hook asking a person, as Strands' ``HumanInTheLoop`` does) cannot
be answered in the middle of a plan: such a step fails with a message telling
the model to call that tool directly.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from strands.hooks import AfterToolCallEvent, BeforeToolCallEvent
from strands.types.tools import ToolUse

from durable_plan.language.errors import interrupt_message
from durable_plan.run.agent_loop import RoundTracker
from durable_plan.tools.registered_tool import ToolFailed, unwrap_tool_result
from durable_plan.tools.results import tool_result

CANCELLED_DEFAULT = "tool cancelled by user"


@dataclass(frozen=True)
class BeforeCall:
    """What the before-hooks decided: cancel with a message, or run with these arguments."""

    cancel: str | None
    args: dict[str, Any]


@dataclass(frozen=True)
class AfterCall:
    """The step's outcome after the after-hooks: a JSON result, or an error text;
    ``changed`` when a hook replaced it."""

    ok: bool
    value: Any
    changed: bool = False


class ToolHooks:
    """The tool hooks of one agent, runnable for a plan step."""

    def __init__(self, agent: Any) -> None:
        self._agent = agent

    @property
    def active(self) -> bool:
        """True when the agent's owner put a tool-call hook on it (interventions count).

        Strands registers callbacks of its own on every agent (``AgentDelegation`` watches
        every tool call), so "any callback" is not "the owner's hook": those are left out
        by their owner's type. A callback of any other origin counts, to be safe.
        """
        hooks = getattr(self._agent, "hooks", None)
        registered = getattr(hooks, "_registered_callbacks", None)
        if not isinstance(registered, dict):
            return hooks is not None  # unknown layout: run them, to be safe
        for event in (BeforeToolCallEvent, AfterToolCallEvent):
            for entry in registered.get(event) or ():
                if not _internal(getattr(entry, "callback", entry)):
                    return True
        return False

    def _tool(self, name: str) -> Any:
        registry = getattr(self._agent, "tool_registry", None)
        return getattr(registry, "registry", {}).get(name)

    async def before(
        self,
        tool: str,
        args: dict[str, Any],
        tool_use_id: str,
        *,
        interrupts_are_approval: bool = False,
    ) -> BeforeCall:
        """``interrupts_are_approval``: the step's own approval gate answers the person's
        question (durable plans), so an interrupt lets the call proceed to that gate."""
        tool_use: ToolUse = {"toolUseId": tool_use_id, "name": tool, "input": args}
        event, interrupts = await self._agent.hooks.invoke_callbacks_async(
            BeforeToolCallEvent(
                agent=self._agent,
                selected_tool=self._tool(tool),
                tool_use=tool_use,
                invocation_state={"agent": self._agent},
            )
        )
        if interrupts and not interrupts_are_approval:
            return BeforeCall(interrupt_message(tool), args)
        if event.cancel_tool:
            message = event.cancel_tool if isinstance(event.cancel_tool, str) else None
            return BeforeCall(f"cancelled by a hook: {message or CANCELLED_DEFAULT}", args)
        new_input = event.tool_use.get("input")
        return BeforeCall(None, dict(new_input) if isinstance(new_input, dict) else args)

    async def after(
        self, tool: str, args: dict[str, Any], tool_use_id: str, ok: bool, value: Any
    ) -> AfterCall:
        """Run the after-hooks on a step's outcome (``value`` is the result or error text)."""
        tool_use: ToolUse = {"toolUseId": tool_use_id, "name": tool, "input": args}
        result = tool_result(tool_use_id, ok, value)
        original = copy.deepcopy(result)
        event, _ = await self._agent.hooks.invoke_callbacks_async(
            AfterToolCallEvent(
                agent=self._agent,
                selected_tool=self._tool(tool),
                tool_use=tool_use,
                invocation_state={"agent": self._agent},
                result=result,
            )
        )
        if event.result == original:
            return AfterCall(ok, value)
        try:
            return AfterCall(True, unwrap_tool_result(event.result), changed=True)
        except ToolFailed as exc:
            return AfterCall(False, str(exc), changed=True)


def _internal(callback: Any) -> bool:
    """A callback Strands (or this package) registers on every agent, not the owner's."""
    owner = getattr(callback, "__self__", None)
    return owner is not None and isinstance(owner, _internal_types())


def _internal_types() -> tuple[type, ...]:
    try:
        from strands.agent._agent_delegation import AgentDelegation
    except ImportError:  # another Strands version: its callbacks count, to be safe
        return (RoundTracker,)
    return (AgentDelegation, RoundTracker)
