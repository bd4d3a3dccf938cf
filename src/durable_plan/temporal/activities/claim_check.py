"""Large results by reference, durably: the activity side and the plan workflow's side.

Activity side (``run_tool`` calls these): a result over the plan's threshold is
written to the worker's ``ResultStore`` and the activity returns a reference
instead (``references.reference``); references in a step's arguments are read
back, checked (this plan's own, intact, within the size bound) and replaced by
their values before the tool runs. Workflow side (``stored_results``, apart so that
workflow code never loads the store and its boto client): at its end the plan reads
back returned results small enough for the model (``return_stored="value"``)
with one activity, and deletes what it stored with another, so the workflow
itself never does I/O. Both are skipped unless the plan stored something, so a
plan of small results costs nothing extra.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote

from temporalio import activity

from durable_plan.protect.result_keys import owner_key, owner_record, plan_prefix, result_key
from durable_plan.protect.result_store import (
    ResultStore,
    StoredResultMissing,
    StoredResultUnreadable,
    store_from_env,
)
from durable_plan.run.references import is_reference, iter_references, key_of, reference, size_text
from durable_plan.temporal.workflows.stored_results import DROP_RESULTS, READ_RESULTS


class ClaimCheckError(Exception):
    """A reference a step cannot use, or a result it cannot store; ``kind`` is the
    failure type the step reports (never retried: retrying would not change it)."""

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


_ENV_STORE: list[ResultStore] = []
_OWNERS_WRITTEN: set[str] = set()
"""Prefixes whose owner record this process wrote (once is enough; a duplicate is harmless)."""


def worker_store(store: ResultStore | None) -> ResultStore:
    """``store``, or the one ``$DURABLE_PLAN_STORE`` names (built once per process)."""
    if store is not None:
        return store
    if not _ENV_STORE:
        _ENV_STORE.append(store_from_env())
    return _ENV_STORE[0]


def source_step(ref: dict[str, Any]) -> str:
    """The step whose result a reference holds (its key's middle part)."""
    parts = key_of(ref).split("/")
    return unquote(parts[1]) if len(parts) == 3 else "?"


async def keep_large_result(
    store: ResultStore,
    *,
    workflow_id: str,
    step_id: str,
    tool: str,
    attempt: int,
    text: str,
    size: int,
    max_stored_bytes: int,
    chain: str | None = None,
) -> str:
    """Store ``text`` (a result of ``size`` bytes) and return its reference's JSON; the
    first result of a plan run also writes who owns the prefix (for the sweep)."""
    if size > max_stored_bytes:
        raise ClaimCheckError(
            f"step '{step_id}': the result of tool '{tool}' is {size_text(size)}, over the "
            f"{size_text(max_stored_bytes)} limit for results stored by reference "
            "(max_stored_bytes); make the tool return less, or store the data itself and "
            "return where it is",
            "ResultTooLarge",
        )
    key = result_key(workflow_id, step_id, attempt, chain)
    prefix = plan_prefix(workflow_id, chain)
    if prefix not in _OWNERS_WRITTEN:
        # Unsealed on purpose: a workflow id is no secret (history shows it in the clear),
        # and the sweep reads it without the keys.
        raw = getattr(store, "inner", store)
        await asyncio.to_thread(raw.put, owner_key(prefix), owner_record(workflow_id, chain))
        _OWNERS_WRITTEN.add(prefix)
    await asyncio.to_thread(store.put, key, text.encode())
    return json.dumps(reference(key, text), separators=(",", ":"))


async def resolve_args(
    store: ResultStore,
    *,
    workflow_id: str,
    step_id: str,
    args: dict[str, Any],
    max_bytes: int,
    chain: str | None = None,
) -> dict[str, Any]:
    """``args`` with every reference replaced by the stored value (``args`` itself if it
    holds none). Raises ``ClaimCheckError`` naming the step, the argument and the fix."""
    found: dict[str, tuple[str, dict[str, Any]]] = {}  # key -> (argument, reference)
    for name, value in args.items():
        for ref in iter_references(value):
            found.setdefault(key_of(ref), (name, ref))
    if not found:
        return args
    own = plan_prefix(workflow_id, chain) + "/"
    total = 0
    for key, (name, ref) in found.items():
        where = f"step '{step_id}': argument '{name}'"
        if not _is_own_key(key, own):
            raise ClaimCheckError(
                f"{where} holds a reference to a result this plan did not store; bind "
                "results of this plan's own steps (steps.<id>)",
                "ForeignReference",
            )
        total += ref["bytes"]
        if total > max_bytes:
            raise ClaimCheckError(
                f"{where}: the stored results bound to this step add up to "
                f"{size_text(total)} or more, over the {size_text(max_bytes)} limit "
                "(max_stored_bytes); pass fewer or smaller results to one step",
                "ResultTooLarge",
            )
    values: dict[str, Any] = {}
    for key, (name, ref) in found.items():
        values[key] = await _load(store, key, ref, f"step '{step_id}': argument '{name}'")
    return {name: _replace(value, values) for name, value in args.items()}


async def _load(store: ResultStore, key: str, ref: dict[str, Any], where: str) -> Any:
    source = source_step(ref)
    try:
        data = await asyncio.to_thread(store.get, key)
    except StoredResultMissing as exc:
        raise ClaimCheckError(
            f"{where} holds the result of step '{source}' stored by reference "
            f"({size_text(ref['bytes'])}), and the result store has no object for it "
            f"({exc}): it was cleaned up (its plan has closed, or a retention sweep ran), or "
            f"this worker uses another store ({store!r}); run step '{source}' again, or give "
            "every worker the same store (DURABLE_PLAN_STORE, or plan_worker(result_store=...))",
            "StoredResultMissing",
        ) from None
    except StoredResultUnreadable as exc:
        raise ClaimCheckError(
            f"{where} holds the result of step '{source}' stored by reference, and this "
            f"worker cannot read it: {exc}",
            "StoredResultUnreadable",
        ) from None
    # The size is checked too: the step's budget added up the references' own ``bytes``,
    # which a plan could have written itself.
    if len(data) != ref["bytes"] or hashlib.sha256(data).hexdigest() != ref["sha256"]:
        raise ClaimCheckError(
            f"{where} holds the result of step '{source}' stored by reference, and the "
            f"stored object ({store.where(key)}) is not the one stored (its size or sha256 "
            "differs); "
            f"run step '{source}' again",
            "StoredResultCorrupt",
        )
    return json.loads(data)


def _is_own_key(key: str, own: str) -> bool:
    """``<this plan's digest>/<quoted step id>/<attempt>`` exactly: a forged key cannot
    climb out of the plan's prefix (``..``) or name another plan's."""
    if not key.startswith(own):
        return False
    step, _, attempt = key[len(own) :].partition("/")
    return bool(step) and step not in (".", "..") and "/" not in step and attempt.isdigit()


def _replace(value: Any, values: dict[str, Any]) -> Any:
    if type(value) is dict:
        if is_reference(value):
            return values[key_of(value)]
        return {k: _replace(v, values) for k, v in value.items()}
    if type(value) is list:
        return [_replace(v, values) for v in value]
    return value


def claim_check_activities(store: ResultStore | None = None) -> list[Callable[..., Any]]:
    """The plan workflow's two store activities, on ``store`` (default: ``worker_store``)."""

    @activity.defn(name=DROP_RESULTS)
    async def drop_stored_results(request: dict[str, Any]) -> int:
        """Delete every result the calling plan run stored (its key prefix)."""
        prefix = plan_prefix(activity.info().workflow_id or "", _chain(request))
        return await asyncio.to_thread(worker_store(store).delete_prefix, prefix)

    @activity.defn(name=READ_RESULTS)
    async def read_stored_results(request: dict[str, Any]) -> dict[str, str]:
        """The JSON text of each returned reference the store still has and that is intact
        (a missing one keeps its preview: the plan's answer must not fail for it)."""
        own = plan_prefix(activity.info().workflow_id or "", _chain(request)) + "/"
        texts: dict[str, str] = {}
        for step, ref in dict(request.get("refs") or {}).items():
            if not is_reference(ref) or not _is_own_key(key_of(ref), own):
                continue
            try:
                data = await asyncio.to_thread(worker_store(store).get, key_of(ref))
            except (StoredResultMissing, StoredResultUnreadable):
                continue  # the model gets the reference and its preview
            if len(data) == ref["bytes"] and hashlib.sha256(data).hexdigest() == ref["sha256"]:
                texts[step] = data.decode()
        return texts

    return [drop_stored_results, read_stored_results]


def _chain(request: dict[str, Any]) -> str | None:
    chain = request.get("chain")
    return chain if isinstance(chain, str) else None
