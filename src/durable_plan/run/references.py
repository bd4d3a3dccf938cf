"""Results stored by reference (claim check): what a reference looks like, and the rules for
reading one in a plan.

A durable plan's tool result over a threshold is kept in a result store
(``result_store.py``) and the step's result in history is a small reference
object::

    {"$ref": "durable-plan-store:<key>", "bytes": 20971520, "sha256": "...",
     "preview": "<the first 1,000 characters of the result's JSON>"}

Workflow code never does I/O, so it never sees the value behind a reference.
The rule that keeps plans sound without it: a binding of a tool step may pass
a stored result *whole* (``"steps.a"``), and the tool's activity reads the
value before calling the tool; any other expression that reads a stored result
(a field of it, a function of it, a ``when``, a prompt placeholder, a map's
``over``) fails the step with a message naming the step and the fix, rather
than silently computing over the reference. Pure functions only: this module
runs in workflow code.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from typing import Any

REF = "$ref"
SCHEME = "durable-plan-store:"
PREVIEW_CHARS = 1_000
"""Characters of the result's JSON text a reference carries, for people and models."""

MAP_TOOL = "map"  # control_steps.MAP, named here to keep this module free of imports


def reference(key: str, text: str) -> dict[str, Any]:
    """The reference to ``text`` (a result's compact JSON) stored under ``key``."""
    data = text.encode()
    return {
        REF: SCHEME + key,
        "bytes": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
        "preview": text[:PREVIEW_CHARS],
    }


RETURNED_PREVIEW_CHARS = 200
"""Characters of a returned result's JSON kept when the plan's answer has no room for it."""


RETURNED_OMITTED = "too large to return with the plan's other results; the step ran ok"


def returned_preview(value: Any, size: int, omitted: str = RETURNED_OMITTED) -> dict[str, Any]:
    """What a plan returns in place of a result its answer has no room for: its size and the
    start of its JSON. The step ran ok (the ledger says so, and the conversation remembers
    it): a later plan reads it whole as ``prior.<id>`` or passes it to a tool. ``omitted``
    says why, and what the reader can do."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return {"$preview": text[:RETURNED_PREVIEW_CHARS], "bytes": size, "omitted": omitted}


def fit_returned(
    returned: dict[str, Any],
    room: int,
    size_of: Callable[[Any], int],
    omitted: Callable[[str], str] = lambda _step: RETURNED_OMITTED,
) -> tuple[dict[str, Any], int]:
    """Returned results within ``room`` bytes of JSON: kept whole in ``returns`` order while
    they fit, each of the rest a preview (``returned_preview``, with ``omitted(step id)``);
    and how many became previews. The one rule for a plan's answer (``max_returned_bytes``)
    and for what a conversation has room for (``conversation_room``)."""
    kept: dict[str, Any] = {}
    previewed = 0
    for sid, value in returned.items():
        size = size_of(value)
        if size + len(sid) + 8 <= room:
            kept[sid] = value
            room -= size + len(sid) + 8
        else:
            kept[sid] = returned_preview(value, size, omitted(sid))
            room -= size_of(kept[sid]) + len(sid) + 8
            previewed += 1
    return kept, previewed


def is_reference(value: Any) -> bool:
    """True for a reference object made by ``reference`` (by shape: a plan cannot tell
    a forged one from a real one, which is why the store only serves a plan its own keys)."""
    if type(value) is not dict:
        return False
    ref = value.get(REF)
    return (
        isinstance(ref, str)
        and ref.startswith(SCHEME)
        and isinstance(value.get("sha256"), str)
        and type(value.get("bytes")) is int
        and value["bytes"] >= 0  # budgets subtract it: a negative size would grow them
    )


def key_of(ref: dict[str, Any]) -> str:
    text: str = ref[REF]
    return text[len(SCHEME) :]


def holds_reference(tool: str, value: Any) -> bool:
    """True if a step's result is a reference, or a map's result lists some (one level:
    the only places references appear in results)."""
    if is_reference(value):
        return True
    if tool == MAP_TOOL and type(value) is dict:
        results = value.get("results")
        return type(results) is list and any(is_reference(item) for item in results)
    return False


def iter_references(value: Any, depth: int = 0) -> Iterator[dict[str, Any]]:
    """Every reference inside a (bounded, plain JSON) value, depth first."""
    if depth > 100:
        return
    if type(value) is dict:
        if is_reference(value):
            yield value
            return
        for item in value.values():
            yield from iter_references(item, depth + 1)
    elif type(value) is list:
        for item in value:
            yield from iter_references(item, depth + 1)


def size_text(size: int) -> str:
    """20971520 -> "20.0 MiB"."""
    if size >= 1024 * 1024:
        return f"{size / (1024 * 1024):.1f} MiB"
    return f"{size / 1024:.0f} KiB"


def unwrapped_reference_message(field: str, step_id: str, tool: str) -> str:
    """Existing activities and MCP tools run without the wrapper that reads stored results."""
    return (
        f"{field} passes the result of step '{step_id}', stored by reference, to tool "
        f"'{tool}' (a Temporal activity called as it is, or an MCP tool), which cannot read "
        "a result stored by reference; bind a smaller value, or call it from a tool "
        "registered as a function (ToolRegistry.add), whose wrapper reads the value"
    )


def read_inside_message(field: str, step_id: str, value: Any, *, passes_whole: bool) -> str:
    """Why an expression may not read a stored result, and what to write instead."""
    if is_reference(value):
        size = size_text(value["bytes"])
        what = f"the result of step '{step_id}' is stored by reference ({size})"
    else:
        what = f"the results of step '{step_id}''s items are stored by reference"
    if passes_whole:
        fix = (
            f'bind the whole result ("steps.{step_id}") to an argument of a tool step: its '
            "activity receives the value and the tool picks what it needs; or make the tool "
            "return less"
        )
    else:
        fix = (
            f'pass the whole result ("steps.{step_id}") to a tool step (an argument of its '
            "bind), which receives the value; or make the tool return less"
        )
    return (
        f"{field} reads inside a stored result: {what}, kept outside the workflow's history, "
        f"so the plan cannot look inside it; {fix}"
    )
