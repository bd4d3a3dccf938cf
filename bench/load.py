"""200 mixed plans at once on one worker (chains, maps, agent steps, approvals).

python -m bench.load [--plans 200]
"""

from __future__ import annotations

import argparse
import asyncio
import uuid

from durable_plan.connection import exit_now
from durable_plan.devserver import DevServer
from tests.load_harness import run_load


async def main_async(plans: int) -> int:
    with DevServer(headless=True) as server:
        report = await run_load(server, plans, f"load-{uuid.uuid4().hex[:8]}")
    print(f"durable-plan load: {plans} mixed plans at once on one worker")
    print("\n".join(report.lines()))
    ok = report.completed_ok == plans
    print("PASS" if ok else "FAIL", " every plan completed, none stuck")
    return 0 if ok else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plans", type=int, default=200)
    return asyncio.run(main_async(parser.parse_args().plans))


if __name__ == "__main__":
    exit_now(main())  # no interpreter finalization: temporalio/sdk-python#300
