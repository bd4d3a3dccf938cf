"""Durable tool hooks: a plan asks, the agent's hooks answer in the agent's own workflow.

A ``TemporalAgent``'s hooks are Python objects in its workflow; a plan's steps
run in a child ``PlanWorkflow`` (and an agent step's tool calls in a grandchild).
So before and after each such call the asking workflow signals the agent's
workflow (``HOOK_REQUEST_SIGNAL``), the hooks run there in workflow code, as for
a direct call, and the decision comes back (``HOOK_REPLY_SIGNAL``).

The protocol, and why it is shaped so:

* Only agents whose owner wrote tool hooks pay for it (``ToolHooks.active``), and
  only for the tools the owner's ``hooked_tools`` patterns name.
* The requests are answered by the plan tool's own body, which awaits the plan
  anyway (``RelayDesk.serve``), not by an async signal handler: when the plan
  ends the body stops answering, cancels what is under way and returns, so no
  handler is ever left running when the conversation completes or continues as
  new, and nothing signals a workflow that has already closed. A reply to an
  asker that closed meanwhile (an agent step past its timeout) is dropped.
* Requests name their plan by the key the plugin registered (``hook_key``),
  never by parsing a workflow id (child ids are shortened when long).
* Every request is a payload in two histories (the asker's command, the agent's
  signal event). The asker counts it in its own ``Admission`` (bytes per task,
  history) and in the plan's ``hook_bytes``, the room the plugin found in the
  conversation's history when it started the plan; a call whose values would
  not fit fails with a message saying so, never a terminated workflow. The
  "after" request carries the result, not the arguments again (the relay kept
  them from "before"), and a reply carries a value only when a hook changed it.
* No timer: a request is answered while the plan runs (its parent awaits it),
  and a plan whose conversation is gone is closed with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from temporalio import workflow
from temporalio.common import RawValue
from temporalio.exceptions import FailureError

from durable_plan.language.errors import describe_exception
from durable_plan.language.patterns import matches_patterns
from durable_plan.run.hooks import ToolHooks
from durable_plan.temporal.wire.hook_messages import (
    HOOK_REPLY_SIGNAL,
    HOOK_REQUEST_SIGNAL,
    HookReply,
    HookRequest,
)
from durable_plan.temporal.wire.messages import json_payload
from durable_plan.temporal.wire.plan_settings import (
    DEFAULT_MAX_HISTORY_BYTES,
    DEFAULT_MAX_RESULT_BYTES,
    DEFAULT_MAX_TASK_BYTES,
    HookRelay,
)
from durable_plan.temporal.workflows.admission import Admission, json_size

_WORKFLOW_INTERNALS: tuple[type[BaseException], ...] = (
    workflow.NondeterminismError,
    workflow.ReadOnlyContextError,
)


# -- the agent's side -------------------------------------------------------------------


class RelayDesk:
    """One plan's requests to the agent's hooks, answered while the plan runs."""

    def __init__(self, inbox: HookInbox, key: str, hooks: ToolHooks, gated: frozenset[str]):
        self._inbox = inbox
        self.key = key
        self._hooks = hooks
        self._gated = gated
        self._pending: deque[HookRequest] = deque()
        self._args: dict[tuple[str, str], dict[str, Any]] = {}
        self.answered = 0

    def put(self, request: HookRequest) -> None:
        self._pending.append(request)

    async def serve(self, plan: asyncio.Task[Any]) -> None:
        """Answer requests until ``plan`` (the task awaiting the plan's workflow) is done."""
        answering: list[asyncio.Task[None]] = []
        try:
            while True:
                await workflow.wait_condition(lambda: bool(self._pending) or plan.done())
                if plan.done():
                    return
                while self._pending:
                    answering.append(asyncio.create_task(self._answer(self._pending.popleft())))
                answering = [t for t in answering if not t.done()]
        finally:
            for task in answering:
                task.cancel()
            if answering:
                await asyncio.gather(*answering, return_exceptions=True)
            self._inbox.close(self.key)
            # A reply that waited for room may have left the inbox's pacer timer pending:
            # the conversation must not complete before it fires (``Admission.settle``). The
            # conversation goes on after this: a cancel meanwhile is its own, not absorbed.
            await self._inbox.admission.settle(absorb_cancel=False)

    async def _answer(self, request: HookRequest) -> None:
        try:
            reply = await self._decide(request)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a hook's bug fails the call, never the agent's task
            if isinstance(exc, _WORKFLOW_INTERNALS):
                raise
            reply = _refusal(request, f"a tool hook failed: {describe_exception(exc)}")
        verdict = await self._inbox.admission.enter(json_size(_wire(reply)), starts=False)
        if verdict != "go":
            reply = _refusal(
                request,
                "the agent's tool hooks cannot answer: the conversation's history is near "
                "Temporal's limit; start a new conversation",
            )
        # The asker may have closed meanwhile (an agent step past its timeout): nobody waits.
        with contextlib.suppress(FailureError):
            await workflow.get_external_workflow_handle(request.reply_to).signal(
                HOOK_REPLY_SIGNAL, reply
            )
        self.answered += 1

    async def _decide(self, request: HookRequest) -> HookReply:
        tool_use_id = f"{self.key}/{request.call_id}"
        slot = (request.reply_to, request.call_id)
        if request.phase == "before":
            args = dict(request.args or {})
            before = await self._hooks.before(
                request.tool,
                copy.deepcopy(args),  # hooks may change the input in place
                tool_use_id,
                interrupts_are_approval=request.tool in self._gated,
            )
            if before.cancel is not None:
                return HookReply(request.call_id, "before", cancel=before.cancel)
            self._args[slot] = before.args
            changed = before.args != args
            return HookReply(request.call_id, "before", args=before.args if changed else None)
        args = self._args.pop(slot, {})
        after = await self._hooks.after(request.tool, args, tool_use_id, request.ok, request.value)
        if not after.changed:
            return HookReply(request.call_id, "after", ok=request.ok)
        return HookReply(request.call_id, "after", ok=after.ok, value=after.value, changed=True)


class HookInbox:
    """The agent workflow's one signal handler for hook requests: routes each to its plan.

    The handler only files the request (a plain, synchronous function); the plan
    tool's body answers it. A request for a plan that is no longer served (it ended)
    is dropped: nobody waits for its answer.
    """

    def __init__(self) -> None:
        self._desks: dict[str, RelayDesk] = {}
        self.dropped = 0
        self.admission = Admission(
            max_task_bytes=DEFAULT_MAX_TASK_BYTES,
            max_history_bytes=DEFAULT_MAX_HISTORY_BYTES,
            max_result_bytes=DEFAULT_MAX_RESULT_BYTES,
        )

    def open(self, key: str, hooks: ToolHooks, gated: frozenset[str]) -> RelayDesk:
        desk = RelayDesk(self, key, hooks, gated)
        self._desks[key] = desk
        return desk

    def close(self, key: str) -> None:
        self._desks.pop(key, None)

    def handle(self, raw: dict[str, Any]) -> None:
        # Decoded as a plain dict: the agent's workflow runs in the sandbox, where the
        # pydantic converter cannot resolve this module's dataclasses by name.
        try:
            request = HookRequest.from_wire(raw)
        except (TypeError, ValueError):
            self.dropped += 1
            return
        desk = self._desks.get(request.key)
        if desk is None:
            self.dropped += 1
            return
        desk.put(request)


def hook_inbox() -> HookInbox:
    """The current workflow's inbox, installing its signal handler on first use."""
    handler = workflow.get_signal_handler(HOOK_REQUEST_SIGNAL)
    inbox = getattr(handler, "__self__", None)
    if isinstance(inbox, HookInbox):
        return inbox
    inbox = HookInbox()
    workflow.set_signal_handler(HOOK_REQUEST_SIGNAL, inbox.handle)
    return inbox


def refusal(call_id: str, phase: str, message: str) -> HookReply:
    """The reply that fails the call with ``message``: before it runs, or after."""
    if phase == "before":
        return HookReply(call_id, phase, cancel=message)
    return HookReply(call_id, phase, ok=False, value=message, changed=True)


def _refusal(request: HookRequest, message: str) -> HookReply:
    return refusal(request.call_id, request.phase, message)


def _wire(reply: HookReply) -> dict[str, Any]:
    return {"args": reply.args, "value": reply.value, "cancel": reply.cancel}


# -- the asking side (PlanWorkflow, AgentStepWorkflow) ------------------------------------


@dataclass(frozen=True)
class HookRoute:
    """Where and for which tools a plan's calls pass the agent's tool hooks."""

    agent_workflow_id: str
    key: str
    """The name the agent's relay knows the plan by (``HookRelay.hook_key``)."""
    tools: tuple[str, ...] = ("*",)
    budget: int | None = None
    """Bytes of requests the conversation's history has room for (None: not counted)."""

    def covers(self, tool: str) -> bool:
        return matches_patterns(tool, list(self.tools))

    @classmethod
    def of(cls, relay: HookRelay, plan_id: str) -> HookRoute | None:
        """The route an input's relay record names (None: no hooks to pass); ``plan_id``:
        the key when the record has none (the plan's workflow id)."""
        if relay.hooks_workflow_id is None:
            return None
        return cls(
            agent_workflow_id=relay.hooks_workflow_id,
            key=relay.hook_key or plan_id,
            tools=hooked_tools(relay.hooked_tools),
            budget=relay.hook_bytes,
        )

    def relay(self, sent_bytes: int) -> HookRelay:
        """The relay record for a call this route's plan starts (an agent step's child):
        the same agent and key, and the room this plan has left."""
        budget = None if self.budget is None else max(self.budget - sent_bytes, 0)
        return HookRelay(self.agent_workflow_id, self.key, budget, list(self.tools))


@dataclass
class HookCall:
    """What the hooks decided for one call: cancelled (``cancel``), or go on with ``args``;
    after it, the (possibly rewritten) outcome."""

    cancel: str | None = None
    args: dict[str, Any] = field(default_factory=dict)
    ok: bool = True
    value: Any = None


IN_FLIGHT_BYTES = 1024 * 1024
"""Request bytes one asker may have unanswered at once. The agent's workflow takes the
signals in its next workflow task; past 2 MiB of events arriving during one task the
server force-closes that task, and the worker then replays the whole conversation (tens
of MiB with hooks on large results) to take the next: so requests wait for replies."""


class HookAsker:
    """The asking workflow's side: send a request, wait for the reply (``receive``)."""

    def __init__(self, route: HookRoute | None, admission: Admission) -> None:
        self.route = route
        self._admission = admission
        self._replies: dict[tuple[str, str], HookReply] = {}
        self._in_flight = 0
        self.sent_bytes = 0
        self.answered = 0

    def covers(self, tool: str) -> bool:
        return self.route is not None and self.route.covers(tool)

    def receive(self, raw: Any) -> None:
        try:
            reply = HookReply.from_wire(raw)
        except TypeError:
            return  # not ours to answer: nobody waits for it
        self._replies[(reply.call_id, reply.phase)] = reply

    async def before(self, call_id: str, tool: str, args: dict[str, Any]) -> HookCall:
        reply = await self._ask(call_id, tool, "before", args=args, what="arguments")
        if reply.cancel is not None:
            return HookCall(cancel=reply.cancel, args=args)
        return HookCall(args=reply.args if reply.args is not None else args)

    async def after(self, call_id: str, tool: str, ok: bool, value: Any) -> HookCall:
        """The outcome, without the arguments again (the relay kept them from "before")."""
        reply = await self._ask(call_id, tool, "after", ok=ok, value=value, what="result")
        if not reply.changed:
            return HookCall(ok=ok, value=value)
        return HookCall(ok=reply.ok, value=reply.value)

    async def _ask(
        self,
        call_id: str,
        tool: str,
        phase: str,
        *,
        what: str,
        args: dict[str, Any] | None = None,
        ok: bool = True,
        value: Any = None,
    ) -> HookReply:
        route = self.route
        assert route is not None
        request = HookRequest(
            key=route.key,
            reply_to=workflow.info().workflow_id,
            call_id=call_id,
            tool=tool,
            phase=phase,
            args=args,
            ok=ok,
            value=value,
        )
        size = json_size(request.to_wire())
        if route.budget is not None and self.sent_bytes + size > route.budget:
            return refusal(call_id, phase, _no_room(what, size, route.budget - self.sent_bytes))
        if self._in_flight and self._in_flight + size > IN_FLIGHT_BYTES:
            await workflow.wait_condition(
                lambda: not self._in_flight or self._in_flight + size <= IN_FLIGHT_BYTES
            )
        verdict = await self._admission.enter(size, starts=False)
        if verdict != "go":
            message = (
                f"the agent's tool hooks cannot be shown this call's {what}: "
                + self._admission.history_full_message().removeprefix("not started: ")
            )
            return refusal(call_id, phase, message)
        self.sent_bytes += size
        key = (call_id, phase)
        self._in_flight += size
        try:
            return await self._send_and_wait(route, request, key, call_id, phase)
        finally:
            self._in_flight -= size

    async def _send_and_wait(
        self,
        route: HookRoute,
        request: HookRequest,
        key: tuple[str, str],
        call_id: str,
        phase: str,
    ) -> HookReply:
        try:
            # JSON text in its own key order: the hooks (and, through a hook that changes
            # it, the model) see the call's arguments and result as the tool made them.
            await workflow.get_external_workflow_handle(route.agent_workflow_id).signal(
                HOOK_REQUEST_SIGNAL, RawValue(json_payload(request.to_wire()))
            )
        except FailureError as exc:
            return refusal(call_id, phase, f"the agent's tool hooks cannot be asked: {exc}")
        await workflow.wait_condition(lambda: key in self._replies)
        self.answered += 1
        return self._replies.pop(key)


def _no_room(what: str, size: int, room: int) -> str:
    return (
        f"the agent's tool hooks must see this call's {what} ({size // 1024} KiB), but the "
        f"conversation's history has room for {max(room, 0) // 1024} KiB more of them in this "
        "plan (WorkflowPlanPlugin(hook_relay_bytes=...)); return less from the tool, list "
        "fewer tools in WorkflowPlanPlugin(hooked_tools=[...]), or start a new conversation"
    )


def hooked_tools(patterns: Sequence[str] | None) -> tuple[str, ...]:
    return tuple(patterns) if patterns is not None else ("*",)
