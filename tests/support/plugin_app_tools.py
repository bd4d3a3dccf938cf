"""The tools and the own activity of the "existing app" ``test_durable_plan_plugin.py`` runs.

Their own module so the workflow sandbox can pass them through (``plugin_app_workflows``).
"""

from __future__ import annotations

from typing import Any

from temporalio import activity

from durable_plan.tools.registry import ToolRegistry

SECRET = "crypt-key-SECRET-5521"
BIG = 300 * 1024
"""Over External Storage's threshold (256 KiB) and the result store's (``store_over_bytes``)."""
TOOL_QUEUE_SUFFIX = "-vault"


async def look_up_monster(name: str) -> dict[str, Any]:
    """Look a monster up. Returns: {name: str, hp: int, note: str}"""
    return {"name": name, "hp": 3, "note": f"{SECRET} of {name}"}


async def read_scroll(pages: int) -> dict[str, Any]:
    """Read a long scroll. Returns: {text: str}"""
    return {"text": (SECRET + " ") * (pages * BIG // (len(SECRET) + 1) + 1)}


async def where_am_i() -> dict[str, Any]:
    """Which task queue this call ran on. Returns: {queue: str}"""
    return {"queue": activity.info().task_queue}


@activity.defn
async def note_answer(answer: str) -> str:
    """The app's own activity: its worker keeps it beside the plugin's."""
    return f"noted {len(answer)} chars"


APP_TOOLS = ToolRegistry()
APP_TOOLS.add(look_up_monster, timeout_s=30)
APP_TOOLS.add(read_scroll, timeout_s=30)


def routed_tools(tool_queue: str) -> ToolRegistry:
    """``APP_TOOLS`` plus ``where_am_i`` on a queue of its own, at most 2 at once."""
    registry = ToolRegistry()
    registry.add(look_up_monster, timeout_s=30)
    registry.add(where_am_i, timeout_s=30, task_queue=tool_queue, max_concurrent=2)
    return registry
