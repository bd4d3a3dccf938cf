"""The plan workflow's side of large results by reference (``claim_check``): workflow code.

At its end the plan reads back returned results small enough for the model
(``return_stored="value"``) with one activity, and deletes what it stored with another,
so the workflow itself never does I/O. Kept apart from the activity side
(``claim_check``), which opens the worker's ``ResultStore`` (files, boto): workflow code
must not load the store.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError

from durable_plan.run.references import is_reference
from durable_plan.temporal.workflows.policy import retry_policy

__all__ = ["DROP_RESULTS", "READ_RESULTS", "drop_stored", "read_returned"]

DROP_RESULTS = "durable_plan_drop_stored_results"
READ_RESULTS = "durable_plan_read_stored_results"


def _options(task_queue: str | None) -> dict[str, Any]:
    return {
        "task_queue": task_queue,
        "start_to_close_timeout": timedelta(seconds=60),
        "retry_policy": retry_policy(3),
    }


async def read_returned(
    returned: dict[str, Any],
    *,
    max_bytes: int,
    budget: int,
    task_queue: str | None,
    chain: str | None = None,
) -> dict[str, Any]:
    """Returned references whose value fits ``max_bytes`` (what the model may see), in
    plan order while they add up to at most ``budget`` (room left in the plan's result),
    read back by one activity; the rest keep their reference (size and preview)."""
    wanted: dict[str, Any] = {}
    for sid, value in returned.items():
        if is_reference(value) and value["bytes"] <= min(max_bytes, budget):
            wanted[sid] = value
            budget -= value["bytes"]
    if not wanted:
        return {}
    try:
        texts = await workflow.execute_activity(
            READ_RESULTS,
            {"refs": wanted, **({"chain": chain} if chain else {})},
            result_type=dict,
            summary="read stored results for returns",
            **_options(task_queue),
        )
    except ActivityError as exc:
        workflow.logger.warning("stored results not read back: %s", exc)
        return {}
    return {sid: json.loads(text) for sid, text in texts.items() if sid in wanted}


async def drop_stored(task_queue: str | None, chain: str | None = None) -> None:
    """Delete what this plan stored; a failure is logged, never the plan's failure
    (what is left is what a retention sweep removes)."""
    try:
        await workflow.execute_activity(
            DROP_RESULTS,
            {"chain": chain} if chain else {},
            summary="delete stored results",
            **_options(task_queue),
        )
    except ActivityError as exc:
        workflow.logger.warning("stored results not deleted: %s", exc)
