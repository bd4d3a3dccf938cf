"""What a plan's sandbox step costs over the agent's direct sandbox call (one run).

    python -m bench.sandbox_steps            # 20 calls each way
    python -m bench.sandbox_steps --calls 40

Both run ``true`` in a real local sandbox (``NotASandboxLocalEnvironment``, registered through
``StrandsPlugin(sandboxes=...)``) on a dev server with the tuned dynamic config. Direct: a
workflow calls ``TemporalSandbox.execute`` N times, one after another (the SDK's activity each
time). Plan: a conversation's plan of N chained ``sandbox_shell`` steps (our wrapper activity
each, calling the same factory with the conversation's chain). Each way runs with 1 call and
with N + 1 calls; the difference over N is the cost of one more call, without the fixed costs
(the model calls, the plan's child workflow). Prints only.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import uuid
from collections.abc import Sequence

from strands.sandbox.not_a_sandbox_local_environment import NotASandboxLocalEnvironment
from temporalio.client import Client
from temporalio.strands_agents import SandboxWorkflowContext, StrandsPlugin

from bench._report import command_line, machine_line, markdown_table, server_version
from bench._sandbox_workflow import SANDBOX, TOOLS, SandboxBenchWorkflow, chain_plan
from durable_plan import plan_worker
from durable_plan.server.devserver import TUNED_DYNAMIC_CONFIG, DevServer
from durable_plan.testing import ScriptedModel, call, say


def local(_context: SandboxWorkflowContext) -> NotASandboxLocalEnvironment:
    return NotASandboxLocalEnvironment()


async def timed(client: Client, queue: str, mode: str, n: int) -> float:
    seconds: float = await client.execute_workflow(
        SandboxBenchWorkflow.run,
        args=[mode, n],
        id=f"bench-sandbox-{mode}-{uuid.uuid4().hex[:8]}",
        task_queue=queue,
    )
    return seconds


async def run(args: argparse.Namespace) -> None:
    n = args.calls
    scripts = {
        f"plan {k}": [call("submit_workflow_plan", **chain_plan(k)), say("ok")] for k in (1, n + 1)
    }
    load = os.getloadavg()[0]
    with DevServer(headless=True, dynamic_config=dict(TUNED_DYNAMIC_CONFIG)) as server:
        plugin = StrandsPlugin(
            models={"bench": lambda: ScriptedModel(scripts=scripts)}, sandboxes={SANDBOX: local}
        )
        client = await Client.connect(server.target, plugins=[plugin])
        queue = f"bench-sandbox-{uuid.uuid4().hex[:6]}"
        async with plan_worker(
            client, task_queue=queue, registry=TOOLS, workflows=[SandboxBenchWorkflow]
        ):
            await timed(client, queue, "direct", 3)  # warm-up: imports, the first factory call
            await timed(client, queue, "plan", 1)
            rows = []
            for mode in ("direct", "plan"):
                one = await timed(client, queue, mode, 1)
                many = await timed(client, queue, mode, n + 1)
                rows.append([mode, one, many, (many - one) / n * 1000])
        version = server_version(server.binary)
    print(f"# {command_line('bench.sandbox_steps')}")
    print(f"# {machine_line(load, version)}\n")
    header = ["way", "1 call s", f"{n + 1} calls s", "ms per more call"]
    print(markdown_table(header, rows, digits=3))
    added = rows[1][3] - rows[0][3]
    print(f"\nadded per sandbox step in a plan over a direct call: {added:.1f} ms (one run)")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.sandbox_steps", description=__doc__)
    parser.add_argument("--calls", type=int, default=20)
    asyncio.run(run(parser.parse_args(argv)))


if __name__ == "__main__":
    main()
