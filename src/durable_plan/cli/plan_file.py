"""Plan files: a plan written by hand, in YAML or JSON, with a name and declared inputs.

A plan file is the plan itself (``steps``, ``returns``, ``final``, ...) plus three
optional fields: ``name``, ``description`` and ``inputs``, a JSON Schema for the
object of values a run is given. Bindings and conditions read those values as
``inputs.<name>``. People run such files from shells and CI jobs, so every
problem names the file and, where the YAML parser can tell, the line, besides
the step, the field and the fix the checker already gives. The plan is checked
by ``check_plan`` (the one checker); this module only adds what a file has and a
plan sent by a model has not: parsing, lines, and inputs.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from durable_plan.check import CheckedPlan, ToolCatalog, check_plan
from durable_plan.check.json_schema import schema_problems, validator_for
from durable_plan.language.errors import PlanRejected

META_FIELDS = ("name", "description", "inputs")
"""Fields of a plan file that are not part of the plan."""

INPUTS_ROOT = "inputs"

MAX_FILE_BYTES = 8 * 1024 * 1024
"""A plan file larger than this is refused before it is parsed (plans are small; a huge
file is a mistake or an attack, and parsing it would take the machine's memory)."""

MAX_READ_BYTES = 4 * MAX_FILE_BYTES
"""Read no further than this (UTF-8 takes up to 4 bytes a character)."""

UNREADABLE = "unreadable"
"""The code of a problem that kept the file from being read at all (missing, a directory, no
permission, endless): the command was given a wrong path, exit 2 even from `validate`."""

MAX_MESSAGE_CHARS = 300
"""An input's schema error quotes the value; longer quotes are cut to keep it one line."""

MAX_EXPANDED_VALUES = 100_000
"""YAML anchors and aliases (``&a`` / ``*a``) share one value in many places; a file whose
values, with every alias expanded, number more than this is refused (an "alias bomb" of a
few lines expands to billions)."""

Path_ = tuple[str | int, ...]


@dataclass(frozen=True)
class FileProblem:
    """One problem with a plan file or the inputs given for it, located as well as we can."""

    file: str
    message: str
    fix: str | None = None
    line: int | None = None
    step: str | None = None
    field: str | None = None
    code: str = "file"

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line is not None else self.file
        parts = []
        if self.step is not None:
            parts.append(f"step '{self.step}'")
        if self.field is not None:
            parts.append(f"field '{self.field}'")
        located = f"{', '.join(parts)}: " if parts else ""
        fix = f". Fix: {self.fix}" if self.fix else ""
        return f"{where}: {located}{self.message}{fix}"

    def to_json(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "line": self.line,
            "step": self.step,
            "field": self.field,
            "code": self.code,
            "message": self.message,
            "fix": self.fix,
        }


class PlanFileError(ValueError):
    """A plan file (or the inputs given for it) has problems; nothing was run."""

    def __init__(self, problems: Sequence[FileProblem]) -> None:
        self.problems = sorted(problems, key=lambda p: (p.file, p.line or 0))
        super().__init__("\n".join(str(p) for p in self.problems))


@dataclass(frozen=True)
class PlanFile:
    """A parsed plan file: the plan's own fields, the metadata, and where each node sits."""

    path: str
    plan: dict[str, Any]
    name: str | None = None
    description: str | None = None
    inputs_schema: dict[str, Any] | None = None
    lines: Mapping[Path_, int] = field(default_factory=dict)
    problems: tuple[FileProblem, ...] = ()
    """What is wrong with the file besides its plan (keys given twice, a bad schema):
    reported with the plan's problems, all at once."""

    @property
    def title(self) -> str:
        return self.name or Path(self.path).stem

    @property
    def declared_inputs(self) -> list[str] | None:
        """Input names the schema lists; None when it does not list them (any name goes)."""
        if self.inputs_schema is None:
            return []
        properties = self.inputs_schema.get("properties")
        return list(properties) if isinstance(properties, Mapping) else None

    def line_of(self, path: Path_) -> int | None:
        """The line of the deepest node on ``path`` that the file has."""
        for end in range(len(path), -1, -1):
            line = self.lines.get(path[:end])
            if line is not None:
                return line
        return None

    def problem(
        self,
        message: str,
        fix: str | None = None,
        *,
        path: Path_ = (),
        step: str | None = None,
        fld: str | None = None,
        code: str = "file",
    ) -> FileProblem:
        return FileProblem(self.path, message, fix, self.line_of(path), step, fld, code)

    def step_path(self, step: str | None, fld: str | None) -> Path_:
        """Where the checker's (step, field) is in the file: ``steps.<index>.<field parts>``."""
        parts: list[str | int] = [int(p) if p.isdigit() else p for p in (fld or "").split(".") if p]
        if step is None:
            return tuple(parts)
        index = self._step_index(step)
        return ("steps", index, *parts) if index is not None else ()

    def _step_index(self, step: str) -> int | None:
        if step.startswith("#") and step[1:].isdigit():
            return int(step[1:]) - 1
        for n, item in enumerate(_steps_of(self.plan)):
            if isinstance(item, Mapping) and item.get("id") == step:
                return n
        return None


# --- reading ---------------------------------------------------------------------------------


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
                pf.problem(f"{key} must be text, got {_kind(value)}", "quote it", path=(key,))
            )
        meta[key] = value if isinstance(value, str) else None
    schema = data.get(INPUTS_ROOT)
    if schema is not None:
        problems += _schema_problems(pf, schema)
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


def _schema_problems(pf: PlanFile, schema: Any) -> list[FileProblem]:
    root = (INPUTS_ROOT,)
    fix = "write a JSON Schema: {type: object, properties: {name: {type: string}}}"
    if not isinstance(schema, Mapping):
        return [
            pf.problem(f"inputs must be a JSON Schema object, got {_kind(schema)}", fix, path=root)
        ]
    if schema.get("type", "object") != "object":
        return [
            pf.problem(
                f"inputs must describe an object (type: object), not type: {schema['type']}",
                fix,
                path=(*root, "type"),
            )
        ]
    try:
        jsonschema.validators.validator_for(schema).check_schema(dict(schema))
    except jsonschema.SchemaError as exc:
        where = (*root, *exc.path)
        return [pf.problem(f"inputs is not a valid JSON Schema: {exc.message}", fix, path=where)]
    # Usable too: regexes RE2 can run, references that resolve and reach a value.
    return [
        pf.problem(f"inputs is not a valid JSON Schema here: {problem}", fix, path=root)
        for problem in schema_problems(dict(schema))[:5]
    ]


# --- checking ---------------------------------------------------------------------------------


def check_plan_file(
    pf: PlanFile,
    *,
    catalog: ToolCatalog | None = None,
    inputs: Mapping[str, Any] | None = None,
    durable: bool = False,
) -> CheckedPlan:
    """``check_plan`` on the file's plan, with every problem located in the file.

    ``inputs``: the run's values (``resolve_inputs``); None checks the plan alone, with
    ``inputs`` readable. Reads of ``inputs.<name>`` the schema does not declare are
    problems too, so a misspelled input fails here, not as a step failure at run time.
    """
    problems = list(pf.problems)
    checked: CheckedPlan | None = None
    try:
        checked = check_plan(
            pf.plan,
            catalog=catalog,
            durable=durable,
            inputs=inputs or {},
            input_names=pf.declared_inputs,
        )
    except PlanRejected as exc:
        for p in exc.problems:
            where = pf.step_path(p.step, p.field)
            problems.append(
                pf.problem(p.message, p.fix, path=where, step=p.step, fld=p.field, code=p.code)
            )
    if problems or checked is None:
        raise PlanFileError(problems)
    return checked


def _steps_of(plan: Mapping[str, Any]) -> list[Any]:
    steps = plan.get("steps")
    return steps if isinstance(steps, list) else []


# --- inputs -----------------------------------------------------------------------------------


def parse_input_args(pf: PlanFile, pairs: Sequence[str]) -> dict[str, Any]:
    """``--input NAME=VALUE`` pairs as values: text for string inputs, JSON otherwise.

    A value that is not JSON stays text, so the schema check says what is wrong with it.
    Unknown names are problems: a typo must not silently leave an input at its default.
    """
    declared = pf.declared_inputs
    listed = ", ".join(declared) if declared else "none"
    values: dict[str, Any] = {}
    problems: list[FileProblem] = []
    for item in pairs:
        name, sep, raw = item.partition("=")
        if not sep or not name:
            problems.append(
                FileProblem(
                    pf.path, f"--input expects NAME=VALUE, got {item!r}", "write name=value"
                )
            )
            continue
        if declared is not None and name not in declared:
            problems.append(
                pf.problem(
                    f"unknown input '{name}' (declared: {listed})",
                    f"pass one of: {listed}" if declared else "this plan takes no inputs",
                    path=(INPUTS_ROOT,),
                    fld=f"inputs.{name}",
                    code="unknown_input",
                )
            )
            continue
        try:
            values[name] = _input_value(raw, _property(pf, name))
        except RecursionError:
            problems.append(
                pf.problem(
                    f"input '{name}' is nested too deeply to read",
                    "pass a value nested at most 100 levels deep",
                    path=(INPUTS_ROOT,),
                    fld=f"inputs.{name}",
                    code="bad_input",
                )
            )
    if problems:
        raise PlanFileError(problems)
    return values


def _property(pf: PlanFile, name: str) -> Mapping[str, Any]:
    properties = (pf.inputs_schema or {}).get("properties")
    prop = properties.get(name) if isinstance(properties, Mapping) else None
    return prop if isinstance(prop, Mapping) else {}


def _input_value(raw: str, prop: Mapping[str, Any]) -> Any:
    kind = prop.get("type")
    kinds = kind if isinstance(kind, list) else [kind]
    if kinds == ["string"]:
        return raw
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw


def resolve_inputs(pf: PlanFile, given: Mapping[str, Any]) -> dict[str, Any]:
    """The run's inputs: ``given`` plus the schema's defaults, checked against the schema."""
    schema = pf.inputs_schema
    if schema is None:
        if given:
            names = ", ".join(given)
            raise PlanFileError([pf.problem(f"unknown inputs {names}: this plan takes no inputs")])
        return {}
    values = dict(given)
    properties = schema.get("properties")
    if isinstance(properties, Mapping):
        for name, prop in properties.items():
            if name not in values and isinstance(prop, Mapping) and "default" in prop:
                values[name] = prop["default"]
    validator = validator_for(schema)
    if validator is None:  # check_file reports why; never validate with an unusable schema
        raise PlanFileError(
            [pf.problem("inputs is not a usable JSON Schema", "run validate on the file")]
        )
    problems = []
    for error in sorted(validator.errors(values), key=lambda e: [str(p) for p in e.path]):
        problems.append(_input_problem(pf, error))
    if problems:
        raise PlanFileError(problems)
    return values


def _input_problem(pf: PlanFile, error: jsonschema.ValidationError) -> FileProblem:
    names = [str(p) for p in error.path]
    if error.validator == "required" and isinstance(error.instance, Mapping):
        required = error.validator_value if isinstance(error.validator_value, list) else []
        missing = next((r for r in required if r not in error.instance), None)
        if missing is not None:
            names = [str(missing)]
            return pf.problem(
                f"missing input '{missing}'",
                f"pass --input {missing}=VALUE",
                path=(INPUTS_ROOT, "properties", missing),
                fld=f"inputs.{missing}",
                code="bad_input",
            )
    fld = "inputs." + ".".join(names) if names else "inputs"
    top = names[0] if names else None
    where: Path_ = (INPUTS_ROOT, "properties", top) if top else (INPUTS_ROOT,)
    message = error.message  # quotes the value, which may be long: keep the line short
    if len(message) > MAX_MESSAGE_CHARS:
        message = message[:MAX_MESSAGE_CHARS] + f"… ({len(error.message):,} characters)"
    return pf.problem(
        message,
        "pass a value the schema allows",
        path=where,
        fld=fld,
        code="bad_input",
    )


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__
