"""The tools ``tests/durable/plans/test_call_paths.py`` calls on every path, and what each call did.

Apart from the workflow module so the workflow sandbox passes it through: the tools run in
this process (in-process, or in the test's worker's activities), so ``RUNS`` sees every
side effect, whichever path made the call.
"""

from __future__ import annotations

import asyncio
from typing import Any

from strands import tool
from strands.hooks import BeforeToolCallEvent

from durable_plan.tools.registry import ToolRegistry

RUNS: list[tuple[str, dict[str, Any]]] = []
"""(event, arguments) of every call that reached a tool body, in order."""
SLEEP_S = 2.5
"""How long ``sleepy`` takes: past its owner's 1 s timeout."""


@tool
async def charge(cents: int, note: str = "") -> dict[str, Any]:
    """Charge the card on file.

    Args:
        cents: The amount.
        note: A note for the statement.
    """
    RUNS.append(("charge", {"cents": cents, "note": note}))
    return {"charged": cents}


@tool
async def stamp(tag: str, note: str = "") -> dict[str, Any]:
    """Stamp a record.

    Args:
        tag: The record.
        note: What the stamp says.
    """
    RUNS.append(("stamp", {"tag": tag, "note": note}))
    return {"tag": tag, "note": note}


@tool
async def wobbly(tag: str) -> dict[str, Any]:
    """A call that always fails.

    Args:
        tag: The record.
    """
    RUNS.append(("wobbly", {"tag": tag}))
    raise RuntimeError("wobbly fell over")


@tool
async def sleepy(tag: str) -> dict[str, Any]:
    """A call slower than its owner allows.

    Args:
        tag: The record.
    """
    RUNS.append(("sleepy", {"tag": tag}))
    await asyncio.sleep(SLEEP_S)
    RUNS.append(("sleepy done", {"tag": tag}))
    return {"tag": tag}


async def blob(kib: int) -> dict[str, Any]:
    """A large result, for what a conversation can carry
    (tests/durable/plans/test_call_paths.py)."""
    return {"kib": kib, "data": "x" * (kib * 1024)}


TOOLS = ToolRegistry()
TOOLS.add(blob)
TOOLS.add(charge, requires_approval=True)
TOOLS.add(stamp)
TOOLS.add(wobbly, retries=2)
TOOLS.add(sleepy, timeout_s=1, retries=0)

OWNER_NOTE = "stamped by the owner's hook"


def owners_hook(event: BeforeToolCallEvent) -> None:
    """The owner's rule for ``stamp``: every stamp carries the owner's note (a rewritten
    input, so the tool's own record shows whether the hook ran on the path)."""
    if event.tool_use["name"] == "stamp":
        event.tool_use["input"]["note"] = OWNER_NOTE
