"""The dev server, an in-process worker and a client meet: one workflow, one activity."""

from __future__ import annotations

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from tests.support.helpers import running_worker
from tests.support.sample_workflows import DoubleWorkflow, double


async def test_workflow_activity_round_trip(
    client: Client, task_queue: str, workflow_id: str
) -> None:
    async with running_worker(
        client, task_queue=task_queue, workflows=[DoubleWorkflow], activities=[double]
    ):
        result = await client.execute_workflow(
            DoubleWorkflow.run, 21, id=workflow_id, task_queue=task_queue
        )
    assert result == 42

    history = await client.get_workflow_handle(workflow_id).fetch_history()
    event_types = [event.event_type for event in history.events]
    assert EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED in event_types
    assert event_types[-1] == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED
