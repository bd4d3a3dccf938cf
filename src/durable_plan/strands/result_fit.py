"""A plan's tool result fitted into what a durable conversation has room for.

Its next model call carries the result and must still be sent (Temporal's 2 MB per payload):
past the room, the returned results that do not fit become previews saying how the model can
still reach them, and a final plan ends no turn. Workflow code, run in the conversation's
workflow; the room itself is measured in ``temporal.workflows.conversation_room``."""

from __future__ import annotations

from typing import Any, Protocol

from strands.types.tools import ToolResult, ToolResultContent
from temporalio import workflow

from durable_plan.run.references import fit_returned
from durable_plan.run.reuse import StepMemory


class Answering(Protocol):
    """What fitting a result reads of the plan tool (``WorkflowPlanPlugin`` has it): named
    here, not imported, so this module does not import the plugin that imports it."""

    _final_answers: dict[str, str]
    memory: StepMemory


def fitted(plugin: Answering, result: ToolResult, agent: Any) -> ToolResult:
    """Durably, what the conversation has room for (``temporal.conversation_room``): its
    next model call carries this result, and must still be sent. Past the room, the
    returned results that do not fit are previews, and a final plan ends no turn (the
    model answers from what it has); a final answer, which repeats the results in the
    conversation, is given only when both fit."""
    if agent is None or not workflow.in_workflow():
        return result
    with workflow.unsafe.imports_passed_through():  # deterministic code, loaded once
        from durable_plan.temporal.workflows.conversation_room import (
            fit_tool_result,
            json_bytes,
            result_room,
            result_share,
        )

    use_id = result["toolUseId"]
    answer = plugin._final_answers.get(use_id)
    alongside = 0
    if answer is not None:
        alongside = json_bytes(answer)
        share = result_share(result_room(agent, use_id))
        if json_bytes(result) + alongside > share:
            del plugin._final_answers[use_id]
            alongside = 0
    shrunk = fit_tool_result(
        agent, result, shrink=lambda r, room: previews(plugin, r, room), alongside=alongside
    )
    if shrunk is not result:
        plugin._final_answers.pop(use_id, None)
    return shrunk


def previews(plugin: Answering, result: ToolResult, room: int) -> ToolResult:
    """The plan's report with its returned results within ``room``: whole in ``returns``
    order while they fit, each of the rest a preview saying how the model can still
    reach it."""
    with workflow.unsafe.imports_passed_through():
        from durable_plan.temporal.workflows.conversation_room import json_bytes

    remembered = set(plugin.memory.ids) if plugin.memory.enabled else set()

    def omitted(step: str) -> str:
        reach = (
            f"a later plan of this request reads it whole as prior.{step}"
            if step in remembered
            else "to use part of it, run a step that returns only that part"
        )
        return f"too large for this conversation; the step ran ok: {reach}"

    blocks = result["content"]
    at = next((i for i, b in enumerate(blocks) if _report_of(b) is not None), None)
    if at is None:
        return result
    report = _report_of(blocks[at])
    assert report is not None

    def with_returned(returned: dict[str, Any]) -> ToolResult:
        block: ToolResultContent = {"json": {**report, "returned": returned}}
        return {**result, "content": [*blocks[:at], block, *blocks[at + 1 :]]}

    left = room - json_bytes(with_returned({}))
    returned, _ = fit_returned(report["returned"], left, json_bytes, omitted)
    return with_returned(returned)


def _report_of(block: Any) -> dict[str, Any] | None:
    """The plan's report (``result_for_model``) in a content block of its tool result."""
    report = block.get("json") if isinstance(block, dict) else None
    if isinstance(report, dict) and isinstance(report.get("returned"), dict):
        return report
    return None
