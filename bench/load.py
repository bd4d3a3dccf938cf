"""200 mixed plans at once on one worker (chains, maps, agent steps, approvals).

python -m bench.load [--plans 200]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import uuid

from bench._report import command_line, key_value_table, machine_line, server_version
from durable_plan.server.connection import exit_now
from durable_plan.server.devserver import DevServer
from tests.support.load_harness import run_load


async def main_async(plans: int) -> int:
    load_start = os.getloadavg()[0]
    with DevServer(headless=True) as server:
        version = server_version(server.binary)
        report = await run_load(server, plans, f"load-{uuid.uuid4().hex[:8]}")
    print(f"## Load: {plans} mixed plans at once on one worker\n")
    print(f"`{command_line('bench.load')}`\n")
    print(machine_line(load_start, version, extra="dev server in memory, tuned") + "\n")
    print(key_value_table(report.lines()) + "\n")
    ok = report.completed_ok == plans
    print("PASS" if ok else "FAIL", " every plan completed, none stuck")
    return 0 if ok else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plans", type=int, default=200)
    return asyncio.run(main_async(parser.parse_args().plans))


if __name__ == "__main__":
    exit_now(main())  # no interpreter finalization: temporalio/sdk-python#300
