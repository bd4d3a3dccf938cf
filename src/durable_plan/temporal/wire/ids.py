"""Workflow ids derived from untrusted text, bounded so the server accepts them.

A child plan's id is ``<parent id>/plan/<toolUseId>``: readable in the UI and
stable on replay (the model's ``toolUseId`` is recorded in history). The model
service chooses the ``toolUseId``, and Temporal refuses ids over 1,000
characters by default; a refused child id fails the parent's workflow task on
every retry. Long parts are cut and a digest of the whole keeps ids unique.
"""

from __future__ import annotations

import hashlib

MAX_WORKFLOW_ID_CHARS = 255
"""Well under the server's default 1,000: ids also appear in activity ids, task
tokens and search attributes, and a person reads them in the UI."""


MAX_KEY_CHARS = 128
"""A model-chosen key inside an id of ours (a direct call's ``toolUseId``)."""


def child_workflow_id(parent_id: str, kind: str, key: str) -> str:
    """``<parent>/<kind>/<key>``, or a bounded form ending in a digest of the full id."""
    full = f"{parent_id}/{kind}/{key}"
    if len(full) <= MAX_WORKFLOW_ID_CHARS:
        return full
    digest = _digest(full)
    room = MAX_WORKFLOW_ID_CHARS - len(kind) - len(digest) - 4  # three '/' and one '~'
    parent_part = parent_id[: room // 2]
    key_part = key[: room - len(parent_part)]
    return f"{parent_part}/{kind}/{key_part}~{digest}"


def bounded_key(key: str, limit: int = MAX_KEY_CHARS) -> str:
    """``key``, or its first characters and a digest of the whole (unique, at most
    ``limit`` characters): for a model-chosen part of an activity id or a call's path."""
    if len(key) <= limit:
        return key
    digest = _digest(key)
    return f"{key[: limit - len(digest) - 1]}~{digest}"


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
