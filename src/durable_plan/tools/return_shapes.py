"""A tool's return shape, from what its owner already wrote: a JSON Schema the plan checks
walk paths through (``durable_plan.check.shapes``).

Sources, the first that says something wins:

1. an explicit ``output_schema=`` on the registry entry (``{}`` turns derivation off);
2. the return annotation: a ``TypedDict``, a pydantic model, a dataclass, and the
   generics around them (``list[Monster]``, ``Monster | None``); pydantic's
   ``TypeAdapter(...).json_schema(mode="serialization")`` does the work, and for what it
   refuses (``typing.TypedDict`` before Python 3.12) a small converter of our own.
   ``dict[str, Any]``, ``Any`` or no annotation say nothing;
3. the docstring's ``Returns:`` section in the seed's convention,
   ``An object shaped {"name": str, "hp": int}`` (also ``A list of objects shaped {...}``,
   ``{"name", "hp"}`` for keys alone, ``str | None``, ``list[int]`` and nested objects).

Closed or open: an object built from a class (``TypedDict``, dataclass, pydantic model)
has exactly its fields, as serialized, so it is closed, unless the model says otherwise
(pydantic's ``extra="allow"`` is open). A docstring's ``{...}`` lists the result's fields,
so it is closed too: a plan reading a field the docstring does not list is rejected, and a
docstring that is not sure (anything but the shape and plain sentences after it: "or
None", "plus other keys") gives no shape. A pydantic model with aliases that differ from
its field names gives no shape either: which of the two a result carries depends on how it
was serialized.
"""

from __future__ import annotations

import ast
import collections.abc
import dataclasses
import functools
import gc
import inspect
import re
import types
import typing
from collections.abc import Callable
from typing import Any

from durable_plan.check.shapes import compact_shape

__all__ = ["annotation_shape", "declared_shape", "docstring_shape", "return_shape"]

MAX_DOC_SHAPE_CHARS = 2_000
"""A ``Returns:`` section longer than this is prose, not a shape."""
_MAX_DEPTH = 16


def declared_shape(schema: Any) -> dict[str, Any] | None:
    """An owner's or a server's JSON Schema, compacted and bounded (None: says nothing)."""
    return compact_shape(schema)


def return_shape(
    func: Callable[..., Any] | None,
    description: str = "",
    *,
    annotation: typing.Literal["closed", "open", "text"] = "closed",
) -> dict[str, Any] | None:
    """The shape ``func`` documents: its return annotation, else its docstring's
    ``Returns:`` section (``description`` when there is no function, as for a Strands
    ``AgentTool``).

    ``annotation``: ``"closed"`` for function tools, whose results are what the annotation
    declares (``result_projection``: a subclass's extra fields are not part of it);
    ``"open"`` for existing activities, whose results Temporal serializes as they are (an
    instance of a subclass carries its fields); ``"text"`` for Strands tools, open too, and
    nothing when the annotation allows a string: the plan reads a text result as the JSON
    it holds, so ``-> str`` says nothing about what the plan sees."""
    if func is not None:
        shape = annotation_shape(_return_annotation(func), closed=annotation == "closed")
        if shape is not None and not (annotation == "text" and _may_be_text(shape)):
            return shape
        description = inspect.getdoc(func) or description
    return docstring_shape(description)


def _may_be_text(shape: dict[str, Any]) -> bool:
    kinds = shape.get("type")
    branches = shape.get("anyOf") or shape.get("oneOf") or []
    return (
        kinds == "string"
        or (isinstance(kinds, list) and "string" in kinds)
        or any(isinstance(b, dict) and _may_be_text(b) for b in branches)
        or not shape  # anything
    )


@functools.lru_cache(maxsize=1024)
def result_projection(func: Callable[..., Any]) -> Callable[[Any], Any] | None:
    """What a function tool's result becomes for the plan: the JSON its return annotation
    declares (pydantic's serializer for the declared type, as FastAPI's response_model:
    a subclass instance's extra fields, or a TypedDict's undeclared keys, are dropped), so
    the closed shape the check walks is the result the plan reads. None: the annotation
    says nothing, and the result is taken as it is."""
    annotation = _return_annotation(func)
    if not annotation_shape(annotation):
        return None
    from pydantic import TypeAdapter

    try:
        adapter: Any = TypeAdapter(annotation)
    except Exception:  # typing.TypedDict before 3.12: pydantic refuses it
        return functools.partial(_project, annotation, 0)
    return functools.partial(adapter.dump_python, mode="json", warnings=False)


def _project(tp: Any, depth: int, value: Any) -> Any:
    """``value`` with only the keys its (plain ``typing``) TypedDicts declare, through
    lists, dicts and unions of them; everything else as it is."""
    if depth > 64:
        return value
    if typing.is_typeddict(tp) and isinstance(value, dict):
        try:
            hints = typing.get_type_hints(tp)
        except Exception:
            return value
        return {k: _project(hints[k], depth + 1, v) for k, v in value.items() if k in hints}
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (list, collections.abc.Sequence) and args and isinstance(value, list):
        return [_project(args[0], depth + 1, v) for v in value]
    if origin is dict and len(args) == 2 and isinstance(value, dict):
        return {k: _project(args[1], depth + 1, v) for k, v in value.items()}
    if origin in (typing.Union, types.UnionType) and isinstance(value, dict):
        dicts = [a for a in args if typing.is_typeddict(a)]
        if len(dicts) == 1:  # one TypedDict among scalars: that is the dict's shape
            return _project(dicts[0], depth + 1, value)
    return value


def _return_annotation(func: Callable[..., Any]) -> Any:
    try:
        hints = typing.get_type_hints(func, include_extras=True)
    except Exception:  # a forward reference that does not resolve: no shape
        return inspect.Signature.empty
    return hints.get("return", inspect.Signature.empty)


# -- annotations ---------------------------------------------------------------------------


def annotation_shape(annotation: Any, *, closed: bool = True) -> dict[str, Any] | None:
    """The JSON Schema of what a function annotated ``-> annotation`` returns, as JSON
    (``closed``: objects hold only the fields the classes declare)."""
    if annotation is inspect.Signature.empty or annotation is Any:
        return None
    schema = _pydantic_schema(annotation)
    if schema is None:
        defs: dict[str, Any] = {}
        try:
            schema = _Converter(defs).schema(annotation, 0)
        except RecursionError:
            return None
        if defs:
            schema = {**schema, "$defs": defs}
    return compact_shape(_closed(schema, 0) if closed else schema)


def _pydantic_schema(annotation: Any) -> dict[str, Any] | None:
    from pydantic import TypeAdapter

    try:
        adapter = TypeAdapter(annotation)
        by_alias = adapter.json_schema(mode="serialization", by_alias=True)
        by_name = adapter.json_schema(mode="serialization", by_alias=False)
    except Exception:  # a type pydantic refuses (typing.TypedDict before 3.12, a class)
        return None
    if by_alias != by_name:
        return {}  # aliases: the result's keys depend on how it was serialized
    return by_alias


def _closed(schema: Any, depth: int) -> Any:
    """Objects with listed ``properties`` and no word on others are closed: pydantic
    writes ``additionalProperties`` only when a class allows or forbids extras."""
    if not isinstance(schema, dict) or depth > 64:
        return schema
    out = dict(schema)
    if isinstance(out.get("properties"), dict):
        out["properties"] = {k: _closed(v, depth + 1) for k, v in out["properties"].items()}
        out.setdefault("additionalProperties", False)
    for key in ("items", "additionalProperties"):
        if isinstance(out.get(key), dict):
            out[key] = _closed(out[key], depth + 1)
    for key in ("anyOf", "oneOf", "allOf", "prefixItems"):
        if isinstance(out.get(key), list):
            out[key] = [_closed(v, depth + 1) for v in out[key]]
    for key in ("$defs", "definitions"):
        if isinstance(out.get(key), dict):
            out[key] = {k: _closed(v, depth + 1) for k, v in out[key].items()}
    return out


_PRIMITIVES: dict[Any, dict[str, Any]] = {
    str: {"type": "string"},
    bool: {"type": "boolean"},
    int: {"type": "integer"},
    float: {"type": "number"},
    type(None): {"type": "null"},
    None: {"type": "null"},
}
_SEQUENCES = (
    list,
    tuple,
    set,
    frozenset,
    collections.abc.Sequence,
    collections.abc.MutableSequence,
    collections.abc.Set,
    collections.abc.MutableSet,
)
_MAPPINGS = (dict, collections.abc.Mapping, collections.abc.MutableMapping)


class _Converter:
    """Annotations pydantic refuses, to JSON Schema: ``typing.TypedDict`` (before Python
    3.12), and the dataclasses and generics around one. Anything else is "any value"."""

    def __init__(self, defs: dict[str, Any]) -> None:
        self.defs = defs

    def schema(self, tp: Any, depth: int) -> dict[str, Any]:
        if depth > _MAX_DEPTH:
            return {}
        if typing.get_origin(tp) is typing.Annotated:
            tp = typing.get_args(tp)[0]
        if tp in _PRIMITIVES:
            return dict(_PRIMITIVES[tp])
        origin = typing.get_origin(tp)
        args = typing.get_args(tp)
        if origin is typing.Union or origin is types.UnionType:
            return {"anyOf": [self.schema(a, depth + 1) for a in args]}
        if origin is typing.Literal:
            return {"enum": list(args)}
        if origin in _SEQUENCES or tp in _SEQUENCES:
            if origin is tuple and args and args[-1] is not Ellipsis:
                return {"type": "array", "prefixItems": [self.schema(a, depth + 1) for a in args]}
            item = self.schema(args[0], depth + 1) if args else {}
            return {"type": "array", "items": item}
        if origin in _MAPPINGS or tp in _MAPPINGS:
            if len(args) == 2 and args[0] is str:
                return {"type": "object", "additionalProperties": self.schema(args[1], depth + 1)}
            return {"type": "object"}
        if typing.is_typeddict(tp):
            required = set(getattr(tp, "__required_keys__", ()))
            return self._class(tp, depth, lambda name: name in required)
        if dataclasses.is_dataclass(tp) and isinstance(tp, type):
            return self._class(tp, depth, lambda name: True)
        return {}

    def _class(self, cls: type, depth: int, required: Callable[[str], bool]) -> dict[str, Any]:
        name = re.sub(r"[^A-Za-z0-9_.]", "_", f"{cls.__module__}.{cls.__qualname__}")
        ref = {"$ref": f"#/$defs/{name}"}
        if name in self.defs:
            return ref
        self.defs[name] = {}  # a class that contains itself refers to this entry
        try:
            hints = typing.get_type_hints(cls, include_extras=True)
        except Exception:
            self.defs[name] = {"type": "object"}
            return ref
        props = {k: self.schema(v, depth + 1) for k, v in hints.items() if not k.startswith("_")}
        if dataclasses.is_dataclass(cls):
            props = {f.name: props.get(f.name, {}) for f in dataclasses.fields(cls)}
        self.defs[name] = {
            "type": "object",
            "properties": props,
            "required": [k for k in props if required(k)],
        }
        return ref


# -- docstrings ----------------------------------------------------------------------------

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
    """The shape a ``Returns:`` section states in the seed's convention, or None."""
    text = _returns_section(doc or "")
    if text is None or len(text) > MAX_DOC_SHAPE_CHARS:
        return None
    start = min((i for i in (text.find("{"), text.find("[")) if i >= 0), default=-1)
    if start < 0:
        return None
    end = _balanced_end(text, start)
    if end is None:
        return None
    prefix, body, suffix = text[:start], text[start:end], text[end:]
    words = re.findall(r"[A-Za-z]+", prefix.lower())
    if any(w not in _PREFIX_WORDS for w in words) or re.search(r"[^\sA-Za-z:]", prefix):
        return None
    if _UNSURE & set(re.findall(r"[a-z]+", suffix.lower())):
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
    if depth > _MAX_DEPTH:
        return {}
    if isinstance(node, ast.Dict):
        props: dict[str, Any] = {}
        for key, value in zip(node.keys, node.values, strict=True):
            if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
                raise _NotAShape  # {**x}, {1: ...}: not a list of fields
            props[key.value] = _doc_value(value, depth + 1)
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
            return {"type": "array", "items": _doc_value(node.elts[0], depth + 1)}
        return {"type": "array"}
    return _doc_type(node, depth)


def _doc_type(node: ast.AST, depth: int) -> dict[str, Any]:
    """A type in a shape: ``str``, ``int | None``, ``list[str]``, ``Optional[int]``."""
    if isinstance(node, ast.Dict | ast.Set | ast.List):
        return _doc_value(node, depth + 1)
    if isinstance(node, ast.Constant):
        if node.value is None:
            return {"type": "null"}
        if isinstance(node.value, str):
            return dict(_TYPE_NAMES.get(node.value, {}))
        return {}
    if isinstance(node, ast.Name | ast.Attribute):
        name = node.id if isinstance(node, ast.Name) else node.attr
        return dict(_TYPE_NAMES.get(name, {}))
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return {"anyOf": [_doc_type(node.left, depth + 1), _doc_type(node.right, depth + 1)]}
    if isinstance(node, ast.Subscript):
        base = node.value
        name = base.id if isinstance(base, ast.Name) else getattr(base, "attr", "")
        args = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if name in _ARRAYS:
            return {"type": "array", "items": _doc_type(args[0], depth + 1)}
        if name in _OBJECTS and len(args) == 2:
            return {"type": "object", "additionalProperties": _doc_type(args[1], depth + 1)}
        if name == "Optional":
            return {"anyOf": [_doc_type(args[0], depth + 1), {"type": "null"}]}
        if name == "Union":
            return {"anyOf": [_doc_type(a, depth + 1) for a in args]}
        if name == "Literal" and all(isinstance(a, ast.Constant) for a in args):
            return {"enum": [a.value for a in args if isinstance(a, ast.Constant)]}
    return {}
