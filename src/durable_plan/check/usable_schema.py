"""Whether a JSON Schema can be used to check values a model or a person controls.

Before any value meets a schema (a tool's argument schema, an agent step's
``output_schema``, a plan file's ``inputs``), ``schema_problems`` finds what would make it
unusable, each as a short sentence: not a schema, a regex RE2 cannot run, a reference that
is not local, or references that loop without reaching a value. ``json_schema`` builds
validators only for schemas with none.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from typing import Any

import jsonschema
import re2

__all__ = ["compiled_pattern", "schema_problems"]

_IN_PLACE = ("allOf", "anyOf", "oneOf", "not", "if", "then", "else", "$ref", "$dynamicRef")
"""Keywords that apply a subschema to the same value: a loop through only these never ends."""
_REGEX_KEYS = ("pattern",)


@functools.lru_cache(maxsize=512)
def compiled_pattern(pattern: str) -> Any:
    """``pattern`` on RE2 (linear time), or None when RE2 cannot run it."""
    options = re2.Options()
    options.log_errors = False
    try:
        return re2.compile(pattern, options)
    except re2.error:
        return None


def schema_problems(schema: Any, *, strict_patterns: bool = True) -> list[str]:
    """Why ``schema`` cannot be used to check values, each as a short sentence (none: usable).

    Refused: not a JSON Schema (its metaschema says so), a regex RE2 cannot run
    (backreferences, lookaround; only with ``strict_patterns``), ``$ref`` that is not
    local (``#...``) or does not resolve, ``unevaluatedProperties``, and a loop of
    references that never reaches a value (``{"$ref": "#"}``).
    """
    if not isinstance(schema, Mapping | bool):
        return [f"a schema must be an object, not {type(schema).__name__}"]
    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)  # type: ignore[arg-type]
    except jsonschema.SchemaError as exc:
        where = "/".join(str(p) for p in exc.path)
        return [f"{exc.message}" + (f" (at {where})" if where else "")]
    if isinstance(schema, bool):
        return []
    problems: list[str] = []
    for path, node in _subschemas(schema, ()):
        where = "/".join(path) or "the top"
        for key in _REGEX_KEYS:
            if (
                isinstance(node.get(key), str)
                and strict_patterns
                and compiled_pattern(node[key]) is None
            ):
                problems.append(
                    f"{key} {node[key]!r} at {where} uses a regex feature RE2 lacks "
                    "(backreferences, lookaround); rewrite it without them"
                )
        patterns = node.get("patternProperties")
        if isinstance(patterns, Mapping) and strict_patterns:
            for patrn in patterns:
                if compiled_pattern(patrn) is None:
                    problems.append(
                        f"patternProperties {patrn!r} at {where} uses a regex feature RE2 lacks"
                    )
        if "unevaluatedProperties" in node:
            problems.append(
                f"unevaluatedProperties at {where} is not supported; use additionalProperties"
            )
        ref = node.get("$ref")
        if isinstance(ref, str) and _resolve_local(schema, ref) is None:
            problems.append(
                f"$ref {ref!r} at {where} does not resolve: only local references "
                "(#, #/$defs/name) are supported"
            )
    if not problems:
        try:
            loop = _reference_loop(schema)
        except RecursionError:
            return ["the schema nests too deeply to check"]
        if loop:
            problems.append(
                "the schema's references loop without reaching a value: " + " -> ".join(loop)
            )
    return problems


def _subschemas(node: Any, path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Every object in the schema document that may be a subschema, with its path."""
    stack: list[tuple[tuple[str, ...], Any]] = [(path, node)]
    seen = 0
    while stack:
        where, current = stack.pop()
        seen += 1
        if seen > 100_000:
            return
        if isinstance(current, Mapping):
            yield where, current
            for key, value in current.items():
                if key in ("enum", "const", "default", "examples"):
                    continue  # values, not schemas
                stack.append(((*where, str(key)), value))
        elif isinstance(current, list):
            for n, value in enumerate(current):
                stack.append(((*where, str(n)), value))


def _resolve_local(root: Mapping[str, Any], ref: str) -> Any:
    """The subschema a local ``$ref`` points to, or None if it is not local or not there."""
    if not ref.startswith("#"):
        return None
    pointer = ref[1:]
    if pointer == "":
        return root
    if not pointer.startswith("/"):
        return None  # plain-name anchors are not supported
    node: Any = root
    for raw in pointer[1:].split("/"):
        part = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, Mapping) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node


def _reference_loop(root: Mapping[str, Any]) -> list[str]:
    """A cycle of subschemas applied to the same value (through $ref and the in-place
    applicators only), as the path of references; [] when there is none."""
    nodes: dict[int, Any] = {}
    names: dict[int, str] = {}

    def edges(node: Any) -> list[Any]:
        if not isinstance(node, Mapping):
            return []
        out: list[Any] = []
        for key in _IN_PLACE:
            value = node.get(key)
            if key in ("$ref", "$dynamicRef"):
                if isinstance(value, str):
                    target = _resolve_local(root, value)
                    if isinstance(target, Mapping):
                        names.setdefault(id(target), value)
                        out.append(target)
            elif isinstance(value, list):
                out.extend(v for v in value if isinstance(v, Mapping))
            elif isinstance(value, Mapping):
                out.append(value)
        return out

    state: dict[int, int] = {}  # 1: on the stack, 2: done
    path: list[Any] = []

    def visit(node: Any) -> list[str]:
        key = id(node)
        nodes[key] = node
        if state.get(key) == 1:
            start = next(i for i, n in enumerate(path) if n is node)
            cycle = [*path[start:], node]
            return [names.get(id(n), "#") for n in cycle if id(n) in names or n is root]
        if state.get(key) == 2:
            return []
        state[key] = 1
        path.append(node)
        for child in edges(node):
            found = visit(child)
            if found:
                return found
        path.pop()
        state[key] = 2
        return []

    names[id(root)] = "#"
    for _, node in _subschemas(root, ()):
        found = visit(node)
        if found:
            return found
    return []
