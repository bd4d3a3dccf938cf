"""Breakpoints in-process: pause a plan before a call, look at what it would do, go on.

.venv/bin/python examples/breakpoints.py        # no server needed
"""

import asyncio

from monster_tools import ATTACK_PLAN, TOOLS

from durable_plan import Pauses, execute_plan


async def main() -> None:
    pauses = Pauses()  # an awaitable handle; any async (pause) -> "continue"|"skip"|"abort" will do
    run = asyncio.create_task(
        execute_plan(ATTACK_PLAN, TOOLS, breakpoints=["attack"], on_pause=pauses)
    )
    pause = await pauses.next()  # the arguments are bound, nothing has run yet
    print(f"paused at {pause.path}: {pause.tool}({pause.args})")
    pauses.continue_(pause.path)  # or pauses.skip(...) / pauses.abort(...)
    result = await run
    print("ledger:", [(o.id, o.status) for o in result.ledger])


if __name__ == "__main__":
    asyncio.run(main())
