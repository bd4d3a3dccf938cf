"""The hook relay of durable-plan 0.1.0, kept so that its histories replay.

A conversation or plan recorded by 0.1.0 may still be running when its worker is
upgraded. Its history holds that protocol's commands: the relay was on for every agent
(Strands' own callbacks counted as hooks), the agent's workflow answered in an async
signal handler, found the plan by parsing the asker's workflow id, and each asker waited
with a 5-minute timer. A replay must issue exactly those commands again, so the two sides
keep them here, chosen per workflow run: the agent's workflow by the conversation's one
marker (``patch_level.conversation_patched``, once ``RELAY_V2_PATCH``) at its first plan, a
plan (and its agent steps) by the absence of ``hook_key`` in its input. New runs never take
this path.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow

from durable_plan.language.errors import describe_exception
from durable_plan.run.hooks import ToolHooks
from durable_plan.temporal.messages import HOOK_REPLY_SIGNAL, HOOK_REQUEST_SIGNAL, HookReply

RELAY_V2_PATCH = "hook-relay-v2"
LEGACY_TIMEOUT_S = 300


class LegacyHookRelay:
    """0.1.0's relay, in the agent's workflow: an async handler per request."""

    def __init__(self) -> None:
        self._plans: dict[str, tuple[ToolHooks, frozenset[str]]] = {}

    def register(self, plan_workflow_id: str, hooks: ToolHooks, gated: frozenset[str]) -> None:
        self._plans[plan_workflow_id] = (hooks, gated)

    def unregister(self, plan_workflow_id: str) -> None:
        self._plans.pop(plan_workflow_id, None)

    async def handle(self, raw: dict[str, Any]) -> None:
        reply = await self._decide(raw)
        child = workflow.get_external_workflow_handle(str(raw.get("plan_workflow_id")))
        await child.signal(HOOK_REPLY_SIGNAL, reply)

    async def _decide(self, raw: dict[str, Any]) -> dict[str, Any]:
        asker = str(raw.get("plan_workflow_id"))
        step_id, phase = str(raw.get("step_id")), str(raw.get("phase"))
        entry = self._plans.get(asker) or self._plans.get(asker.rsplit("/agent/", 1)[0])
        if entry is None:
            return _reply(step_id, phase, cancel="the agent's plan has ended")
        hooks, gated = entry
        tool, args = str(raw.get("tool")), dict(raw.get("args") or {})
        tool_use_id = f"{asker}/{step_id}"
        try:
            if phase == "before":
                before = await hooks.before(
                    tool, args, tool_use_id, interrupts_are_approval=tool in gated
                )
                return _reply(step_id, "before", cancel=before.cancel, args=before.args)
            after = await hooks.after(
                tool, args, tool_use_id, bool(raw.get("ok", True)), raw.get("value")
            )
            return _reply(step_id, "after", ok=after.ok, value=after.value)
        except Exception as exc:  # a hook's bug fails the step, never the agent's task
            message = f"a tool hook failed: {describe_exception(exc)}"
            return _reply(step_id, phase, cancel=message, ok=False, value=message)


def _reply(
    step_id: str,
    phase: str,
    *,
    cancel: str | None = None,
    args: dict[str, Any] | None = None,
    ok: bool = True,
    value: Any = None,
) -> dict[str, Any]:
    """0.1.0's reply, field for field."""
    return {
        "step_id": step_id,
        "phase": phase,
        "cancel": cancel,
        "args": args or {},
        "ok": ok,
        "value": value,
    }


def legacy_relay() -> LegacyHookRelay:
    handler = workflow.get_signal_handler(HOOK_REQUEST_SIGNAL)
    relay = getattr(handler, "__self__", None)
    if isinstance(relay, LegacyHookRelay):
        return relay
    relay = LegacyHookRelay()
    workflow.set_signal_handler(HOOK_REQUEST_SIGNAL, relay.handle)
    return relay


def legacy_request(
    call_id: str, tool: str, phase: str, args: dict[str, Any], ok: bool, value: Any
) -> dict[str, Any]:
    """0.1.0's request, as an asker sent it."""
    return {
        "plan_workflow_id": workflow.info().workflow_id,
        "step_id": call_id,
        "tool": tool,
        "phase": phase,
        "args": args,
        "ok": ok,
        "value": value,
    }


async def legacy_ask(
    agent_workflow_id: str,
    request: dict[str, Any],
    replies: dict[tuple[str, str], HookReply],
    refusal: Any,
) -> HookReply:
    """Send 0.1.0's request and wait for the reply with its 5-minute timer."""
    key = (str(request["step_id"]), str(request["phase"]))
    agent = workflow.get_external_workflow_handle(agent_workflow_id)
    await agent.signal(HOOK_REQUEST_SIGNAL, request)
    try:
        await workflow.wait_condition(
            lambda: key in replies, timeout=timedelta(seconds=LEGACY_TIMEOUT_S)
        )
    except TimeoutError:
        message = f"the agent's tool hooks did not answer within {LEGACY_TIMEOUT_S} s"
        reply: HookReply = refusal(key[0], key[1], message)
        return reply
    return replies.pop(key)
