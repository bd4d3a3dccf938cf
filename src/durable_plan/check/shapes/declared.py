"""A tool's return shape, from what its owner already wrote: a JSON Schema the plan checks
walk paths through (``durable_plan.check.shapes``).

The docstring source is ``docstrings``; this module holds the others and the order.

Sources, the first that says something wins:

1. an explicit ``output_schema=`` on the registry entry (``{}`` turns derivation off);
2. the return annotation: a ``TypedDict``, a pydantic model, a dataclass, and the
   generics around them (``list[Monster]``, ``Monster | None``); pydantic's serializer
   for the type is what a function tool's result becomes (``result_projection``), and the
   shape is pydantic's schema of that serialization (a ``typing.TypedDict``, which pydantic
   refuses before Python 3.12, rebuilt as the same ``typing_extensions`` one: ``_shadow``).
   ``dict[str, Any]``, ``Any`` or no annotation say nothing;
3. the docstring's ``Returns:`` section in the seed's convention,
   ``An object shaped {"name": str, "hp": int}`` (also ``A list of objects shaped {...}``,
   ``{"name", "hp"}`` for keys alone, ``str | None``, ``list[int]``, ``"a" | "b"`` and
   nested objects), only where the annotation leaves the kind open.

The rule every source follows: the check refuses plans on a shape, so a source gives a
shape only where what the tool really emits is known to conform, and nothing (any value)
elsewhere. Hence: pydantic's schema is held to its serializer (a serializer function
without a return type, ``json_schema_extra``, ``WithJsonSchema``, ``SkipJsonSchema``, a
schema-mode override: ``_serialized_schema_generator``); a TypedDict keeps every key it
declares (``_id``, ``$ref``, ``class``); a docstring counts only when it is clearly a
shape (not ``dict[str, Any]: the user record``, not an example such as ``{"name": "Bob",
"manager": null}``, not a shape the annotation contradicts).

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

import functools
import inspect
import types
import typing
from collections.abc import Callable
from typing import Any

import typing_extensions

from durable_plan.check.shapes.compact import compact_shape
from durable_plan.check.shapes.docstrings import MAX_DEPTH, docstring_shape
from durable_plan.check.shapes.walk import Rooted, ShapeWalker

__all__ = ["annotation_shape", "declared_shape", "return_shape"]


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
    it holds, so ``-> str`` says nothing about what the plan sees.

    A docstring only narrows what the annotation leaves open: the annotation is what the
    code returns (and a function tool's result is projected on it), the docstring prose
    about it, so a docstring shape of a kind the annotation rules out (``-> dict[str,
    Any]`` and a list in the text) is not believed."""
    allowed: dict[str, Any] = {}  # what the annotation allows the docstring to say
    if func is not None:
        returned = _return_annotation(func)
        shape = annotation_shape(returned, closed=annotation == "closed")
        if shape is not None and not (annotation == "text" and _may_be_text(shape)):
            return shape
        if annotation != "text":
            allowed = _open_shape(returned)
        description = inspect.getdoc(func) or description
    documented = docstring_shape(description)
    if documented is None or not _kinds_within(documented, allowed):
        return None
    return documented


def _open_shape(annotation: Any) -> dict[str, Any]:
    """What the annotation allows, however little it says (``{}``: anything)."""
    if annotation is inspect.Signature.empty or annotation is Any:
        return {}
    schema = _pydantic_schema(_shadow(annotation))
    return schema if schema is not None else {}


def _kinds_within(documented: dict[str, Any], allowed: dict[str, Any]) -> bool:
    """Every JSON type the docstring's shape allows, the annotation allows too (an
    annotation that says nothing of the kind allows every one)."""
    walker = ShapeWalker(2_000)
    return walker.value_types(Rooted(documented, documented)) <= walker.value_types(
        Rooted(allowed, allowed)
    )


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
    the closed shape the check walks is the result the plan reads: the shape and the
    projection are made from the same type by the same serializer (``_shadow``). None:
    the annotation says nothing, and the result is taken as it is."""
    annotation = _return_annotation(func)
    if not annotation_shape(annotation):
        return None
    from pydantic import TypeAdapter

    try:
        adapter: Any = TypeAdapter(_shadow(annotation))
    except Exception:  # pragma: no cover - annotation_shape had it from the same adapter
        return None
    return functools.partial(adapter.dump_python, mode="json", warnings=False)


def _return_annotation(func: Callable[..., Any]) -> Any:
    try:
        hints = typing.get_type_hints(func, include_extras=True)
    except Exception:  # a forward reference that does not resolve: no shape
        return inspect.Signature.empty
    return hints.get("return", inspect.Signature.empty)


# -- annotations ---------------------------------------------------------------------------


def annotation_shape(annotation: Any, *, closed: bool = True) -> dict[str, Any] | None:
    """The JSON Schema of what a function annotated ``-> annotation`` returns, as JSON
    (``closed``: objects hold only the fields the classes declare). One serializer says
    it, pydantic's, as ``result_projection`` applies it; what pydantic cannot serialize
    or describe gives no shape."""
    if annotation is inspect.Signature.empty or annotation is Any:
        return None
    schema = _pydantic_schema(_shadow(annotation))
    if schema is None:
        return None
    return compact_shape(_closed(schema, 0) if closed else schema)


class _NoShadow(Exception):
    """An annotation ``_shadow`` cannot rebuild (a TypedDict that contains itself)."""


def _shadow(annotation: Any) -> Any:
    """``annotation`` with each ``typing.TypedDict`` replaced by the same
    ``typing_extensions.TypedDict``, the kind pydantic reads before Python 3.12: every key
    kept as written (``_id``, ``class``, ``a-b``), required or not as declared. The
    generics around them are rebuilt; anything else is left to pydantic. A TypedDict
    that contains itself is left as it is (pydantic refuses it: no shape)."""
    try:
        return _Shadow().of(annotation, 0)
    except Exception:  # a forward reference that does not resolve (NameError), and the like:
        return annotation  # pydantic then says nothing of it; no shape, never a crash


class _Shadow:
    def __init__(self) -> None:
        self.active: set[int] = set()

    def of(self, tp: Any, depth: int) -> Any:
        if depth > MAX_DEPTH:
            raise _NoShadow
        if typing_extensions.is_typeddict(tp) and isinstance(tp, type):
            return self._typeddict(tp, depth)
        origin, args = typing.get_origin(tp), typing.get_args(tp)
        if origin is None or not args or origin is typing.Literal:
            return tp
        if origin is typing.Annotated:
            return typing.Annotated[(self.of(args[0], depth + 1), *tp.__metadata__)]
        shadows = tuple(self.of(a, depth + 1) if a is not Ellipsis else a for a in args)
        if shadows == args:
            return tp
        if origin in (types.UnionType, typing.Union):
            return typing.Union[shadows]  # noqa: UP007 (a tuple of types, built here)
        if isinstance(tp, types.GenericAlias):
            return types.GenericAlias(origin, shadows)
        return tp.copy_with(shadows)

    def _typeddict(self, tp: type, depth: int) -> Any:
        """A ``typing.TypedDict`` rebuilt; a ``typing_extensions`` one only when a value
        inside it had to be (it may say more than the functional form can: PEP 728)."""
        if id(tp) in self.active:
            raise _NoShadow  # contains itself
        self.active.add(id(tp))
        try:
            hints = typing.get_type_hints(tp, include_extras=True)
            plain = {k: _unwrap_required(h) for k, h in hints.items()}
            shadows = {k: self.of(h, depth + 1) for k, h in plain.items()}
        finally:
            self.active.discard(id(tp))
        if type(tp).__module__ != "typing" and shadows == plain:
            return tp
        required = set(getattr(tp, "__required_keys__", hints))
        fields = {
            key: (
                typing_extensions.Required[hint]
                if _is_required(hints[key], key in required)
                else typing_extensions.NotRequired[hint]
            )
            for key, hint in shadows.items()
        }
        make: Any = typing_extensions.TypedDict  # the functional form, with any keys
        shadow: Any = make(tp.__name__, fields)
        shadow.__module__ = tp.__module__
        shadow.__qualname__ = tp.__qualname__
        if hasattr(tp, "__pydantic_config__"):  # pydantic.with_config
            shadow.__pydantic_config__ = tp.__pydantic_config__
        return shadow


def _is_required(hint: Any, listed: bool) -> bool:
    """Whether a TypedDict's key is required: its own ``Required`` / ``NotRequired`` say,
    else the class's required keys (which Python 3.11 gets wrong for a ``NotRequired``
    written under ``from __future__ import annotations``: it counts it required)."""
    origin = typing.get_origin(hint)
    if origin in (getattr(typing, "NotRequired", None), typing_extensions.NotRequired):
        return False
    if origin in (getattr(typing, "Required", None), typing_extensions.Required):
        return True
    return listed


def _unwrap_required(hint: Any) -> Any:
    """``Required[X]`` / ``NotRequired[X]`` -> ``X`` (the TypedDict's required keys say it)."""
    wrappers = (
        getattr(typing, "Required", None),
        getattr(typing, "NotRequired", None),
        getattr(typing, "ReadOnly", None),
        typing_extensions.Required,
        typing_extensions.NotRequired,
        typing_extensions.ReadOnly,
    )
    while typing.get_origin(hint) in wrappers and typing.get_args(hint):
        hint = typing.get_args(hint)[0]
    return hint


def _pydantic_schema(annotation: Any) -> dict[str, Any] | None:
    from pydantic import TypeAdapter

    generator = _serialized_schema_generator()
    try:
        adapter = TypeAdapter(annotation)
        by_alias = adapter.json_schema(
            mode="serialization", by_alias=True, schema_generator=generator
        )
        by_name = adapter.json_schema(
            mode="serialization", by_alias=False, schema_generator=generator
        )
    except Exception:  # a type pydantic refuses (typing.TypedDict before 3.12, a class)
        return None
    if by_alias != by_name:
        return {}  # aliases: the result's keys depend on how it was serialized
    return by_alias


@functools.cache
def _serialized_schema_generator() -> type[Any]:
    """Pydantic's JSON Schema generator, held to what ``dump_python(mode="json")`` emits.

    Pydantic's serialization schema is documentation, and trusts what the owner wrote
    about it; the check refuses plans on it, so here it says only what the serializer
    really does. Four ways pydantic's schema and the JSON part company, each closed:

    * a serializer function without a return annotation (``@model_serializer``,
      ``@field_serializer``, ``PlainSerializer(f)``, any mode): its output is unknown, so
      that part is "any value" (pydantic falls back to the field's own type);
    * whatever the owner wrote into the *schema* alone (``json_schema_extra``,
      ``WithJsonSchema``, ``SkipJsonSchema``, ``__get_pydantic_json_schema__``): the
      serializer ignores it, so do we (every schema function and update in the core
      schema's metadata; pydantic's own only add titles and formats);
    * ``json_schema_mode_override``: the schema of serialization, whatever the model says;
    * a part pydantic cannot describe (an ``isinstance`` check, a plain validator): "any
      value" in place, where pydantic raises or drops a union's branch.
    """
    from pydantic.json_schema import GenerateJsonSchema

    class SerializedSchema(GenerateJsonSchema):
        @property
        def mode(self) -> Any:
            return self._mode

        def generate_inner(self, schema: Any) -> Any:
            meta = schema.get("metadata") if isinstance(schema, dict) else None
            if meta and any(k.startswith("pydantic_js") for k in meta):
                schema = {**schema, "metadata": {}}
            return super().generate_inner(schema)

        def ser_schema(self, schema: Any) -> Any:
            function = schema.get("type") in ("function-plain", "function-wrap")
            if function and schema.get("return_schema") is None:
                return {}  # what an unannotated serializer returns is unknown
            return super().ser_schema(schema)

        def handle_invalid_for_json_schema(self, schema: Any, error_info: str) -> Any:
            return {}

        def json_or_python_schema(self, schema: Any) -> Any:
            # Pydantic describes the JSON input; a Python value may serialize otherwise.
            return {}

        def lax_or_strict_schema(self, schema: Any) -> Any:
            return self.get_flattened_anyof(
                [
                    self.generate_inner(schema["lax_schema"]),
                    self.generate_inner(schema["strict_schema"]),
                ]
            )

        def _update_class_schema(self, json_schema: Any, cls: Any, config: Any) -> None:
            # Of pydantic's class updates only ``extra`` concerns the JSON (a title does not,
            # and ``json_schema_extra`` may say anything).
            extra = (config or {}).get("extra")
            if "additionalProperties" not in json_schema and extra in ("allow", "forbid"):
                json_schema["additionalProperties"] = extra == "allow"

    return SerializedSchema


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


# -- docstrings ----------------------------------------------------------------------------
