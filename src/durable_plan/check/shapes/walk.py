"""Paths walked through a return shape: where a path a plan reads is ruled out, or what its
value may be, within one deterministic budget per plan (``ShapeWalker``).

Everything the walk cannot follow is accepted (the rule of every shape check:
``durable_plan.check.shapes``); nothing here reads a clock or iterates a set.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from durable_plan.check.shapes.compact import (
    JSON_TYPES,
    MAX_ALTERNATIVES,
    declared_types,
    json_type,
)

ANY_TYPE = frozenset(JSON_TYPES)
ONE_TYPE = {name: frozenset({name}) for name in JSON_TYPES}

MAX_REF_HOPS = 32
"""``$ref``s (and nested unions) followed to reach one node: a cycle ends here."""
MAX_ARRAY_NESTING = 8
MAX_WALK_STEPS = 50_000
"""Schema nodes the walk of one plan's paths may visit (a few milliseconds); past it, the
remaining paths are accepted unchecked."""

STRUCTURAL = (
    "type",
    "properties",
    "additionalProperties",
    "items",
    "prefixItems",
    "anyOf",
    "allOf",
    "$ref",
    "enum",
    "const",
)


# -- walking -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Rooted:
    """A shape node and the schema its local ``$ref``s resolve against. A ``Rooted`` may
    also stand inside another shape's node (a map's result embeds its body's shape)."""

    node: Any
    root: Any


@dataclass(frozen=True)
class RuledOut:
    """Where a path stops: ``path[at]`` cannot exist in the value that ``path[:at]`` reads.

    ``fields``: the fields that may exist there (objects' properties, in the schema's
    order); ``kinds``: the other types the value may have there (``string``, ``null``);
    ``items``: the value there is a list, and these describe its items."""

    at: int
    fields: tuple[str, ...]
    kinds: tuple[str, ...]
    items: bool
    alternatives: tuple[Rooted, ...] = field(default=(), repr=False, compare=False)


@dataclass(frozen=True)
class Reached:
    """The path may exist. ``alternatives``: what its value may be (None: anything);
    ``through_list``: it read through a list, so its value is a sequence of those."""

    alternatives: tuple[Rooted, ...] | None
    through_list: bool

    def types(self, walker: ShapeWalker) -> frozenset[str]:
        """The JSON types the value may have (every type when unknown or a sequence)."""
        if self.alternatives is None or self.through_list:
            return ANY_TYPE
        found: set[str] = set()
        for alt in self.alternatives:
            found |= walker.types(alt)
        return frozenset(found)


class _Unknown(Exception):
    """The walk cannot tell: the path is accepted."""


class ShapeWalker:
    """Walks paths through shapes within one deterministic budget (one per checked plan)."""

    def __init__(self, budget: int = MAX_WALK_STEPS) -> None:
        self.budget = budget

    def _spend(self) -> None:
        self.budget -= 1
        if self.budget < 0:
            raise _Unknown

    def walk(self, shape: Rooted, path: Sequence[str]) -> Reached | RuledOut:
        """Follow ``path`` (field names) from a value of ``shape``."""
        try:
            alts = self.expand(shape)
            through_list = False
            for at, name in enumerate(path):
                found: list[Rooted] = []
                for alt in alts:
                    children, listed = self._field(alt, name, 0)
                    found += children
                    through_list = through_list or listed
                if not found:
                    return self._ruled_out(at, alts)
                alts = [e for child in found for e in self.expand(child)]
                if len(alts) > MAX_ALTERNATIVES * 4:
                    raise _Unknown
            return Reached(tuple(alts), through_list)
        except (_Unknown, RecursionError):
            return Reached(None, True)

    def expand(self, at: Rooted, hops: int = 0) -> list[Rooted]:
        """The plain alternatives a node stands for (no ``$ref``, union or ``allOf`` left);
        raises ``_Unknown`` when that cannot be told within the bounds."""
        self._spend()
        node, root = at.node, at.root
        if isinstance(node, Rooted):
            return self.expand(node, hops + 1)
        if not isinstance(node, Mapping):
            raise _Unknown
        if hops > MAX_REF_HOPS:
            raise _Unknown
        ref = node.get("$ref")
        if isinstance(ref, str):
            # With siblings, $ref is one conjunct of several: any one is a superset.
            return self.expand(Rooted(_resolve(ref, root), root), hops + 1)
        branches = node.get("anyOf")
        if not isinstance(branches, list):
            branches = node.get("oneOf")  # a schema that was not compacted: the same union
        if isinstance(branches, list):
            alts: list[Rooted] = []
            for branch in branches:
                alts += self.expand(_child(branch, root), hops + 1)
            if len(alts) > MAX_ALTERNATIVES:
                raise _Unknown
            return alts
        conjuncts = node.get("allOf")
        if isinstance(conjuncts, list) and conjuncts:
            # Every conjunct holds of the value, so any one of them is a superset: keep
            # the one that says most (a closed object, else a reference, else the first).
            own = {k: v for k, v in node.items() if k != "allOf"}
            candidates = [own, *conjuncts]
            pick = next((c for c in candidates if _closed_object(c)), None)
            if pick is None:
                pick = next((c for c in conjuncts if isinstance(c, Mapping) and "$ref" in c), None)
            if pick is None:
                pick = own if any(k in own for k in STRUCTURAL) else conjuncts[0]
            return self.expand(_child(pick, root), hops + 1)
        return [at]

    def expand_known(self, at: Rooted) -> list[Rooted]:
        """``expand``, or nothing when it cannot be told (for suggestions only)."""
        try:
            return self.expand(at)
        except (_Unknown, RecursionError):
            return []

    def always_has(self, shape: Rooted, path: Sequence[str]) -> bool:
        """Every value of ``shape`` has ``path``: each name is a required property of every
        alternative on the way, and each of them is an object (not a list, which may be
        empty, nor a value that may be null). Else the path may be undefined (and an
        array constructor drops it)."""
        try:
            alts = self.expand(shape)
            for name in path:
                found: list[Rooted] = []
                for alt in alts:
                    node = alt.node
                    required, props = node.get("required"), node.get("properties")
                    if self.types(alt) != ONE_TYPE["object"]:
                        return False
                    if not (isinstance(required, list) and name in required):
                        return False
                    if not (isinstance(props, Mapping) and name in props):
                        return False
                    found += self.expand(_child(props[name], alt.root))
                if len(found) > MAX_ALTERNATIVES * 4:
                    return False
                alts = found
            return True
        except (_Unknown, RecursionError):
            return False

    def alternatives(self, at: Rooted) -> list[Rooted] | None:
        """``expand``, or None when it cannot be told (the value may be anything)."""
        try:
            return self.expand(at)
        except (_Unknown, RecursionError):
            return None

    def items_of(self, alt: Rooted) -> list[Rooted]:
        """The schemas an item of a plain array node may have: any of its ``prefixItems``
        or its ``items`` (anything when it has none). Positions are not kept: an array
        constructor splices its parts, so which schema an item meets is not known."""
        return [_child(item, alt.root) for item in _item_schemas(alt.node)]

    def item_types(self, alts: Iterable[Rooted]) -> frozenset[str]:
        """The JSON types an item of any of these arrays may have."""
        found: set[str] = set()
        for alt in alts:
            for item in self.items_of(alt):
                found |= self.value_types(item)
        return frozenset(found)

    def value_types(self, at: Rooted) -> frozenset[str]:
        """The JSON types a value of ``at`` may have (every type when unknown)."""
        try:
            found: set[str] = set()
            for alt in self.expand(at):
                found |= self.types(alt)
            return frozenset(found)
        except (_Unknown, RecursionError):
            return ANY_TYPE

    def types(self, alt: Rooted) -> frozenset[str]:
        """The JSON types a plain node allows (``type``, else ``const`` / ``enum``)."""
        node = alt.node
        kind = node.get("type")
        if type(kind) is str and "nullable" not in node:  # nearly every node: one type
            return ONE_TYPE.get(kind, ANY_TYPE)
        declared = declared_types(kind)
        if declared is not None and node.get("nullable") is True:
            declared.append("null")  # OpenAPI's nullable, in a schema not compacted
        if declared is not None:
            return frozenset(declared)
        if "const" in node:
            return frozenset({json_type(node["const"])})
        enum = node.get("enum")
        if isinstance(enum, list) and enum:
            return frozenset(json_type(v) for v in enum)
        return ANY_TYPE

    def _field(self, alt: Rooted, name: str, nesting: int) -> tuple[list[Rooted], bool]:
        """The values ``name`` may read on a plain node, and whether it read list items."""
        self._spend()
        types = self.types(alt)
        node, root = alt.node, alt.root
        found: list[Rooted] = []
        if "object" in types:
            props = node.get("properties")
            extra = node.get("additionalProperties")
            if isinstance(props, Mapping) and name in props:
                found.append(_child(props[name], root))
            elif node.get("patternProperties"):
                raise _Unknown  # a name may match a pattern (a schema not compacted)
            elif extra is False:
                pass
            elif isinstance(extra, Mapping | Rooted):
                found.append(_child(extra, root))
            else:
                raise _Unknown  # an open object: any field, of any shape
        listed = False
        if "array" in types:
            if nesting >= MAX_ARRAY_NESTING:
                raise _Unknown
            listed = True
            for item in _item_schemas(node):
                for plain in self.expand(_child(item, root)):
                    found += self._field(plain, name, nesting + 1)[0]
        return found, listed

    def _ruled_out(self, at: int, alts: Sequence[Rooted]) -> RuledOut:
        fields: dict[str, None] = {}
        kinds: dict[str, None] = {}
        items = False
        queue = [(alt, 0) for alt in alts]
        while queue:
            alt, nesting = queue.pop(0)
            types = self.types(alt)
            for kind in JSON_TYPES:
                if kind in types and kind not in ("object", "array"):
                    kinds.setdefault(kind)
            if "object" in types:
                props = alt.node.get("properties")
                if isinstance(props, Mapping):
                    fields.update(dict.fromkeys(props))
            if "array" in types and nesting < MAX_ARRAY_NESTING:
                items = True
                for item in _item_schemas(alt.node):
                    queue += [(p, nesting + 1) for p in self.expand(_child(item, alt.root))]
        return RuledOut(at, tuple(fields), tuple(kinds), items, tuple(alts))

    def fields_of(self, alts: Iterable[Rooted]) -> list[tuple[str, Rooted]]:
        """The named fields of the objects among ``alts`` (not through lists), in order."""
        out: list[tuple[str, Rooted]] = []
        for alt in alts:
            if "object" not in self.types(alt):
                continue
            props = alt.node.get("properties")
            if isinstance(props, Mapping):
                out += [(name, _child(sub, alt.root)) for name, sub in props.items()]
        return out


def _child(node: Any, root: Any) -> Rooted:
    return node if isinstance(node, Rooted) else Rooted(node, root)


def _item_schemas(node: Mapping[str, Any]) -> list[Any]:
    prefix = node.get("prefixItems")
    items = node.get("items")
    listed = list(prefix) if isinstance(prefix, list) else []
    listed.append(items if isinstance(items, Mapping | Rooted) else {})
    return listed


def _closed_object(node: Any) -> bool:
    return isinstance(node, Mapping) and node.get("additionalProperties") is False


def _resolve(ref: str, root: Any) -> Any:
    """A local JSON pointer (``#/$defs/Monster``) in ``root``; raises ``_Unknown`` if it
    points nowhere (a remote reference, a dropped keyword)."""
    if ref == "#":
        return root
    if not ref.startswith("#/"):
        raise _Unknown
    target: Any = root
    for part in ref[2:].split("/"):
        key = part.replace("~1", "/").replace("~0", "~")
        if isinstance(target, Mapping) and key in target:
            target = target[key]
        elif isinstance(target, list) and key.isdigit() and int(key) < len(target):
            target = target[int(key)]
        else:
            raise _Unknown
    return target


_WORDS = {
    "object": ("an object", "objects"),
    "array": ("a list", "lists"),
    "string": ("a string", "strings"),
    "integer": ("an integer", "integers"),
    "number": ("a number", "numbers"),
    "boolean": ("a boolean", "booleans"),
    "null": ("null", "null"),
}


def type_words(types: Iterable[str], *, plural: bool = False) -> str:
    """``{"integer", "null"}`` -> ``an integer or null`` (in JSON_TYPES order);
    ``plural``: ``integers or null`` (the items of a list)."""
    chosen = [_WORDS[t][plural] for t in JSON_TYPES if t in set(types)]
    return " or ".join(chosen) if chosen else "nothing"


def null_by_default(prop: Any) -> bool:
    """An argument whose default is null takes null (Strands writes ``Optional[int] =
    None`` as ``{"type": "integer", "default": null}``, and the tool accepts None)."""
    return isinstance(prop, Mapping) and "default" in prop and prop["default"] is None


def types_overlap(value: frozenset[str], parameter: frozenset[str]) -> bool:
    """Could a value of these types be one of those? Integers are numbers (and a number
    may be integral)."""
    if value & parameter:
        return True
    numeric = {"integer", "number"}
    return bool(value & numeric) and bool(parameter & numeric)
