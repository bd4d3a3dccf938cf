"""Temporal's limit on one payload, and whether this process's workers store large ones.

Without External Storage, a payload over 2 MB (Temporal's limit per payload) fails the
workflow task that sends it, and the task is retried forever: a workflow stuck, not ended.
A plan's step results are bounded before that (``max_result_bytes``, the result store);
an agent step's model calls are not: each carries the whole conversation. So a plan records
whether its payloads are stored (``Storage.payloads_stored``, from the client that starts
it, or from this process's workers for a plan a conversation starts), and an agent step
without storage stops before a model call that could not be sent, saying why.
"""

from __future__ import annotations

from typing import Any

MAX_MODEL_INPUT_BYTES = 2_040_000
"""Below Temporal's 2 MB (2,097,152 bytes) per payload, with room for the call's tool specs
and envelope."""
MODEL_INPUT_COPIES = 2
"""How many times a model activity's input carries the conversation (measured)."""

_stored = False


def note_worker_converter(data_converter: Any) -> None:
    """A worker of this process was built on this converter (``plan_worker``)."""
    global _stored
    if _stores(data_converter):
        _stored = True


def workers_store_payloads() -> bool:
    """Does a worker of this process store large payloads (External Storage)?"""
    return _stored


def client_stores_payloads(client: Any) -> bool:
    return _stores(client.data_converter)


def _stores(data_converter: Any) -> bool:
    """An External Storage that stores: not the one a process with storage off carries to
    read references clearly (``protect.payload_storage.unconfigured_storage``)."""
    storage = getattr(data_converter, "external_storage", None)
    return storage is not None and bool(getattr(storage, "stores_payloads", True))
