"""A return shape in a few words for the model: ``{name: str, hp: int, armour: int}``.

The plan tool's description goes with every model call, so each shape is written as
compactly as the model can still read it: Python-like type names, ``[T]`` for a list,
``A|B`` for a union, ``{...}`` where the shape is cut (deeper than three objects, or past
the character budget), ``, ...`` for an object that may have more fields than it lists.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from durable_plan.check.shapes.walk import Rooted, ShapeWalker

MAX_SHAPE_CHARS = 160
"""One tool's shape in the description; a longer one is cut to ``{...}`` deeper down."""
_NAMES = {
    "string": "str",
    "integer": "int",
    "number": "float",
    "boolean": "bool",
    "null": "null",
    "object": "object",
    "array": "list",
}

MAX_LISTED = 12
"""Fields named in one message; the rest are counted."""


def describe_shape(
    shape: Mapping[str, Any],
    max_chars: int = MAX_SHAPE_CHARS,
    root: Mapping[str, Any] | None = None,
) -> str:
    """The shape as one short line (cut shallower until it fits ``max_chars``). ``root``: the
    schema whose ``$defs`` its ``$ref``s name (an argument's schema is part of its tool's)."""
    text = "any"
    for depth in (3, 2, 1):
        text = _Writer(ShapeWalker(2_000), depth).write(Rooted(shape, root or shape), 0)
        if len(text) <= max_chars:
            return text
    return text[: max_chars - 4] + "...}" if text.startswith("{") else text[:max_chars]


class _Writer:
    def __init__(self, walker: ShapeWalker, depth: int) -> None:
        self.walker = walker
        self.depth = depth

    def write(self, at: Rooted, level: int) -> str:
        alts = self.walker.expand_known(at)
        if not alts:
            return "any"
        parts = list(dict.fromkeys(self._plain(alt, level) for alt in alts))
        return "|".join(parts) if "any" not in parts else "any"

    def _plain(self, alt: Rooted, level: int) -> str:
        node = alt.node
        if "const" in node:
            return json.dumps(node["const"])
        enum = node.get("enum")
        if isinstance(enum, list) and enum:
            return "|".join(json.dumps(v) for v in enum[:6]) + ("|..." if len(enum) > 6 else "")
        types = self.walker.types(alt)
        if len(types) == len(_NAMES):
            props = node.get("properties")
            if not isinstance(props, Mapping):
                return "any"
            types = frozenset({"object"})
        words = []
        for kind in ("object", "array", "string", "integer", "number", "boolean", "null"):
            if kind not in types:
                continue
            if kind == "object":
                words.append(self._object(alt, level))
            elif kind == "array":
                words.append(self._array(alt, level))
            else:
                words.append(_NAMES[kind])
        return "|".join(words)

    def _object(self, alt: Rooted, level: int) -> str:
        node = alt.node
        props = node.get("properties")
        extra = node.get("additionalProperties")
        if not isinstance(props, Mapping) or not props:
            if isinstance(extra, Mapping | Rooted) and level < self.depth:
                return f"{{str: {self.write(_child(extra, alt.root), level + 1)}}}"
            return "object"
        if level >= self.depth:
            return "{...}"
        required = node.get("required")
        optional = set(props) - set(required) if isinstance(required, list) else set()
        fields = [
            f"{name}{'?' if name in optional else ''}: "
            f"{self.write(_child(sub, alt.root), level + 1)}"
            for name, sub in props.items()
        ]
        if extra is not False:
            fields.append("...")
        return "{" + ", ".join(fields) + "}"

    def _array(self, alt: Rooted, level: int) -> str:
        items = alt.node.get("items")
        if not isinstance(items, Mapping | Rooted) or level >= self.depth:
            return "list"
        return f"[{self.write(_child(items, alt.root), level + 1)}]"


def _child(node: Any, root: Any) -> Rooted:
    return node if isinstance(node, Rooted) else Rooted(node, root)


def describe_signature(
    name: str,
    input_schema: Mapping[str, Any],
    description: str = "",
    output_schema: Mapping[str, Any] | None = None,
) -> str:
    """A tool as one line for a model that sees no spec of its own:
    ``fetch_order(order_id: str, full?: bool) -> {id: str, total: float}: Fetch an order.``

    Typed arguments (``?`` marks an optional one), the return shape when one is declared and
    the description's first line: what writing a step needs, at a tenth of the tool's spec
    (whose argument descriptions and examples stay with the tool itself)."""
    props = input_schema.get("properties")
    props = props if isinstance(props, Mapping) else {}
    required = input_schema.get("required")
    needed = {r for r in required if isinstance(r, str)} if isinstance(required, list) else set()
    written: list[str] = []
    used = 0
    for arg, sub in props.items():
        kind = (
            describe_shape(sub, MAX_ARG_CHARS, input_schema) if isinstance(sub, Mapping) else "any"
        )
        one = f"{' '.join(str(arg).split())[:MAX_ARG_CHARS]}{'' if arg in needed else '?'}: {kind}"
        if used + len(one) > MAX_ARGS_CHARS:  # whole arguments only; the rest counted
            written.append(f"...(+{len(props) - len(written)} more)")
            break
        written.append(one)
        used += len(one) + 2
    args = ", ".join(written)
    returns = f" -> {describe_shape(output_schema)}" if output_schema is not None else ""
    first = next((line.strip() for line in description.splitlines() if line.strip()), "")
    about = f": {first[:MAX_ABOUT_CHARS]}" if first and first != name else ""
    return f"{name}({args}){returns}{about}"


MAX_ARG_CHARS = 80
"""One argument's type (and name) in a signature; a longer one is cut to ``{...}`` deeper
down."""
MAX_ARGS_CHARS = 600
"""A signature's arguments in all: one tool's line is sent on every model call."""
MAX_ABOUT_CHARS = 120
"""The description's first line in a signature, at most."""


def listing(names: Sequence[str]) -> str:
    """``names``, the first ``MAX_LISTED`` of them, and how many more."""
    shown = ", ".join(names[:MAX_LISTED])
    more = len(names) - MAX_LISTED
    return f"{shown} and {more} more" if more > 0 else shown
