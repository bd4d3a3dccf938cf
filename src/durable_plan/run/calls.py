"""One call the plan makes, as both runners see it: a bound step (or map item) to invoke,
and the in-process runner's way to invoke a tool (any async ``(name, args) -> result``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

Invoker = Callable[[str, dict[str, Any]], Awaitable[Any]]
"""Runs a tool in-process: its name and arguments in, its raw JSON result out."""


@dataclass(frozen=True)
class StepCall:
    """One tool invocation the runner must perform."""

    step_id: str
    tool: str
    args: dict[str, Any]
    level: int
    timeout_s: float | None
    retries: int | None
    local: bool
