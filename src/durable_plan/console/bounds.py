"""Every value the console sends is bounded: long texts cut, long lists counted.

A plan is untrusted input, and so is what its tools returned: a 2 MiB result or a
thousand-item map must not become a page the browser chokes on. Cut here, once, and say
so in the answer (``cut``), so the page can tell the reader it sees a part.
"""

from __future__ import annotations

import json
from typing import Any

from durable_plan.console.settings import MAX_ITEMS, MAX_TEXT_CHARS


def cut_text(text: str | None, limit: int = MAX_TEXT_CHARS) -> str | None:
    if text is None or len(text) <= limit:
        return text
    return text[: limit - 1] + "…"


def preview(value: Any, limit: int = MAX_TEXT_CHARS) -> dict[str, Any]:
    """A value as JSON text of at most ``limit`` characters: ``{"text", "cut", "chars"}``."""
    text = json.dumps(value, ensure_ascii=False, default=str, indent=1)
    return {"text": cut_text(text, limit), "cut": len(text) > limit, "chars": len(text)}


def page(items: list[Any], limit: int = MAX_ITEMS) -> dict[str, Any]:
    """The first ``limit`` items and how many there are in all."""
    return {"items": items[:limit], "total": len(items)}
