"""Where a plan's results are kept in a result store: key prefixes, keys, and the owner
record beside them.

Apart from the stores themselves (``result_store.py``) because the keys are the
contract every store, the claim check and the retention sweep share: one digest per plan
run (``<plan digest>/<step id>/<attempt>``), and ``<plan digest>/owner.json`` naming the
workflow, so a sweep can ask the server whether the plan still runs.
"""

from __future__ import annotations

import hashlib
import json
import re
from urllib.parse import quote


def plan_prefix(workflow_id: str, chain: str | None = None) -> str:
    """The key prefix of one plan run's results: a digest, because workflow ids may hold
    any character (``/``, ``..``) and be long. ``chain``: the first run id of the plan's
    chain (None: the workflow id alone, as plans recorded before it did)."""
    scope = workflow_id if chain is None else json.dumps([workflow_id, chain])
    return hashlib.sha256(scope.encode()).hexdigest()[:32]


def result_key(workflow_id: str, step_id: str, attempt: int, chain: str | None = None) -> str:
    """``<plan digest>/<step id>/<attempt>`` (a map item's ``rolls[2]`` is quoted)."""
    return f"{plan_prefix(workflow_id, chain)}/{quote(step_id, safe='')}/{attempt}"


OWNER = "owner.json"


def owner_key(prefix: str) -> str:
    """Where the workflow a prefix belongs to is written (by the first result it stores)."""
    return f"{prefix}/{OWNER}"


def owner_record(workflow_id: str, chain: str | None) -> bytes:
    return json.dumps({"workflow_id": workflow_id, "chain": chain}).encode()


def _owner_of(data: bytes) -> tuple[str, str | None] | None:
    try:
        owner = json.loads(data)
    except ValueError:
        return None
    if not isinstance(owner, dict) or not isinstance(owner.get("workflow_id"), str):
        return None
    chain = owner.get("chain")
    return owner["workflow_id"], chain if isinstance(chain, str) else None


def _checked_key(key: str) -> str:
    parts = key.split("/")
    bad = not key or key.startswith("/") or "\\" in key or ":" in key
    if bad or any(p in ("", ".", "..") for p in parts):
        raise ValueError(f"not a result store key: {key!r}")
    return key


_PREFIX = re.compile(r"[0-9a-f]{32}")
_STORED_KEY = re.compile(r"[0-9a-f]{32}/[^/]+/[0-9]+")
"""What ``result_key`` makes: a retention sweep deletes only objects shaped like this, so
a store pointed at the wrong directory or bucket loses nothing else."""
