"""Conversations for the hook relay and whole-plan failure tests (issue 22).

Its own module so the workflow sandbox can re-import it. ``RelayConversationWorkflow``
is a ``TemporalAgent`` with the plan plugin whose owner may put a tool hook on it:
none, a no-op (it looks at every call and changes nothing), a slow async before-hook
(a rate limiter that waits a second), or an after-hook that marks results.
"""

from __future__ import annotations

import asyncio
import collections
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from temporalio import activity, workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from strands import tool
    from strands.hooks import AfterToolCallEvent, BeforeToolCallEvent
    from temporalio.strands_agents import TemporalAgent

    from durable_plan.strands.plugin import WorkflowPlanPlugin
    from durable_plan.temporal.workflows.agent_tools import durable_tools
    from durable_plan.tools.registry import ToolRegistry

CALLS: collections.Counter[str] = collections.Counter()
"""Calls of each tool (the tests' workers run in the test process)."""


@tool
async def blob(n: int, kib: int) -> str:
    """A result of ``kib`` KiB.

    Args:
        n: Which blob.
        kib: Its size in KiB.
    """
    CALLS["blob"] += 1
    return "x" * (kib * 1024)


@tool
async def charge(order: str, amount: int) -> dict[str, Any]:
    """Charge an order once; returns {"receipt": str}.

    Args:
        order: The order id.
        amount: The amount.
    """
    CALLS["charge"] += 1
    return {"receipt": f"r-{order}-{amount}"}


@tool
async def hold(seconds: float) -> dict[str, Any]:
    """Wait, heartbeating (so a cancellation reaches it); returns {"held": seconds}.

    Args:
        seconds: How long.
    """
    CALLS["hold"] += 1
    waited = 0.0
    while waited < seconds:
        await asyncio.sleep(0.1)
        waited += 0.1
        if activity.in_activity():
            activity.heartbeat()
    return {"held": seconds}


@tool
async def look(name: str) -> dict[str, Any]:
    """Look something up; returns {"name": str}.

    Args:
        name: What.
    """
    CALLS["look"] += 1
    return {"name": name}


@tool
async def shelf(item: str) -> dict[str, Any]:
    """Where an item is shelved; returns {"item": str, "aisle": int, "bin": str} (its keys
    not in alphabetical order: what a converter that sorts would change).

    Args:
        item: What.
    """
    CALLS["shelf"] += 1
    return {"item": item, "aisle": 4, "bin": "b"}


RELAY_TOOLS = ToolRegistry()
RELAY_TOOLS.add(blob, timeout_s=30)
RELAY_TOOLS.add(charge, timeout_s=10, retries=0)
RELAY_TOOLS.add(hold, timeout_s=60, heartbeat_timeout_s=2)
RELAY_TOOLS.add(look, timeout_s=10)
RELAY_TOOLS.add(shelf, timeout_s=10)


@dataclass
class RelayInput:
    prompt: str
    hook: str = "none"
    """none, noop (sees every call, changes nothing), slow (a 1 s async before-hook),
    mark (an after-hook that adds {"marked": true} to look's and shelf's results)."""
    plugin: dict[str, Any] = field(default_factory=dict)
    """Extra WorkflowPlanPlugin options."""


@dataclass
class RelayOutput:
    answer: str
    plans: int
    ledgers: list[list[dict[str, Any]]]
    hook_calls: int


@workflow.defn
class RelayConversationWorkflow:
    def __init__(self) -> None:
        self.hook_calls = 0

    @workflow.run
    async def run(self, request: RelayInput) -> RelayOutput:
        plugin = WorkflowPlanPlugin(registry=RELAY_TOOLS, **request.plugin)
        agent = TemporalAgent(
            model="scripted",
            tools=durable_tools(RELAY_TOOLS),
            plugins=[plugin],
            callback_handler=None,
            start_to_close_timeout=timedelta(seconds=60),
            retry_policy=RetryPolicy(maximum_attempts=2),
        )
        if request.hook == "noop":
            agent.hooks.add_callback(BeforeToolCallEvent, self._count)
            agent.hooks.add_callback(AfterToolCallEvent, self._count)
        elif request.hook == "slow":
            agent.hooks.add_callback(BeforeToolCallEvent, self._slow)
        elif request.hook == "mark":
            agent.hooks.add_callback(AfterToolCallEvent, self._mark)
        try:
            result = await agent.invoke_async(request.prompt)
        except Exception as exc:
            raise ApplicationError(f"{type(exc).__name__}: {exc}", non_retryable=True) from exc
        return RelayOutput(
            answer=str(result).strip(),
            plans=plugin.plans_run,
            ledgers=[
                [{"id": o.id, "status": o.status, "error": o.error} for o in r.ledger]
                for r in plugin.results
            ],
            hook_calls=self.hook_calls,
        )

    def _count(self, event: Any) -> None:
        self.hook_calls += 1

    async def _slow(self, event: BeforeToolCallEvent) -> None:
        self.hook_calls += 1
        await workflow.sleep(1)  # a rate limiter

    def _mark(self, event: AfterToolCallEvent) -> None:
        self.hook_calls += 1
        if event.tool_use["name"] not in ("look", "shelf") or event.result["status"] != "success":
            return
        [block] = event.result["content"]
        value = dict(block["json"])  # type: ignore[typeddict-item]
        value["marked"] = True
        event.result = {**event.result, "content": [{"json": value}]}
