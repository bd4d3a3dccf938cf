"""What a tool call may hand back to a durable conversation: so much that the conversation's
next model call can still be sent, whatever the tool returned.

A ``TemporalAgent`` sends each model call as an activity whose input carries the whole
conversation twice (measured, temporalio-strands-agents 0.1.0: the messages, and again in
the invocation state), with the tool specs and the system prompt. Without External Storage
that input must stay under Temporal's 2 MB per payload (the server warns from 512 KiB; the
workflow task that schedules the call travels in one gRPC message of at most 4 MiB, which
a call under 2 MB leaves room in). Over it, the workflow task that schedules the call fails
(``PAYLOADS_TOO_LARGE``, ``TMPRL1103``) and is retried forever: the conversation is stuck,
not ended. Every tool result joins the conversation before that call, and the results of
earlier rounds stay in it, so the bound on one result depends on what the conversation
already holds: ``result_room``.

The rule, the same with External Storage on or off (a model reads what it is sent, and a
megabyte of JSON is past any model's context window; and the decision must not depend on
how one worker is configured, since another may replay it):

- the conversation as a model call carries it (messages, system prompt, tool specs, and the
  results this turn has handed out that are not in the messages yet) stays within
  ``CONVERSATION_BYTES``, so that ``MODEL_INPUT_COPIES`` copies fit ``MAX_MODEL_INPUT_BYTES``;
- one result takes at most half of the room left (at least ``SMALL_RESULT_BYTES`` of it), so
  a large result leaves room for the rounds after it, and a small one always goes through;
- past its share, a result becomes previews (``references.returned_preview``), each naming
  its size; if even that does not fit, a one-line error says why (``MINIMAL``);
- a model call that would still not fit is not made when payloads are not stored: the turn
  ends with a message that says why (``watch_model_calls``: a ``BeforeModelCallEvent``
  cancel with ``model_call_refusal``), instead of a workflow task retried forever.

``fit_tool_result`` is the one function every path that hands a tool's result to a durable
conversation goes through: the plan tool (``strands.plugin``) and the model's direct tool
calls (``temporal.agent_tools``). Pure functions of the agent's state: workflow code.
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Callable
from typing import Any

from strands.hooks import BeforeModelCallEvent
from strands.types.tools import ToolResult
from temporalio import workflow

from durable_plan.run.references import returned_preview, size_text
from durable_plan.temporal.wire.payload_limits import (
    MAX_MODEL_INPUT_BYTES,
    MODEL_INPUT_COPIES,
    workers_store_payloads,
)
from durable_plan.temporal.workflows.versions import STORAGE_RECORDED, recorded_fact

__all__ = [
    "CONVERSATION_BYTES",
    "SMALL_RESULT_BYTES",
    "carried_bytes",
    "fit_tool_result",
    "json_bytes",
    "model_call_refusal",
    "model_input_bytes",
    "result_room",
    "result_share",
    "watch_model_calls",
]

CONVERSATION_BYTES = MAX_MODEL_INPUT_BYTES // MODEL_INPUT_COPIES
"""The conversation (messages, system prompt, tool specs, as JSON) one model call may carry."""
SMALL_RESULT_BYTES = 16 * 1024
"""A result this small goes through whole while the conversation has room for it at all."""
MESSAGE_OVERHEAD = 256
"""What a result adds besides its own JSON: the message around it, a tracking id."""
TEXT_CHARS = 2_000
"""A text block of a result cut down to fit keeps this many characters."""

OMITTED = (
    "too large for this conversation (its model calls must stay under Temporal's 2 MB per "
    "payload); the call ran ok: ask for less of it, or pass it on in a plan"
)
"""Why a direct call's result is a preview, and what the model can do."""


_watched: weakref.WeakSet[Any] = weakref.WeakSet()
"""The agents whose model calls ``watch_model_calls`` guards already."""
_handed_out: weakref.WeakKeyDictionary[Any, dict[str, int]] = weakref.WeakKeyDictionary()
"""Per agent: bytes of the results this turn handed out (by ``toolUseId``) that are not in its
messages yet. Strands appends a turn's results together, after its last tool ends, and the
tools of one turn run side by side: each must count the others'. Keyed by the agent object,
so each conversation (and each replay of it, a new agent) has its own."""


def json_bytes(value: Any) -> int:
    """Bytes of ``value`` as compact UTF-8 JSON (anything not JSON by its text)."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)
    return len(text.encode())


def _tool_specs(agent: Any) -> Any:
    registry = getattr(agent, "tool_registry", None)
    try:
        return registry.get_all_tool_specs() if registry is not None else []
    except Exception:  # a registry of another shape: count nothing for it
        return []


def carried_bytes(agent: Any) -> int:
    """What the agent's next model call carries once: its messages, system prompt and tool
    specs as compact JSON, plus the results this turn handed out that are not in the
    messages yet."""
    sent = {
        "messages": getattr(agent, "messages", []),
        "system_prompt": getattr(agent, "system_prompt", None),
        "tool_specs": _tool_specs(agent),
    }
    try:
        size = json_bytes(sent)
    except (TypeError, ValueError, RecursionError):
        size = len(str(sent).encode())
    return size + sum(_pending(agent).values())


def model_input_bytes(agent: Any) -> int:
    """What the agent's next model call would send as the model activity's input."""
    return MODEL_INPUT_COPIES * carried_bytes(agent)


def watch_model_calls(agent: Any) -> None:
    """Refuse each model call of ``agent`` that could not be sent (once per agent; later
    calls do nothing): a ``BeforeModelCallEvent`` hook that, when the run's workers store
    no payloads (as the run first found it: ``versions.recorded_fact``), cancels the call
    with ``model_call_refusal``'s message. Strands then
    ends the turn with that message as the answer, and the conversation's workflow goes on
    (or ends) as after any turn."""
    hooks = getattr(agent, "hooks", None)
    if hooks is None:
        return  # not a Strands agent: nothing makes its model calls here
    try:
        if agent in _watched:
            return
        _watched.add(agent)
    except TypeError:  # an agent that cannot be a weak key: not guarded twice, or ever
        return
    hooks.add_callback(BeforeModelCallEvent, _refuse_oversized)


def _refuse_oversized(event: BeforeModelCallEvent) -> None:
    if event.cancel:
        return  # already refused
    refusal = model_call_refusal(event.agent)
    if refusal is None:
        return
    # Stored outside history, the call goes as a reference. Whether the workers store is
    # asked only now, and in workflow code recorded: a replay elsewhere must decide alike.
    stored = workers_store_payloads()
    if workflow.in_workflow():
        stored = recorded_fact(STORAGE_RECORDED, stored)
    if not stored:
        event.cancel = refusal


def model_call_refusal(agent: Any, who: str = "this conversation") -> str | None:
    """Why the agent's next model call cannot be sent without External Storage (None: it
    can). An agent step says the same with its rounds (``agent_workflow``), measured by the
    same ``model_input_bytes``."""
    size = model_input_bytes(agent)
    if size <= MAX_MODEL_INPUT_BYTES:
        return None
    return (
        f"{who} stopped: its next model call would carry {size // 1024} KiB, over Temporal's "
        "2 MB limit for one payload (the workflow could not send it); start a new "
        "conversation with what you need of this one, give it tools that return less, or "
        "turn on External Storage (durable_plan.protect.payload_storage.PayloadStoragePlugin)"
    )


def result_room(agent: Any, tool_use_id: str) -> int:
    """Bytes of JSON the result of ``tool_use_id`` may take so that the conversation's next
    model call still fits (0: none). All of it: ``result_share`` is what one result gets."""
    mine = _pending(agent).get(tool_use_id, 0)  # a result fitted again replaces its own
    room = CONVERSATION_BYTES - (carried_bytes(agent) - mine) - MESSAGE_OVERHEAD
    return max(room, 0)


def result_share(room: int) -> int:
    """What one result may take of ``room``: half of it, so the rounds after it have room
    too, but a small result whole while it fits at all."""
    return max(room // 2, min(room, SMALL_RESULT_BYTES))


def fit_tool_result(
    agent: Any,
    result: ToolResult,
    *,
    shrink: Callable[[ToolResult, int], ToolResult] | None = None,
    alongside: int = 0,
) -> ToolResult:
    """``result`` as the conversation of ``agent`` can take it, and noted as handed out.

    Whole if it fits its share of the room (``result_share``); else ``shrink(result,
    share)`` (the caller's smaller form, e.g. the plan tool's previews of its returned
    results; by default every JSON block becomes a preview and every long text is cut); if
    that does not fit either, a one-line error naming the size (the conversation's next
    model call is then refused if it still cannot be sent: ``model_call_refusal``).
    ``alongside``: bytes the same turn adds to the conversation besides the result (a final
    answer that repeats it), counted with it.

    Signature for callers: ``fit_tool_result(agent, result) -> ToolResult``, where ``agent``
    is the Strands agent whose messages the result joins (``invocation_state["agent"]``).
    """
    if agent is None:
        return result  # no conversation to measure (a call outside an agent)
    watch_model_calls(agent)
    use_id = result["toolUseId"]
    share = result_share(result_room(agent, use_id))
    size = json_bytes(result)
    if size + alongside <= share:
        return _hand_out(agent, result, alongside)
    smaller = (shrink or _previewed)(result, max(share - alongside, 0))
    if json_bytes(smaller) + alongside <= share:
        return _hand_out(agent, smaller, alongside)
    minimal: ToolResult = {
        "toolUseId": use_id,
        "status": "error",
        "content": [
            {
                "text": (
                    f"The call ended ({result.get('status', 'success')}), but its result "
                    f"({size_text(size)}) does not fit in what is left of this conversation "
                    "(each model call must stay under Temporal's 2 MB per payload): answer "
                    "with what you have, or continue in a new conversation"
                )
            }
        ],
    }
    return _hand_out(agent, minimal, 0)


def _previewed(result: ToolResult, room: int) -> ToolResult:
    """Every JSON block a preview of its value, every long text cut (``room`` unused: what
    is left is as small as a result's shape allows)."""
    content: list[Any] = []
    for block in result.get("content", []):
        if "json" in block:
            value = block["json"]
            preview = returned_preview(value, json_bytes(value), omitted=OMITTED)
            content.append({"json": preview})
        elif "text" in block and len(block["text"]) > TEXT_CHARS:
            text = block["text"]
            cut = len(text) - TEXT_CHARS
            content.append({"text": f"{text[:TEXT_CHARS]} ... [{cut} characters cut]"})
        else:
            content.append(block)
    return {**result, "content": content}


def _pending(agent: Any) -> dict[str, int]:
    """The handed-out results of the agent's current turn: those whose ``toolUseId`` is
    among the tool uses of its last (assistant) message. Strands appends their message after
    the turn's last tool; results of a turn that ended are in the messages, or gone."""
    try:
        noted = _handed_out.get(agent)
    except TypeError:  # an agent that cannot be a weak key: nothing was noted for it
        return {}
    if not noted:
        return {}
    messages = getattr(agent, "messages", None) or []
    last = messages[-1] if messages else None
    current: set[str] = set()
    if isinstance(last, dict) and last.get("role") == "assistant":
        for block in last.get("content") or []:
            use = block.get("toolUse") if isinstance(block, dict) else None
            if isinstance(use, dict) and isinstance(use.get("toolUseId"), str):
                current.add(use["toolUseId"])
    kept = {use_id: size for use_id, size in noted.items() if use_id in current}
    _handed_out[agent] = kept
    return kept


def _hand_out(agent: Any, result: ToolResult, alongside: int) -> ToolResult:
    try:
        noted = _handed_out.setdefault(agent, {})
    except TypeError:  # an agent that cannot be a weak key: nothing to count with
        return result
    noted[result["toolUseId"]] = json_bytes(result) + alongside + MESSAGE_OVERHEAD
    return result
