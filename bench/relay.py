"""A conversation's history per plan submitted, with and without an owner's tool hook.

python -m bench.relay [--plans 4 --steps 30 --kib 240]

The case of issue 22 (1): one ``TemporalAgent`` conversation submits plans of many
large steps with ``returns: []`` (every documented bound respected). Printed per
hook setting: how each workflow ended, the conversation's history bytes per plan,
and the hook requests it received.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import uuid
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.strands_agents import StrandsPlugin

from bench._report import command_line, machine_line, markdown_table, server_version
from durable_plan import plan_worker
from durable_plan.server.connection import exit_now
from durable_plan.server.devserver import DevServer
from durable_plan.testing import ScriptedModel, call, say
from tests.support.relay_workflows import RELAY_TOOLS, RelayConversationWorkflow, RelayInput

PROMPT = "many large plans"


def plans(count: int, steps: int, kib: int) -> list[dict[str, Any]]:
    return [
        {
            "steps": [
                {"id": f"b{n}", "tool": "blob", "args": {"n": p * 1000 + n, "kib": kib}}
                for n in range(steps)
            ],
            "returns": [],
        }
        for p in range(count)
    ]


async def one(server: DevServer, hook: str, count: int, steps: int, kib: int) -> list[object]:
    script = [*(call("submit_workflow_plan", **p) for p in plans(count, steps, kib)), say("ok")]
    client = await Client.connect(
        server.target,
        plugins=[
            StrandsPlugin(models={"scripted": lambda: ScriptedModel(scripts={PROMPT: script})})
        ],
    )
    queue = f"relay-{uuid.uuid4().hex[:8]}"
    workflow_id = f"relay-{hook}-{uuid.uuid4().hex[:8]}"
    async with plan_worker(
        client, task_queue=queue, registry=RELAY_TOOLS, workflows=[RelayConversationWorkflow]
    ):
        handle = await client.start_workflow(
            RelayConversationWorkflow.run,
            RelayInput(PROMPT, hook=hook),
            id=workflow_id,
            task_queue=queue,
        )
        try:
            await asyncio.wait_for(handle.result(), 600)
        except Exception as exc:  # what the issue reproduced: the conversation ended badly
            print(f"hook={hook}: conversation ended with {type(exc).__name__}: {exc}")
        description = await handle.describe()
        history = await handle.fetch_history()
        plan_status = []
        for n in range(count):
            try:
                child = await client.get_workflow_handle(
                    f"{workflow_id}/plan/tooluse_{n}_0"
                ).describe()
                plan_status.append(child.status.name if child.status else "?")
            except Exception:
                plan_status.append("not started")
    size = int(description.raw_description.workflow_execution_info.history_size_bytes)
    requests = sum(
        1
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED
    )
    statuses = ", ".join(sorted({s for s in plan_status}))
    return [
        hook,
        description.status.name if description.status else "?",
        statuses,
        size // count // 1024,
        requests,
    ]


async def main_async(count: int, steps: int, kib: int) -> int:
    load_start = os.getloadavg()[0]
    rows = []
    with DevServer(headless=True) as server:
        version = server_version(server.binary)
        for hook in ("none", "noop"):
            rows.append(await one(server, hook, count, steps, kib))
    print(f"## A conversation of {count} plans x {steps} steps x {kib} KiB, returns: []\n")
    print(f"`{command_line('bench.relay')}`\n")
    print(machine_line(load_start, version, extra="dev server in memory, tuned") + "\n")
    header = [
        "owner's hook",
        "conversation",
        "plans",
        "conversation history KiB per plan",
        "signals received",
    ]
    print(markdown_table(header, rows))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plans", type=int, default=4)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--kib", type=int, default=240)
    args = parser.parse_args()
    return asyncio.run(main_async(args.plans, args.steps, args.kib))


if __name__ == "__main__":
    exit_now(main())  # no interpreter finalization: temporalio/sdk-python#300
