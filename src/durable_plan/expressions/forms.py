"""What the parts of a constructor expression are (``[steps.a.x, 1]``, ``{"t": steps.o.t}``).

Kept apart from the parse and the dependency walk because it answers a different
question: not what an expression reads, but what value each part of an array or object
constructor will be, so the checks can type the parts against an argument's schema
(``check/shapes/constructed.py``). Read from JSONata's parsed tree, never from the text.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class PathForm:
    """A part that is a plain path from the root's ``steps`` (``steps.a.x``: ``("a",
    "x")``): its value is whatever the result holds there, or undefined."""

    path: tuple[str, ...]


@dataclass(frozen=True)
class LiteralForm:
    """A part that is one literal: a string, number, ``true``, ``false`` or ``null``."""

    value: Any


@dataclass(frozen=True)
class ListForm:
    """An array constructor. JSONata splices a part whose value is an array (one level)
    and drops a part that is undefined; a part that is itself an array constructor is
    kept whole, as one item. ``None``: a part the analysis cannot tell (any value)."""

    parts: tuple[Form | None, ...]


@dataclass(frozen=True)
class ObjectForm:
    """An object constructor with literal keys (a key whose value is undefined is left
    out). ``None``: a value the analysis cannot tell."""

    entries: tuple[tuple[str, Form | None], ...]


Form = PathForm | LiteralForm | ListForm | ObjectForm


_LITERAL_TYPES = frozenset({"string", "number", "value"})


def _literal(node: Any) -> tuple[Any, ...]:
    """``(value,)`` for an expression that is one literal; ``()`` otherwise."""
    if getattr(node, "type", None) not in _LITERAL_TYPES:
        return ()
    if any(getattr(node, name, None) for name in ("stages", "predicate", "group", "keep_array")):
        return ()
    value = getattr(node, "value", None)
    if value is None or isinstance(value, str | bool | int | float):
        return (value,)
    return ()


MAX_FORM_DEPTH = 8
"""Constructors nested deeper than this are parts the analysis cannot tell."""
_PARSER_ATTRS = frozenset({"_outer_instance", "id", "position", "bp", "lbp", "level"})
"""The parser's own bookkeeping on every node."""
_PLAIN = _PARSER_ATTRS | {"value", "type"}
"""The attributes a literal or a path's name may set and still be only that: anything
else (a predicate, a stage, a focus, ``[]``, a sort, a group) changes what it reads."""
_CONSTRUCTOR = _PLAIN | {"expressions", "lhs_object", "consarray"}
_PATH = _PLAIN | {"steps"}


def _constructed(node: Any) -> ListForm | ObjectForm | None:
    """The whole expression's constructor, if it is one (``[..]``, ``{..}``) and nothing
    is applied to its result (``[a, b][0]`` is not)."""
    form = _form(node, 0)
    return form if isinstance(form, ListForm | ObjectForm) else None


def _form(node: Any, depth: int) -> Form | None:
    """What one part of a constructor is; None when the analysis cannot tell."""
    if not hasattr(node, "__dict__"):
        return None
    kind = getattr(node, "type", None)
    value = getattr(node, "value", None)
    if kind in _LITERAL_TYPES and _only(node, _PLAIN):
        scalar = value is None or isinstance(value, str | bool | int | float)
        return LiteralForm(value) if scalar else None
    if kind == "path" and _only(node, _PATH):
        return _path_form(list(getattr(node, "steps", None) or []))
    if kind != "unary" or depth >= MAX_FORM_DEPTH or not _only(node, _CONSTRUCTOR):
        return None
    if value == "[" and not getattr(node, "lhs_object", None):
        parts = getattr(node, "expressions", None)
        if isinstance(parts, list):
            return ListForm(tuple(_form(part, depth + 1) for part in parts))
    if value == "{" and not getattr(node, "expressions", None):
        pairs = getattr(node, "lhs_object", None)
        if not isinstance(pairs, list):
            return None
        entries: list[tuple[str, Form | None]] = []
        keys: set[str] = set()
        for pair in pairs:
            if not (isinstance(pair, list | tuple) and len(pair) == 2):
                return None
            key = pair[0]
            if getattr(key, "type", None) != "string" or not _only(key, _PLAIN):
                return None  # a computed key: which keys the object has is unknown
            if not isinstance(key.value, str) or key.value in keys:
                return None  # (a repeated key fails at run time: JSONata's D1009)
            keys.add(key.value)
            entries.append((key.value, _form(pair[1], depth + 1)))
        return ObjectForm(tuple(entries))
    return None


def _path_form(parts: list[Any]) -> PathForm | None:
    """``steps.a.x`` (or ``$.steps.a.x``, ``$$.steps.a.x``) of names only."""
    if parts and getattr(parts[0], "type", None) == "variable" and parts[0].value in ("", "$"):
        if not _only(parts[0], _PLAIN):
            return None  # ``$[1].steps.a.x``: a predicate on the root, undefined at run time
        parts = parts[1:]  # at a constructor's top the context is the root
    if len(parts) < 2 or not _is_name(parts[0], "steps"):
        return None
    names: list[str] = []
    for part in parts:
        if getattr(part, "type", None) != "name" or not isinstance(part.value, str):
            return None
        if not _only(part, _PLAIN):
            return None
        names.append(part.value)
    return PathForm(tuple(names[1:]))


def _only(node: Any, allowed: frozenset[str]) -> bool:
    """No attribute outside ``allowed`` is set (to anything but None, False or empty)."""
    return all(
        name in allowed or value is None or value is False or value == []
        for name, value in vars(node).items()
    )


def _is_name(node: Any, value: str) -> bool:
    return getattr(node, "type", None) == "name" and getattr(node, "value", None) == value
