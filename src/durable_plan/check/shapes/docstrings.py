"""A tool's return shape from its docstring's ``Returns:`` section, in the seed's convention:
``An object shaped {"name": str, "hp": int}`` (also ``A list of objects shaped {...}``,
``{"name", "hp"}`` for keys alone, ``str | None``, ``list[int]``, ``"a" | "b"`` and nested
objects). Only a section that is clearly a shape counts (``declared`` says why).
"""

from __future__ import annotations

import ast
import gc
import inspect
import re
from typing import Any

from durable_plan.check.shapes.compact import compact_shape

__all__ = ["docstring_shape"]

MAX_DOC_SHAPE_CHARS = 2_000
"""A ``Returns:`` section longer than this is prose, not a shape."""
MAX_DEPTH = 16
"""Nesting followed in a docstring's shape or an annotation; deeper says nothing."""


_RETURNS = re.compile(r"^(\s*)Returns?\s*:\s*(.*)$")
_SECTION = re.compile(r"^(\s*)[A-Z][A-Za-z ]{1,30}:\s*$")


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_PREFIX_WORDS = _words(
    "a an the json object objects dict dicts dictionary dictionaries mapping record records "
    "list lists array arrays of shaped like with keys fields shape form in each"
)
"""The only words allowed before the shape ("An object shaped", "A list of objects like")."""
_LISTS = _words("list lists array arrays")
_UNSURE = _words(
    "or none null empty nothing unless if otherwise missing may might optional optionally "
    "sometimes error errors either extra more other others additional etc plus also "
    "including include includes"
)
"""Words after the shape that make it unsure ("or None", "plus other keys"): no shape."""
_TYPE_NAMES: dict[str, dict[str, Any]] = {
    "str": {"type": "string"},
    "string": {"type": "string"},
    "int": {"type": "integer"},
    "integer": {"type": "integer"},
    "float": {"type": "number"},
    "number": {"type": "number"},
    "bool": {"type": "boolean"},
    "boolean": {"type": "boolean"},
    "None": {"type": "null"},
    "null": {"type": "null"},
    "list": {"type": "array"},
    "List": {"type": "array"},
    "array": {"type": "array"},
    "dict": {"type": "object"},
    "Dict": {"type": "object"},
    "object": {},
    "Any": {},
    "any": {},
}
_ARRAYS = frozenset({"list", "List", "Sequence", "tuple", "Tuple", "set", "array"})
_OBJECTS = frozenset({"dict", "Dict", "Mapping"})


def docstring_shape(doc: str | None) -> dict[str, Any] | None:
    """The shape a ``Returns:`` section states in the seed's convention, or None.

    Only a section that is clearly a shape is one: the shape stands alone after a few
    words ("An object shaped"), not as part of a type (``dict[str, Any]: the user
    record``, Google style), and is followed by nothing or by other sentences that do not
    make it unsure ("or None", "plus other keys") nor add another shape. A shape written
    with example values (``{"name": "Bob", "manager": null}``) is not one: an example's
    ``null`` says nothing of the field's type, nor its keys of the result's."""
    text = _returns_section(doc or "")
    if text is None or len(text) > MAX_DOC_SHAPE_CHARS:
        return None
    start = min((i for i in (text.find("{"), text.find("[")) if i >= 0), default=-1)
    if start < 0:
        return None
    if start > 0 and not (text[start - 1].isspace() or text[start - 1] == ":"):
        return None  # dict[str, Any], List[Monster]: a type, not a shape
    end = _balanced_end(text, start)
    if end is None:
        return None
    prefix, body, suffix = text[:start], text[start:end], text[end:]
    words = re.findall(r"[A-Za-z]+", prefix.lower())
    if any(w not in _PREFIX_WORDS for w in words) or re.search(r"[^\sA-Za-z:]", prefix):
        return None
    if _UNSURE & set(re.findall(r"[a-z]+", suffix.lower())) or re.search(r"[\[{]", suffix):
        return None
    try:
        tree = _parse(body)
        shape = _doc_value(tree, 0)
    except (SyntaxError, ValueError, RecursionError, MemoryError, _NotAShape):
        return None
    if _LISTS & set(words) and body.startswith("{"):
        shape = {"type": "array", "items": shape}
    return compact_shape(shape)


def _parse(text: str) -> ast.expr:
    """``ast.parse`` with the collector paused: CPython 3.11 can fail a parse with
    "SystemError: AST constructor recursion depth mismatch" when a finalizer runs Python
    code in the middle of it (an async generator closed by the collector, as Strands leaves
    them), and a tool's shape must not depend on when the collector ran."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        return ast.parse(text, mode="eval").body
    finally:
        if enabled:
            gc.enable()


def _returns_section(doc: str) -> str | None:
    lines = inspect.cleandoc(doc).splitlines()
    for n, line in enumerate(lines):
        match = _RETURNS.match(line)
        if match is None:
            continue
        indent = len(match.group(1))
        parts = [match.group(2)]
        for later in lines[n + 1 :]:
            section = _SECTION.match(later)
            if section is not None and len(section.group(1)) <= indent:
                break
            parts.append(later.strip())
        return " ".join(" ".join(parts).split())
    return None


def _balanced_end(text: str, start: int) -> int | None:
    """The index after the bracket that closes ``text[start]`` (quotes respected)."""
    depth = 0
    quote: str | None = None
    for i in range(start, len(text)):
        ch = text[i]
        if quote is not None:
            if ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
        elif ch in "{[(":
            depth += 1
        elif ch in "}])":
            depth -= 1
            if depth == 0:
                return i + 1
    return None


class _NotAShape(Exception):
    """The bracketed text is not a shape in the seed's convention."""


def _doc_value(node: ast.AST, depth: int) -> dict[str, Any]:
    """A shape in the seed's convention: ``{"key": type, ...}``, ``[type]``, ``{"a", "b"}``."""
    if depth > MAX_DEPTH:
        return {}
    if isinstance(node, ast.Dict):
        props: dict[str, Any] = {}
        for key, value in zip(node.keys, node.values, strict=True):
            if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
                raise _NotAShape  # {**x}, {1: ...}: not a list of fields
            props[key.value] = _doc_type(value, depth + 1, alone=True)
        return {
            "type": "object",
            "properties": props,
            "required": list(props),
            "additionalProperties": False,
        }
    if isinstance(node, ast.Set):
        names = []
        for element in node.elts:
            if not (isinstance(element, ast.Constant) and isinstance(element.value, str)):
                raise _NotAShape
            names.append(element.value)
        props = {name: {} for name in names}
        return {"type": "object", "properties": props, "additionalProperties": False}
    if isinstance(node, ast.List):
        if len(node.elts) == 1:
            return {"type": "array", "items": _doc_type(node.elts[0], depth + 1, alone=True)}
        for element in node.elts:  # [str, int]: its items' types, or an example
            _doc_type(element, depth + 1, alone=True)
        return {"type": "array"}
    return _doc_type(node, depth, alone=True)


def _doc_type(node: ast.AST, depth: int, *, alone: bool = False) -> dict[str, Any]:
    """A type in a shape: ``str``, ``int | None``, ``list[str]``, ``Optional[int]``,
    ``"a" | "b"`` (literal strings, in a union).

    ``alone``: the whole type of a field or an item. A value there that is not a type
    (``"Bob"``, ``42``, ``true``, a lone ``null``) is an example: ``_NotAShape``."""
    if depth > MAX_DEPTH:
        return {}
    if isinstance(node, ast.Dict | ast.Set | ast.List):
        return _doc_value(node, depth + 1)
    if isinstance(node, ast.Constant):
        if node.value is Ellipsis:
            return {}  # [...], {"items": ...}: left unsaid
        if isinstance(node.value, str) and node.value in _TYPE_NAMES and node.value != "null":
            return dict(_TYPE_NAMES[node.value])  # "str": a type name, quoted
        if alone:
            raise _NotAShape  # an example value
        if node.value is None:
            return {"type": "null"}
        if isinstance(node.value, str):
            return {"const": node.value}  # "treasury" | "engineering"
        raise _NotAShape
    if isinstance(node, ast.Name | ast.Attribute):
        name = node.id if isinstance(node, ast.Name) else node.attr
        if name in _EXAMPLE_NAMES or (alone and name in ("None", "null")):
            raise _NotAShape  # true, false, a lone null: example values
        return dict(_TYPE_NAMES.get(name, {}))
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return {"anyOf": [_doc_type(node.left, depth + 1), _doc_type(node.right, depth + 1)]}
    if isinstance(node, ast.Subscript):
        base = node.value
        name = base.id if isinstance(base, ast.Name) else getattr(base, "attr", "")
        args = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if name in _ARRAYS:
            if len(args) == 1 or (len(args) == 2 and _is_ellipsis(args[1])):
                return {"type": "array", "items": _doc_type(args[0], depth + 1, alone=True)}
            return {"type": "array"}  # tuple[int, str]: items of several types
        if name in _OBJECTS and len(args) == 2:
            value = _doc_type(args[1], depth + 1, alone=True)
            return {"type": "object", "additionalProperties": value}
        if name == "Optional":
            return {"anyOf": [_doc_type(args[0], depth + 1), {"type": "null"}]}
        if name == "Union":
            return {"anyOf": [_doc_type(a, depth + 1) for a in args]}
        if name == "Literal" and all(isinstance(a, ast.Constant) for a in args):
            return {"enum": [a.value for a in args if isinstance(a, ast.Constant)]}
        return {}
    if alone:
        raise _NotAShape  # -1, f"...", a call: an example, not a type
    return {}


def _is_ellipsis(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value is Ellipsis


_EXAMPLE_NAMES = frozenset({"true", "false", "True", "False"})
