"""The agent's side of durable tool hooks: plan workflows ask, the agent's hooks answer.

A ``TemporalAgent``'s hooks are Python objects in its workflow; a plan's steps
run in a child ``PlanWorkflow``. Before and after each step the child signals
the agent's workflow (``HOOK_REQUEST_SIGNAL``); the relay registered here runs
the agent's ``BeforeToolCallEvent`` / ``AfterToolCallEvent`` hooks in workflow
code, exactly where they run for a direct tool call, and signals the decision
back (``HOOK_REPLY_SIGNAL``). Only agents that have tool hooks pay for it.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow

from durable_plan.hooks import ToolHooks
from durable_plan.local import describe_exception
from durable_plan.temporal.messages import (
    HOOK_REPLY_SIGNAL,
    HOOK_REQUEST_SIGNAL,
    HookReply,
    HookRequest,
)

HOOK_TIMEOUT_S = 300
"""A step waits this long for the agent's hooks; then it fails, saying so."""


class HookRelay:
    """One per agent workflow: which plan workflow's steps go through which agent's hooks."""

    def __init__(self) -> None:
        self._plans: dict[str, tuple[ToolHooks, frozenset[str]]] = {}

    def register(self, plan_workflow_id: str, hooks: ToolHooks, gated: frozenset[str]) -> None:
        """``gated`` tools pause for a person in the plan itself, so their interrupts are
        that approval (Strands' ``HumanInTheLoop`` interrupts from a before-hook)."""
        self._plans[plan_workflow_id] = (hooks, gated)

    def unregister(self, plan_workflow_id: str) -> None:
        self._plans.pop(plan_workflow_id, None)

    async def handle(self, raw: dict[str, Any]) -> None:
        # Decoded as a plain dict: the agent's workflow runs in the sandbox, where the
        # pydantic converter cannot resolve this module's dataclasses by name.
        request = HookRequest(**raw)
        reply = await self._decide(request)
        child = workflow.get_external_workflow_handle(request.plan_workflow_id)
        await child.signal(HOOK_REPLY_SIGNAL, reply)

    async def _decide(self, request: HookRequest) -> HookReply:
        # An agent step's loop (<plan id>/agent/<step>) asks on behalf of its plan.
        asker = request.plan_workflow_id
        entry = self._plans.get(asker) or self._plans.get(asker.rsplit("/agent/", 1)[0])
        if entry is None:
            return HookReply(request.step_id, request.phase, cancel="the agent's plan has ended")
        hooks, gated = entry
        tool_use_id = f"{request.plan_workflow_id}/{request.step_id}"
        try:
            if request.phase == "before":
                before = await hooks.before(
                    request.tool,
                    request.args,
                    tool_use_id,
                    interrupts_are_approval=request.tool in gated,
                )
                return HookReply(request.step_id, "before", cancel=before.cancel, args=before.args)
            after = await hooks.after(
                request.tool, request.args, tool_use_id, request.ok, request.value
            )
            return HookReply(request.step_id, "after", ok=after.ok, value=after.value)
        except Exception as exc:  # a hook's bug fails the step, never the agent's workflow task
            message = f"a tool hook failed: {describe_exception(exc)}"
            return HookReply(
                request.step_id, request.phase, cancel=message, ok=False, value=message
            )


def hook_relay() -> HookRelay:
    """The relay of the current workflow, installing its signal handler on first use."""
    handler = workflow.get_signal_handler(HOOK_REQUEST_SIGNAL)
    relay = getattr(handler, "__self__", None)
    if isinstance(relay, HookRelay):
        return relay
    relay = HookRelay()
    workflow.set_signal_handler(HOOK_REQUEST_SIGNAL, relay.handle)
    return relay


class HookAsker:
    """The plan side: ask the agent's workflow to run its tool hooks, and wait for the reply.

    Used by ``PlanWorkflow`` for each step and by ``AgentStepWorkflow`` for each tool
    call of its loop; each forwards its ``HOOK_REPLY_SIGNAL`` to ``receive``.
    """

    def __init__(self) -> None:
        self._replies: dict[tuple[str, str], HookReply] = {}
        self.answered = 0

    def receive(self, reply: HookReply) -> None:
        self._replies[(reply.step_id, reply.phase)] = reply

    async def ask(
        self,
        agent_workflow_id: str,
        step_id: str,
        tool: str,
        phase: str,
        args: dict[str, Any],
        ok: bool = True,
        value: Any = None,
    ) -> HookReply:
        me = workflow.info().workflow_id
        key = (step_id, phase)
        agent = workflow.get_external_workflow_handle(agent_workflow_id)
        await agent.signal(
            HOOK_REQUEST_SIGNAL, HookRequest(me, step_id, tool, phase, args, ok, value)
        )
        try:
            await workflow.wait_condition(
                lambda: key in self._replies, timeout=timedelta(seconds=HOOK_TIMEOUT_S)
            )
        except TimeoutError:
            message = f"the agent's tool hooks did not answer within {HOOK_TIMEOUT_S} s"
            return HookReply(step_id, phase, cancel=message, ok=False, value=message)
        finally:
            self.answered += 1
        return self._replies.pop(key)
