"""The return-shape check is sound: a path that a real result has is never rejected.

Hypothesis draws a JSON Schema (closed and open objects, lists, unions, nullable types,
``$ref``s into ``$defs``) together with a value that conforms to it, the result a tool with
that declared shape really returned. Every path that value has (read as JSONata reads it:
through lists item by item, with ``[0]``, inside functions and conditions), bound to an
argument whose schema is the value's own type, must pass the check, and the plan must then
run with every binding matched. The control: a field no branch of a closed object has is
rejected, so the property is not passing for want of checking.
"""

from __future__ import annotations

from typing import Any

import mcp.types
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from durable_plan.check import ToolCatalog, ToolSpec, check_plan
from durable_plan.check.shapes.compact import compact_shape, json_type
from durable_plan.language.errors import PlanRejected
from durable_plan.language.options import ToolOptions
from durable_plan.local.runner import execute_plan
from durable_plan.tools.mcp import mcp_tool_table
from durable_plan.tools.registry import ToolRegistry
from tests.support import shape_sources
from tests.support.helpers import examples

SETTINGS = settings(
    max_examples=examples(300),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    database=None,
)
NAMES = ["name", "hp", "armour", "items", "tags", "id", "total", "x"]
SCALARS: dict[str, st.SearchStrategy[Any]] = {
    "string": st.text("abc", max_size=3),
    "integer": st.integers(-5, 5),
    "number": st.floats(-5, 5, allow_nan=False).filter(lambda f: not f.is_integer()),
    "boolean": st.booleans(),
    "null": st.none(),
}


@st.composite
def shaped(draw: st.DrawFn, depth: int = 0) -> tuple[dict[str, Any], Any]:
    """A schema and a value that conforms to it."""
    kinds = ["scalar", "object", "open", "array", "union", "nullable"] if depth < 3 else ["scalar"]
    if depth == 0:  # a tool's result: mostly an object, to have paths into
        kinds = ["object", "object", "open", "union", "nullable", "array"]
    kind = draw(st.sampled_from(kinds))
    if kind == "scalar":
        name = draw(st.sampled_from(sorted(SCALARS)))
        return {"type": name}, draw(SCALARS[name])
    if kind in ("object", "open"):
        fields = draw(
            st.lists(st.sampled_from(NAMES), min_size=depth == 0, max_size=4, unique=True)
        )
        props: dict[str, Any] = {}
        value: dict[str, Any] = {}
        for field in fields:
            sub, sub_value = draw(shaped(depth + 1))
            props[field] = sub
            if draw(st.integers(0, 3)) or field in fields[:1]:  # optional fields may be absent
                value[field] = sub_value
        schema: dict[str, Any] = {"type": "object", "properties": props}
        if kind == "object":
            schema["additionalProperties"] = False
        else:
            for extra in draw(st.lists(st.sampled_from(["extra", "more"]), unique=True)):
                value[extra] = draw(SCALARS["integer"])
        return schema, value
    if kind == "array":
        items, _ = draw(shaped(depth + 1))
        values = [draw(_conforming(items, depth + 1)) for _ in range(draw(st.integers(0, 3)))]
        return {"type": "array", "items": items}, values
    if kind == "union":
        left, left_value = draw(shaped(depth + 1))
        right, right_value = draw(shaped(depth + 1))
        return {"anyOf": [left, right]}, left_value if draw(st.booleans()) else right_value
    inner, inner_value = draw(shaped(depth + 1))
    if inner.get("type") == "object":
        schema = {**inner, "type": ["object", "null"]}
        return schema, None if draw(st.booleans()) else inner_value
    return {"anyOf": [inner, {"type": "null"}]}, None if draw(st.booleans()) else inner_value


@st.composite
def _conforming(draw: st.DrawFn, schema: dict[str, Any], depth: int) -> Any:
    """Another value of ``schema`` (a list's further items)."""
    if "anyOf" in schema:
        return draw(_conforming(draw(st.sampled_from(schema["anyOf"])), depth))
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = draw(st.sampled_from(kind))
    if kind == "object":
        return {k: draw(_conforming(v, depth + 1)) for k, v in schema["properties"].items()}
    if kind == "array":
        return [
            draw(_conforming(schema["items"], depth + 1)) for _ in range(draw(st.integers(0, 2)))
        ]
    return draw(SCALARS[str(kind)])


def paths(value: Any, prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any, bool]]:
    """(path, value, through a list) for every field the value has, as JSONata reads it:
    a name after a list reads that field of each item."""
    found: list[tuple[tuple[str, ...], Any, bool]] = []

    def walk(current: Any, path: tuple[str, ...], listed: bool) -> None:
        if isinstance(current, dict):
            for key, sub in current.items():
                found.append(((*path, key), sub, listed))
                walk(sub, (*path, key), listed)
        elif isinstance(current, list):
            for item in current:
                walk(item, path, True)

    walk(value, prefix, False)
    return found


@st.composite
def reads(
    draw: st.DrawFn, value: Any, src: dict[str, Any], into: tuple[str, ...] = ()
) -> tuple[dict[str, Any], dict[str, Any], bool]:
    """A plan whose step ``use`` reads paths of ``value``, the result (at ``into``) of the
    step ``src``, each in a form JSONata reads it; ``use``'s input schema types each plain
    read as the value it really reads. Also: whether the plan can run (see below)."""
    found = paths(value)
    reads = list({read[0]: read for read in reversed(found)}.values())[::-1]
    # Read through a list, a field whose values flatten to nothing, or to one null out of
    # a list ([] and [null]: JSONata's singleton sequence of null is no value), matches no
    # value (the run fails it, rightly). Such a plan is checked, not run.
    empty = {path for path, _, listed in found if listed} - {
        path for path, _, listed in found if not listed
    }
    flattened: dict[tuple[str, ...], list[tuple[Any, bool]]] = {path: [] for path in empty}
    for path, sub, _listed in found:
        if path in flattened:
            flattened[path] += [(x, True) for x in sub] if isinstance(sub, list) else [(sub, False)]
    empty = {path for path, items in flattened.items() if items in ([], [(None, True)])}
    chosen = (
        draw(
            st.lists(
                st.sampled_from(reads),
                min_size=min(3, len(reads)),
                max_size=8,
                unique_by=lambda r: r[0],
            )
        )
        if reads
        else []
    )
    root = ".".join(("steps.src", *into))
    bind: dict[str, str] = {"whole": root}
    params: dict[str, Any] = {"whole": {"type": json_type(value)}}
    for n, (path, sub, listed) in enumerate(chosen):
        text = _path_text(root, path)
        form = draw(st.sampled_from(["plain", "string", "exists", "array", "first"]))
        if form == "string":
            text = f"$string({text})"
        elif form == "exists":
            text = f"$exists({text}) ? {text} : 0"
        elif form == "array":
            text = f"[{text}, 1]"
        elif form == "first" and listed:
            text = _path_text(root, path[:-1]) + f"[0].{_name(path[-1])}" if len(path) > 1 else text
        bind[f"p{n}"] = text
        if form == "plain" and not listed:
            params[f"p{n}"] = {"type": json_type(sub)}  # the argument takes what it reads
    use = {"type": "object", "properties": params, "additionalProperties": True}
    plan = {"steps": [{**src, "id": "src"}, {"id": "use", "tool": "use", "bind": bind}]}
    runs = not any(read[0] in empty for read in chosen) and not _list_in_list(value)
    return plan, use, runs


def _name(key: str) -> str:
    """A field name as JSONata writes it: backquoted unless it is a plain name."""
    plain = key.isidentifier() and not key.startswith("$")
    return key if plain else "`" + key.replace("`", "") + "`"


def _path_text(root: str, path: tuple[str, ...]) -> str:
    return "".join([root, *(f".{_name(k)}" for k in path)])


@st.composite
def plans(draw: st.DrawFn) -> tuple[dict[str, Any], ToolCatalog, Any, bool]:
    schema, value = draw(shaped())
    compact = draw(st.booleans())
    if draw(st.booleans()):  # the same shape, reached through $defs
        schema = {"$defs": {"Result": schema}, "$ref": "#/$defs/Result"}
    plan, use, runs = draw(reads(value, {"tool": "src"}))
    catalog = ToolCatalog(
        {
            # As the registry keeps it (compacted), or as a hand-built tool table sends it.
            "src": ToolSpec("src", output_schema=compact_shape(schema) if compact else schema),
            "use": ToolSpec("use", use),
        }
    )
    return plan, catalog, value, runs


@SETTINGS
@given(plans())
async def test_paths_from_real_results_are_never_rejected(
    drawn: tuple[dict[str, Any], ToolCatalog, Any, bool],
) -> None:
    plan, catalog, value, runs = drawn
    try:
        check_plan(plan, catalog=catalog, durable=True)
    except PlanRejected as exc:  # pragma: no cover - the failure to report
        raise AssertionError(f"a real path was rejected:\n{exc}\nvalue: {value!r}") from None

    if not runs:
        return

    async def invoke(name: str, args: dict[str, Any]) -> Any:
        return value if name == "src" else args

    result = await execute_plan(plan, invoke, catalog=catalog)
    assert result.ok, (result.failures, value)


def _list_in_list(value: Any) -> bool:
    """JSONata reads a name through a list of lists (it flattens them); the run's own
    "matched no value" guard (expressions/explain.py) looks one list deep and fails such a
    binding: a difference of the run, older than this check, so such plans are not run."""
    if isinstance(value, dict):
        return any(_list_in_list(v) for v in value.values())
    if isinstance(value, list):
        return any(isinstance(v, list) or _list_in_list(v) for v in value)
    return False


@SETTINGS
@given(shaped(), st.booleans())
def test_a_field_no_closed_object_has_is_rejected(
    drawn: tuple[dict[str, Any], Any], via_ref: bool
) -> None:
    """The control: under a closed object, a name it does not list is refused."""
    inner, _ = drawn
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {"inner": inner, "hp": {"type": "integer"}},
        "additionalProperties": False,
    }
    if via_ref:
        schema = {"$defs": {"R": schema}, "$ref": "#/$defs/R"}
    catalog = ToolCatalog(
        {"src": ToolSpec("src", output_schema=compact_shape(schema)), "use": ToolSpec("use")}
    )
    plan = {
        "steps": [
            {"id": "src", "tool": "src"},
            {"id": "use", "tool": "use", "bind": {"x": "steps.src.nope"}},
        ]
    }
    try:
        check_plan(plan, catalog=catalog)
    except PlanRejected as exc:
        assert exc.codes == ["no_field"]
        assert "steps.src has no field 'nope': src returns inner, hp" in str(exc)
    else:  # pragma: no cover
        raise AssertionError("a field no branch has was accepted")


# -- every source of a shape, with the real tool's real result --------------------------------


def _catalog(tools: ToolRegistry, use: dict[str, Any]) -> ToolCatalog:
    return ToolCatalog({**tools.catalog().tools, "use": ToolSpec("use", use)})


async def _check_and_run(
    plan: dict[str, Any], catalog: ToolCatalog, tools: ToolRegistry, value: Any, runs: bool
) -> None:
    try:
        check_plan(plan, catalog=catalog, durable=True)
    except PlanRejected as exc:  # pragma: no cover - the failure to report
        raise AssertionError(f"a real path was rejected:\n{exc}\nvalue: {value!r}") from None
    if not runs:
        return

    async def invoke(name: str, args: dict[str, Any]) -> Any:
        return args if name == "use" else await tools.invoke(name, args)

    result = await execute_plan(plan, invoke, catalog=catalog)
    assert result.ok, (result.failures, value)


@SETTINGS
@given(st.sampled_from(shape_sources.NAMES), st.integers(0, 7), st.data())
async def test_every_sources_real_results_are_read_without_refusal(
    name: str, variant: int, data: st.DataObject
) -> None:
    """Each source of a shape (``tests/support/shape_sources.py``: docstrings of many styles,
    TypedDicts with keys like ``_id`` and ``$ref``, pydantic models whose serializers,
    aliases, computed fields or ``extra`` change the JSON, dataclasses): the tool runs, and
    any paths of its real result, in any form, pass the check and bind at run time."""
    tools = shape_sources.shared()
    src = {"tool": name, "args": {"variant": variant}}
    value = await tools.invoke(name, src["args"])
    plan, use, runs = data.draw(reads(value, src))
    await _check_and_run(plan, _catalog(tools, use), tools, value, runs)


@pytest.mark.parametrize("name", shape_sources.NAMES)
async def test_every_path_of_every_sources_real_result_is_read(name: str) -> None:
    """All of them at once: every path of every variant's result, bound plainly to an
    argument of its own type (through a list: any type)."""
    tools = shape_sources.shared()
    if name in shape_sources.FIXED:  # the control: these do give a shape
        assert tools.get(name).options.output_schema is not None
    for variant in range(8):
        src = {"id": "src", "tool": name, "args": {"variant": variant}}
        value = await tools.invoke(name, src["args"])
        bind = {"whole": "steps.src"}
        params = {"whole": {"type": json_type(value)}}
        for n, (path, sub, listed) in enumerate(paths(value)):
            bind[f"p{n}"] = _path_text("steps.src", path)
            if not listed:
                params[f"p{n}"] = {"type": json_type(sub)}
        plan = {"steps": [src, {"id": "use", "tool": "use", "bind": bind}]}
        use = {"type": "object", "properties": params, "additionalProperties": True}
        try:
            check_plan(plan, catalog=_catalog(tools, use), durable=True)
        except PlanRejected as exc:  # pragma: no cover - the failure to report
            raise AssertionError(f"{name}({variant}) -> {value!r}:\n{exc}") from None


@SETTINGS
@given(shaped(), st.data())
async def test_an_mcp_tools_output_schema_reads_its_results_without_refusal(
    drawn: tuple[dict[str, Any], Any], data: st.DataObject
) -> None:
    """A server's ``outputSchema``, through the tool table the plan tool builds, and a
    ``structuredContent`` that conforms to it (what an MCP client accepts)."""
    schema, value = drawn
    listed = [mcp.types.Tool(name="get", inputSchema={"type": "object"}, outputSchema=schema)]
    table = mcp_tool_table("srv", listed)
    plan, use, runs = data.draw(reads(value, {"tool": "srv__get"}))
    catalog = ToolCatalog.from_options({**table, "use": ToolOptions(input_schema=use)})
    try:
        check_plan(plan, catalog=catalog, durable=True)
    except PlanRejected as exc:  # pragma: no cover - the failure to report
        raise AssertionError(f"a real path was rejected:\n{exc}\nvalue: {value!r}") from None
    if runs:
        result = await execute_plan(
            plan, lambda name, args: _echo(name, args, value), catalog=catalog
        )
        assert result.ok, (result.failures, value)


@SETTINGS
@given(shaped(), st.data())
def test_an_agent_steps_output_schema_reads_its_outputs_without_refusal(
    drawn: tuple[dict[str, Any], Any], data: st.DataObject
) -> None:
    """An agent step's ``output_schema`` (the plan's own, an object's), and an answer that
    conforms."""
    schema, value = drawn
    if schema.get("type") != "object":
        schema = {"type": "object", "properties": {"v": schema}, "additionalProperties": False}
        value = {"v": value}
    step = {"tool": "agent", "args": {"prompt": "judge", "output_schema": schema}}
    plan, use, _ = data.draw(reads(value, step, ("output",)))
    catalog = ToolCatalog({"use": ToolSpec("use", use)}, default_model="m")
    try:
        check_plan(plan, catalog=catalog, durable=True)
    except PlanRejected as exc:  # pragma: no cover - the failure to report
        raise AssertionError(f"a real path was rejected:\n{exc}\nvalue: {value!r}") from None


async def _echo(name: str, args: dict[str, Any], value: Any) -> Any:
    return args if name == "use" else value
