"""Reading a plan file: bytes to a ``PlanFile``, every node's line, and bounds on the way.

People run plan files from shells and CI jobs, so a file that cannot be read, parsed or is
not a plan fails with problems naming the file and, where the YAML parser can tell, the
line. The bounds (size, depth, expanded aliases) keep a mistaken path or a hostile file from
taking the machine's memory or time before the checker ever sees a plan.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from durable_plan.check.plan_file.inputs import inputs_schema_problems
from durable_plan.check.plan_file.records import (
    INPUTS_ROOT,
    META_FIELDS,
    FileProblem,
    Path_,
    PlanFile,
    PlanFileError,
    value_kind,
)

MAX_FILE_BYTES = 8 * 1024 * 1024
"""A plan file larger than this is refused before it is parsed (plans are small; a huge
file is a mistake or an attack, and parsing it would take the machine's memory)."""

MAX_READ_BYTES = 4 * MAX_FILE_BYTES
"""Read no further than this (UTF-8 takes up to 4 bytes a character)."""

UNREADABLE = "unreadable"
"""The code of a problem that kept the file from being read at all (missing, a directory, no
permission, endless): the command was given a wrong path, exit 2 even from `validate`."""

MAX_EXPANDED_VALUES = 100_000
"""YAML anchors and aliases (``&a`` / ``*a``) share one value in many places; a file whose
values, with every alias expanded, number more than this is refused (an "alias bomb" of a
few lines expands to billions)."""


def load_plan_file(path: str | Path) -> PlanFile:
    """Read and parse a plan file; raises ``PlanFileError`` naming the file (and line)."""
    name = str(path)
    try:
        if Path(path).is_file() and Path(path).stat().st_size > MAX_READ_BYTES:
            # Far too large even before decoding: refused without reading it into memory.
            raise PlanFileError(
                [
                    FileProblem(
                        name,
                        f"is {Path(path).stat().st_size:,} bytes, not a plan file",
                        code=UNREADABLE,
                    )
                ]
            )
        text = _read_bounded(Path(path)).decode("utf-8")
    except FileNotFoundError:
        raise PlanFileError(
            [FileProblem(name, "no such file", "check the path", code=UNREADABLE)]
        ) from None
    except IsADirectoryError:
        raise PlanFileError(
            [FileProblem(name, "is a directory, not a plan file", code=UNREADABLE)]
        ) from None
    except UnicodeDecodeError as exc:
        raise PlanFileError([FileProblem(name, f"is not UTF-8 text: {exc}")]) from None
    except OSError as exc:
        raise PlanFileError(
            [FileProblem(name, f"cannot be read: {exc.strerror or exc}", code=UNREADABLE)]
        ) from None
    if len(text) > MAX_FILE_BYTES:
        raise PlanFileError(
            [
                FileProblem(
                    name,
                    f"is {len(text):,} characters, more than a plan file may be "
                    f"({MAX_FILE_BYTES:,})",
                    "pass large data as an input or let a step fetch it",
                )
            ]
        )
    try:
        if name.endswith(".json"):
            data, lines, duplicates = _parse_json(name, text)
        else:
            data, lines, duplicates = _parse_yaml(name, text)
    except RecursionError:
        raise PlanFileError(
            [
                FileProblem(
                    name,
                    "is nested too deeply to read (plans are at most 100 levels deep)",
                    "flatten the nested lists or objects",
                )
            ]
        ) from None
    draft = PlanFile(name, {}, lines=lines)
    problems = [
        draft.problem(
            f"the key '{key}' appears more than once (the last one would silently win)",
            "keep one",
            path=where,
        )
        for where, key in duplicates
    ]
    if not isinstance(data, Mapping):
        kind = "empty" if data is None else f"a {type(data).__name__}"
        problems.append(
            draft.problem(
                f"a plan file must be a mapping with steps, but this one is {kind}",
                "write `steps:` with a list of steps (see examples/plans/)",
            )
        )
        raise PlanFileError(problems)
    plan = {k: v for k, v in data.items() if k not in META_FIELDS}
    pf = PlanFile(name, plan, lines=lines)
    meta: dict[str, Any] = {}
    for key in ("name", "description"):
        value = data.get(key)
        if value is not None and not isinstance(value, str):
            problems.append(
                pf.problem(f"{key} must be text, got {value_kind(value)}", "quote it", path=(key,))
            )
        meta[key] = value if isinstance(value, str) else None
    schema = data.get(INPUTS_ROOT)
    if schema is not None:
        problems += inputs_schema_problems(pf, schema)
    return PlanFile(
        name,
        plan,
        name=meta["name"],
        description=meta["description"],
        inputs_schema=dict(schema) if isinstance(schema, Mapping) else None,
        lines=lines,
        problems=tuple(problems),
    )


def _read_bounded(path: Path) -> bytes:
    """The file's bytes, reading at most ``MAX_READ_BYTES`` + 1: a device or a pipe
    (``/dev/zero``, ``<(yes)``) has no size to check first and would be read forever."""
    with path.open("rb") as stream:
        data = stream.read(MAX_READ_BYTES + 1)
    if len(data) > MAX_READ_BYTES:
        raise PlanFileError(
            [
                FileProblem(
                    str(path),
                    f"goes on past {MAX_READ_BYTES:,} bytes, not a plan file",
                    "pass a plan file (plans are small)",
                    code=UNREADABLE,
                )
            ]
        )
    return data


def _parse_yaml(name: str, text: str) -> tuple[Any, dict[Path_, int], list[tuple[Path_, str]]]:
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is not None and _expanded_size(node, {}) > MAX_EXPANDED_VALUES:
            problem = FileProblem(
                name,
                f"its YAML aliases (*name) expand to more than {MAX_EXPANDED_VALUES:,} values",
                "write the values out, or use fewer anchors and aliases",
            )
            raise PlanFileError([problem])
        data = loader.construct_document(node) if node is not None else None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        what = " ".join(str(p) for p in (exc.context, exc.problem) if p)
        problem = FileProblem(name, f"not valid YAML: {what}", None, line)
        raise PlanFileError([problem]) from None
    except yaml.YAMLError as exc:
        raise PlanFileError([FileProblem(name, f"not valid YAML: {exc}")]) from None
    finally:
        loader.dispose()
    lines: dict[Path_, int] = {}
    duplicates: list[tuple[Path_, str]] = []
    if node is not None:
        _index(node, (), lines, duplicates)
    return data, lines, duplicates


def _parse_json(name: str, text: str) -> tuple[Any, dict[Path_, int], list[tuple[Path_, str]]]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        problem = FileProblem(name, f"not valid JSON: {exc.msg}", None, exc.lineno)
        raise PlanFileError([problem]) from None
    try:  # JSON is (nearly) YAML: its node marks give the lines
        _, lines, duplicates = _parse_yaml(name, text)
    except PlanFileError:
        lines, duplicates = {}, []
    return data, lines, duplicates


def _expanded_size(node: yaml.Node, memo: dict[int, int]) -> int:
    """How many values ``node`` stands for with every alias expanded: an alias is the same
    node object as its anchor, so memoising by identity keeps this linear in the file."""
    known = memo.get(id(node))
    if known is not None:
        return known
    total = 1
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            total += _expanded_size(key_node, memo) + _expanded_size(value_node, memo)
    elif isinstance(node, yaml.SequenceNode):
        for item in node.value:
            total += _expanded_size(item, memo)
    memo[id(node)] = total
    return total


def _index(
    node: yaml.Node, path: Path_, lines: dict[Path_, int], duplicates: list[tuple[Path_, str]]
) -> None:
    """Record the line of every node by its path; note keys given twice."""
    lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key_node, value_node in node.value:
            key = str(key_node.value)
            if key in seen:
                duplicates.append(((*path, key), key))
            seen.add(key)
            lines[(*path, key)] = key_node.start_mark.line + 1
            _index(value_node, (*path, key), lines, duplicates)
    elif isinstance(node, yaml.SequenceNode):
        for n, item in enumerate(node.value):
            _index(item, (*path, n), lines, duplicates)
