"""The three workloads of ``bench.external_storage``, and the conversation workflow of (a)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from temporalio.strands_agents import TemporalAgent

    from durable_plan.temporal.workflows.agent_tools import durable_tools
    from durable_plan.testing import TurnLike, call, output, say
    from durable_plan.tools.registry import ToolRegistry

PAGE_KIB = 6
"""(a): each page the conversation reads; 99 of them make a context of ~150k tokens."""
CONVERSATION_CALLS = 100
TOOL_RESULT_KIB = 64
"""(b): each tool result an agent step of 16 rounds reads."""
AGENT_ROUNDS = 16
BLOB_MIB = 20
"""(c): the result one step passes to the next."""


async def read_page(n: int) -> str:
    """Read page n of the campaign log."""
    return f"page {n}: " + "lorem ipsum " * (PAGE_KIB * 1024 // 12)


async def read_chunk(n: int) -> dict[str, Any]:
    """Read chunk n of the archive: {"n", "text"}."""
    return {"n": n, "text": "x" * (TOOL_RESULT_KIB * 1024)}


async def make_blob(mib: int) -> dict[str, Any]:
    """Make a document of mib MiB: {"text"}."""
    return {"text": "y" * (mib * 1024 * 1024)}


async def measure(doc: dict[str, Any]) -> dict[str, int]:
    """Count a document's characters."""
    return {"chars": len(doc["text"])}


REGISTRY = ToolRegistry()
for _fn in (read_page, read_chunk, make_blob, measure):
    REGISTRY.add(_fn, timeout_s=120)

CONVERSATION_PROMPT = "Read the whole campaign log, then summarise it."
AGENT_PROMPT = "Read the archive chunk by chunk and count them."
AGENT_PROMPT_32 = "Read the whole archive, 31 chunks, and count them."
LONG_AGENT_ROUNDS = 32
SCRIPTS: dict[str, list[TurnLike]] = {
    CONVERSATION_PROMPT: [call("read_page", n=i) for i in range(CONVERSATION_CALLS - 1)]
    + [say("The log is read.")],
    AGENT_PROMPT: [call("read_chunk", n=i) for i in range(AGENT_ROUNDS - 1)]
    + [output({"chunks": AGENT_ROUNDS - 1})],
    AGENT_PROMPT_32: [call("read_chunk", n=i) for i in range(LONG_AGENT_ROUNDS - 1)]
    + [output({"chunks": LONG_AGENT_ROUNDS - 1})],
}

AGENT_PLAN: dict[str, Any] = {
    "steps": [
        {
            "id": "count",
            "tool": "agent",
            "args": {
                "prompt": AGENT_PROMPT,
                "output_schema": {
                    "type": "object",
                    "required": ["chunks"],
                    "properties": {"chunks": {"type": "integer"}},
                },
                "tools": ["read_chunk"],
                "max_iterations": AGENT_ROUNDS,
            },
        }
    ]
}
LONG_AGENT_PLAN: dict[str, Any] = {
    "steps": [
        {
            "id": "count",
            "tool": "agent",
            "args": {
                **AGENT_PLAN["steps"][0]["args"],
                "prompt": AGENT_PROMPT_32,
                "max_iterations": LONG_AGENT_ROUNDS,
            },
        }
    ]
}
BLOB_PLAN: dict[str, Any] = {
    "steps": [
        {"id": "doc", "tool": "make_blob", "args": {"mib": BLOB_MIB}},
        {"id": "count", "tool": "measure", "bind": {"doc": "steps.doc"}},
    ],
    "returns": ["count"],
}


@workflow.defn(name="StorageBenchConversation")
class StorageBenchConversation:
    @workflow.run
    async def run(self, prompt: str) -> str:
        agent = TemporalAgent(
            model="scripted",
            tools=durable_tools(REGISTRY),
            callback_handler=None,
            start_to_close_timeout=timedelta(seconds=120),
            retry_policy=RetryPolicy(maximum_attempts=2),
        )
        result = await agent.invoke_async(prompt)
        return str(result)
