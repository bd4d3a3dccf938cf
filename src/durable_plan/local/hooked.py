"""In-process, the agent's tool hooks run around each call of a plan, as around a direct call.

The invoker of a plan on a plain ``Agent`` is wrapped once: the before-hooks may cancel
the call or rewrite its input, the after-hooks may rewrite its result (``run.hooks``
holds their semantics, shared with the durable relay)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

from durable_plan.language.errors import StepFailure, describe_exception
from durable_plan.language.patterns import matches_patterns
from durable_plan.run.calls import Invoker
from durable_plan.run.hooks import ToolHooks


def hooked_invoker(
    invoke: Invoker,
    hooks: ToolHooks,
    plan_tool_use_id: str,
    tools: Sequence[str] | None = None,
) -> Invoker:
    """``invoke`` with the agent's tool hooks around each call of the ``tools`` patterns
    (default: every tool), for in-process plans."""
    counter = itertools.count()
    patterns = list(tools) if tools is not None else ["*"]

    async def hooked(tool: str, args: dict[str, Any]) -> Any:
        if not matches_patterns(tool, patterns):
            return await invoke(tool, args)
        tool_use_id = f"{plan_tool_use_id}/{tool}/{next(counter)}"
        before = await hooks.before(tool, args, tool_use_id)
        if before.cancel is not None:
            raise StepFailure(before.cancel)
        try:
            value, ok = await invoke(tool, before.args), True
        except StepFailure:
            raise
        except Exception as exc:
            value, ok = describe_exception(exc), False
        after = await hooks.after(tool, before.args, tool_use_id, ok, value)
        if not after.ok:
            raise StepFailure(str(after.value))
        return after.value

    return hooked
