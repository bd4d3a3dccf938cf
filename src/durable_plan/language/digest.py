"""One text and one digest per JSON value: what a reused step and an approval are bound to.

Canonical JSON (sorted keys, no spaces), so every process (a worker, a person's client,
another hash seed) computes the same digest of the same arguments.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def args_key(args: Mapping[str, Any]) -> str:
    """SHA-256 of the canonical JSON: a step reused is the very call that ran before."""
    return hashlib.sha256(canonical_json(args).encode()).hexdigest()


def args_digest(args: Mapping[str, Any]) -> str:
    """Its first 16 hex digits: short enough for a person to pass to ``decide --digest``."""
    return args_key(args)[:16]
