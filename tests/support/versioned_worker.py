"""A plan worker of one build of a Worker Deployment: the two builds of the rolling-upgrade
test (``tests/durable/faults/test_versioned_workers.py``).

    python tests/support/versioned_worker.py ADDRESS TASK_QUEUE DEPLOYMENT BUILD_ID

Plans are pinned (``VersioningBehavior.PINNED``, the worker's default): a plan runs to its end
on the build that started it, its steps included, however long it waits for a person. The
``which_build`` tool answers with this worker's build id, so a plan's result says where its
steps ran. Prints ``READY`` once polling; stops on SIGTERM.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from strands import tool  # noqa: E402
from temporalio.client import Client  # noqa: E402
from temporalio.common import VersioningBehavior, WorkerDeploymentVersion  # noqa: E402
from temporalio.worker import WorkerDeploymentConfig  # noqa: E402

from durable_plan import ToolRegistry, plan_worker  # noqa: E402

ADDRESS, TASK_QUEUE, DEPLOYMENT, BUILD_ID = sys.argv[1:5]


@tool
def which_build(after: str = "") -> str:
    """The build id of the worker that ran this step.

    Args:
        after: anything, to order the step after another.
    """
    return BUILD_ID


@tool
def hold() -> str:
    """A step a person approves: it keeps a plan in flight over the upgrade."""
    return "approved"


registry = ToolRegistry()
registry.add(which_build, timeout_s=10, retries=0)
registry.add(hold, timeout_s=10, retries=0, requires_approval=True)


async def main() -> None:
    client = await Client.connect(ADDRESS)
    worker = plan_worker(
        client,
        task_queue=TASK_QUEUE,
        registry=registry,
        deployment_config=WorkerDeploymentConfig(
            version=WorkerDeploymentVersion(DEPLOYMENT, BUILD_ID),
            use_worker_versioning=True,
            default_versioning_behavior=VersioningBehavior.PINNED,
        ),
    )
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    async with worker:
        print("READY", flush=True)
        await stop.wait()


if __name__ == "__main__":
    asyncio.run(main())
