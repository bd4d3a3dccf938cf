"""The tool hooks' messages: a plan (or one of its agent steps) asks its agent's workflow
to run the agent's tool hooks for one call, and the relay there answers (``hook_relay``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

HOOK_REQUEST_SIGNAL = "durable_plan_tool_hook"
HOOK_REPLY_SIGNAL = "durable_plan_tool_hook_reply"


@dataclass
class HookRequest:
    """A plan (or one of its agent steps) asks its agent's workflow to run the tool hooks.

    ``key`` names the plan the agent registered (``HookRelay.hook_key``), ``reply_to``
    the asking workflow. "before": ``args`` about to be used; "after": ``ok`` and
    ``value`` (the result, or the error text), without the arguments again.
    """

    key: str
    reply_to: str
    call_id: str
    tool: str
    phase: str
    args: dict[str, Any] | None = None
    ok: bool = True
    value: Any = None

    def to_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {
            "key": self.key,
            "reply_to": self.reply_to,
            "call_id": self.call_id,
            "tool": self.tool,
            "phase": self.phase,
        }
        if self.phase == "before":
            wire["args"] = self.args or {}
        else:
            wire["ok"] = self.ok
            wire["value"] = self.value
        return wire

    @classmethod
    def from_wire(cls, data: Any) -> HookRequest:
        if not isinstance(data, dict):
            raise TypeError(f"not a hook request: {str(data)[:200]}")
        names = ("key", "reply_to", "call_id", "tool", "phase")
        if not all(isinstance(data.get(n), str) for n in names):
            raise TypeError(f"not a hook request: {str(data)[:200]}")
        args = data.get("args")
        return cls(
            data["key"],
            data["reply_to"],
            data["call_id"],
            data["tool"],
            data["phase"],
            args if isinstance(args, dict) else None,
            bool(data.get("ok", True)),
            data.get("value"),
        )


@dataclass
class HookReply:
    """The hooks' decision. Before: ``cancel`` (the call fails with it), or go on with
    ``args`` (None: unchanged). After: ``changed`` says whether ``ok`` and ``value``
    replace the call's outcome (a reply carries a value only when a hook changed it)."""

    call_id: str
    phase: str
    cancel: str | None = None
    args: dict[str, Any] | None = None
    ok: bool = True
    value: Any = None
    changed: bool = False

    @classmethod
    def from_wire(cls, data: Any) -> HookReply:
        """The reply as the relay sent it; anything else is not an answer to this asker."""
        if isinstance(data, HookReply):
            return data
        if not isinstance(data, dict) or not all(
            isinstance(data.get(n), str) for n in ("call_id", "phase")
        ):
            raise TypeError(f"not a hook reply: {str(data)[:200]}")
        args = data.get("args")
        cancel = data.get("cancel")
        return cls(
            data["call_id"],
            data["phase"],
            cancel if isinstance(cancel, str) else None,
            args if isinstance(args, dict) else None,
            bool(data.get("ok", True)),
            data.get("value"),
            bool(data.get("changed", False)),
        )
