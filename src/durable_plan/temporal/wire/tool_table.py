"""A plan's tool table on the wire: each tool's ``ToolOptions`` as JSON, compact.

Every plan's start event carries its tool table (and an agent step's child its own), so
options at a value that says "nothing" stay off, and so do those at the defaults
``COMPACT_TOOL_DEFAULTS`` fixes; reading a table back restores both.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import MISSING, asdict, fields
from types import MappingProxyType
from typing import Any

from durable_plan.language.options import ToolOptions

_OPTION_FIELDS = {f.name for f in fields(ToolOptions)}

_ROUTING_FIELDS = ("task_queue", "max_concurrent", "max_per_second")
"""Sent only when set: tool tables of plans without routing stay as they were."""
_WHEN_SET_FIELDS = (*_ROUTING_FIELDS, "output_schema", "saved_plan", "sandbox")
"""Sent only when set: tool tables without routing or return shapes stay byte-identical
(and a worker that predates a field ignores it)."""


def options_to_wire(options: ToolOptions | dict[str, Any]) -> dict[str, Any]:
    if isinstance(options, dict):
        return dict(options)
    wire = asdict(options)
    for name in _WHEN_SET_FIELDS:
        if wire.get(name) is None:
            wire.pop(name, None)
    return wire


COMPACT_TOOL_DEFAULTS: Mapping[str, Any] = MappingProxyType(
    {"kind": "function", "reuse": True, "retries": 2, "timeout_s": 60.0}
)
"""A tool's options the inputs' JSON form (``PlanInput.to_wire``) leaves off at these values.
Fixed here, not read from ``ToolOptions``: if a default changes, a table in flight still
reads back the rules its plan was started with."""


def table_to_wire(tools: Mapping[str, ToolOptions]) -> dict[str, Any]:
    """The tool table as the inputs' JSON form carries it (``COMPACT_TOOL_DEFAULTS`` off)."""
    return {name: _compact(options_to_wire(o), COMPACT_TOOL_DEFAULTS) for name, o in tools.items()}


def table_from_wire(data: Any, *, compact: bool) -> dict[str, ToolOptions]:
    """Read a tool table back: ``compact``, as ``table_to_wire`` wrote it; else every option
    a tool lacks takes ``ToolOptions``' own default."""
    tools = data or {}
    if not isinstance(tools, dict):
        raise TypeError("the workflow input's tool table is not an object")
    defaults: Mapping[str, Any] = COMPACT_TOOL_DEFAULTS if compact else {}
    return {str(n): _options_from_wire(o, defaults) for n, o in tools.items()}


def _compact(wire: dict[str, Any], defaults: Mapping[str, Any]) -> dict[str, Any]:
    """A tool's options without those left at a default that says "nothing" (None, False,
    "", [] and {}: every version reads them back alike): what the plan's start event
    carries per tool. Defaults that could change (timeouts, retries, reuse) stay, unless
    ``defaults`` fixes them (``COMPACT_TOOL_DEFAULTS``)."""
    return {
        k: v
        for k, v in wire.items()
        if not (k in _EMPTY_DEFAULTS and v == _EMPTY_DEFAULTS[k])
        and not (k in defaults and v == defaults[k] and type(v) is type(defaults[k]))
    }


def _empty_default(f: Any) -> Any:
    if f.default_factory is not MISSING:
        return f.default_factory()
    return f.default


_EMPTY_DEFAULTS = {
    f.name: _empty_default(f)
    for f in fields(ToolOptions)
    if _empty_default(f) is None
    or _empty_default(f) is False
    or (isinstance(_empty_default(f), str | list | dict) and not _empty_default(f))
}


def _options_from_wire(data: Any, defaults: Mapping[str, Any]) -> ToolOptions:
    if isinstance(data, ToolOptions):
        return data
    if not isinstance(data, dict):
        raise TypeError(f"not a tool's options: {str(data)[:200]}")
    merged = {**defaults, **data}
    return ToolOptions(**{k: v for k, v in merged.items() if k in _OPTION_FIELDS})
