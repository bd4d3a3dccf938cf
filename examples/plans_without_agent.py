"""Plans without an agent: one plan in-process, then durably on a Temporal server.

.venv/bin/durable-plan dev                      # terminal 1 (or TEMPORAL_ADDRESS=host:port)
.venv/bin/python examples/plans_without_agent.py
"""

import asyncio
from typing import Any

from monster_tools import ATTACK_PLAN, TOOLS

from durable_plan import (
    connect,
    execute_plan,
    plan_worker,
    run_plan,
    run_script,
    start_plan,
    summarize,
)

CLEANUP_PLAN = {"steps": [{"id": "rm", "tool": "delete_files", "args": {"pattern": "logs/*"}}]}


async def invoker(name: str, args: dict[str, Any]) -> Any:
    """Any async (tool name, arguments) -> result function can run a plan's steps."""
    return {"tool": name, "args": args}


async def main() -> None:
    # In-process, no server: a ToolRegistry brings its tools' schemas and timeouts.
    result = await execute_plan(ATTACK_PLAN, TOOLS)
    print(summarize(result))
    echoed = await execute_plan({"steps": [{"id": "a", "tool": "echo", "args": {"x": 1}}]}, invoker)
    print("invoker:", echoed.returned)

    # Durable: every step an activity. A plan_worker must poll the task queue (here in this
    # process; usually a process of its own), or the plan waits and start_plan warns.
    client = await connect()  # $TEMPORAL_ADDRESS, else 127.0.0.1:7233 (`durable-plan dev`)
    async with plan_worker(client, task_queue="examples", registry=TOOLS):
        result = await run_plan(client, ATTACK_PLAN, task_queue="examples", registry=TOOLS)
        print("durable:", result.returned["damage"])

        # delete_files requires approval: its step waits for a person's decision.
        handle = await start_plan(client, CLEANUP_PLAN, task_queue="examples", registry=TOOLS)
        waiting: list[dict[str, Any]] = []
        while not waiting:
            await asyncio.sleep(0.1)
            waiting = [s for s in await handle.progress() if s["phase"] == "awaiting_approval"]
        print("awaiting approval:", waiting[0]["id"], waiting[0]["args"])
        await handle.decide("rm", approved=False, reason="keep the logs")
        result = await handle.result()
        print("rm:", result.outcome("rm").status, "-", result.outcome("rm").error)


if __name__ == "__main__":
    run_script(main())  # asyncio.run, then exit without waiting on the SDK's threads
