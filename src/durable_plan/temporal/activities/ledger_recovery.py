"""The activity that reads a closed plan's history back into its ledger: it needs the
client (``activity.client()``) and the converter's codec and store, so it is activity code;
the parsing it does and the workflow side that calls it live in ``workflows.recovery``."""

from __future__ import annotations

from typing import Any

from temporalio import activity

from durable_plan.temporal.workflows.recovery import (
    RECOVER_LEDGER,
    salvage_from_history,
    salvage_to_wire,
)


@activity.defn(name=RECOVER_LEDGER)
async def recover_ledger(request: dict[str, Any]) -> dict[str, Any]:
    """Read a closed plan workflow's history and rebuild what it had done."""
    client = activity.client()
    handle = client.get_workflow_handle(
        str(request["workflow_id"]), run_id=request.get("run_id") or None
    )
    history = await handle.fetch_history()
    converter = client.data_converter

    def decode_sync(payloads: Any) -> list[Any]:
        return list(converter.payload_converter.from_payloads(list(payloads)))

    events = list(history.events)
    if converter.payload_codec is not None or converter.external_storage is not None:
        # Stored or encrypted payloads: retrieve and decode them first, event by event.
        await _decode_events(events, converter)
    return salvage_to_wire(salvage_from_history(events, decode_sync))


async def _decode_events(events: list[Any], converter: Any) -> None:
    from temporalio.api.common.v1 import Payloads

    for event in events:
        for attrs_name, field_name in _PAYLOAD_FIELDS:
            if not event.HasField(attrs_name):
                continue
            payloads: Payloads = getattr(getattr(event, attrs_name), field_name)
            if not payloads.payloads:
                continue
            if converter.external_storage is not None:  # references -> the stored payloads
                await converter.external_storage._retrieve_payloads(payloads)
            if converter.payload_codec is not None:
                decoded = await converter.payload_codec.decode(list(payloads.payloads))
                del payloads.payloads[:]
                payloads.payloads.extend(decoded)


_PAYLOAD_FIELDS = (
    ("workflow_execution_started_event_attributes", "input"),
    ("activity_task_scheduled_event_attributes", "input"),
    ("activity_task_completed_event_attributes", "result"),
)
