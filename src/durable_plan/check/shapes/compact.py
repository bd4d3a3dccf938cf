"""A return shape compacted: the keywords of a JSON Schema that describe structure, within
bounds (``compact_shape``), and the shape of a literal value (``literal_shape``).

Dropping a keyword only ever allows more values, so compaction is always sound (the rule
of every shape check: ``durable_plan.check.shapes``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

JSON_TYPES = ("object", "array", "string", "integer", "number", "boolean", "null")

MAX_SHAPE_BYTES = 8 * 1024
"""A compacted shape larger than this as JSON is dropped (unknown): it travels in every
durable plan's tool table, and comes from servers and owners alike."""
MAX_SHAPE_DEPTH = 32
"""Deeper parts of a schema become "anything"."""
MAX_SHAPE_NODES = 4_000
"""Schema nodes one compaction visits; past it, the rest becomes "anything"."""
MAX_ENUM = 64
MAX_ALTERNATIVES = 32
"""Branches of one union the walk follows; a wider union is "anything"."""


# -- compaction: what the checks keep of a schema ------------------------------------------


def compact_shape(schema: Any) -> dict[str, Any] | None:
    """``schema`` reduced to its structure, or None when it says nothing (``{}``, an
    object of any fields) or is over the bounds. Safe on untrusted input: bounded depth,
    nodes and bytes; regexes are dropped, never compiled."""
    if not isinstance(schema, Mapping):
        return None
    compactor = _Compactor()
    root = compactor.node(schema, 0)
    for key in ("$defs", "definitions"):
        defs = schema.get(key)
        if isinstance(defs, Mapping):
            kept = {n: compactor.node(d, 1) for n, d in defs.items() if isinstance(n, str)}
            if kept:
                root[key] = kept
    if says_nothing(root):
        return None
    try:
        text = json.dumps(root, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError):
        return None
    return root if len(text) <= MAX_SHAPE_BYTES else None


def says_nothing(shape: Mapping[str, Any]) -> bool:
    """True for a shape that rules nothing out: any value, or an object of any fields."""
    own = {k: v for k, v in shape.items() if k not in ("$defs", "definitions", "required")}
    return not own or own == {"type": "object"}


class _Compactor:
    def __init__(self) -> None:
        self.nodes = 0

    def node(self, schema: Any, depth: int) -> dict[str, Any]:
        self.nodes += 1
        if not isinstance(schema, Mapping) or depth > MAX_SHAPE_DEPTH:
            return {}  # true, false (no value: a superset is "anything") or too deep
        if self.nodes > MAX_SHAPE_NODES:
            return {}
        out: dict[str, Any] = {}
        types = declared_types(schema.get("type"))
        if types is not None:
            if schema.get("nullable") is True and "null" not in types:
                types.append("null")  # OpenAPI's nullable adds null to the type
            out["type"] = types[0] if len(types) == 1 else types
        props = schema.get("properties")
        if isinstance(props, Mapping):
            out["properties"] = {
                k: self.node(v, depth + 1) for k, v in props.items() if isinstance(k, str)
            }
        patterns = schema.get("patternProperties")
        extra = schema.get("additionalProperties")
        if not (isinstance(patterns, Mapping) and patterns):
            # With patternProperties, names matching a pattern exist beside the listed
            # ones and take another schema: such an object counts as open.
            if extra is False:
                out["additionalProperties"] = False
            elif isinstance(extra, Mapping):
                sub = self.node(extra, depth + 1)
                if sub:
                    out["additionalProperties"] = sub
        items = schema.get("items")
        prefix = schema.get("prefixItems")
        if isinstance(items, Mapping):
            out["items"] = self.node(items, depth + 1)
        elif isinstance(items, list) and items:  # draft 4-7 tuples: the rest is open
            out["prefixItems"] = [self.node(i, depth + 1) for i in items[:MAX_ALTERNATIVES]]
        if isinstance(prefix, list) and prefix:
            out["prefixItems"] = [self.node(i, depth + 1) for i in prefix[:MAX_ALTERNATIVES]]
        branches: list[dict[str, Any]] = []
        for key in ("anyOf", "oneOf"):
            listed = schema.get(key)
            if isinstance(listed, list) and 0 < len(listed) <= MAX_ALTERNATIVES:
                branches += [self.node(b, depth + 1) for b in listed]
        if branches and len(branches) <= MAX_ALTERNATIVES:
            out["anyOf"] = branches  # oneOf's values are some of anyOf's: a superset
        conjuncts = schema.get("allOf")
        if isinstance(conjuncts, list) and 0 < len(conjuncts) <= MAX_ALTERNATIVES:
            out["allOf"] = [self.node(c, depth + 1) for c in conjuncts]
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref.startswith("#") and len(ref) <= 512:
            out["$ref"] = ref
        enum = schema.get("enum")
        if isinstance(enum, list) and 0 < len(enum) <= MAX_ENUM and all(map(_scalar, enum)):
            out["enum"] = list(enum)
        if "const" in schema and _scalar(schema["const"]):
            out["const"] = schema["const"]
        required = schema.get("required")
        if isinstance(required, list) and isinstance(props, Mapping):
            names = [r for r in required if isinstance(r, str) and r in props]
            if names:
                out["required"] = names
        return out


def declared_types(value: Any) -> list[str] | None:
    listed = [value] if isinstance(value, str) else value
    if not isinstance(listed, list):
        return None
    types = [t for t in JSON_TYPES if t in listed]
    return types or None


def _scalar(value: Any) -> bool:
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return not isinstance(value, str) or len(value) <= 200
    if isinstance(value, int):
        return value.bit_length() <= 64
    return isinstance(value, float) and math.isfinite(value)


def literal_shape(value: Any, depth: int = 0) -> dict[str, Any]:
    """The shape of one known JSON value (a reduce's literal ``initial``): its type, and for
    an object its fields (closed)."""
    if depth > 8:
        return {}
    if isinstance(value, Mapping):
        props = {str(k): literal_shape(v, depth + 1) for k, v in list(value.items())[:200]}
        if len(value) > 200:
            return {"type": "object"}
        return {"type": "object", "properties": props, "additionalProperties": False}
    if isinstance(value, list):
        return {"type": "array"}
    return {"type": json_type(value)}


def json_type(value: Any) -> str:
    """The JSON Schema type name of a plain JSON value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "integer" if value.is_integer() else "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"
