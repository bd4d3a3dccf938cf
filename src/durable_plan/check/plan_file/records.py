"""What a plan file is once read: its plan, its metadata, where each node sits, its problems.

Kept apart from reading and inputs so both (and the commands) share one notion of a located
problem without importing the YAML parser or the JSON Schema code the other needs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

META_FIELDS = ("name", "description", "inputs")
"""Fields of a plan file that are not part of the plan."""

INPUTS_ROOT = "inputs"

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


def _steps_of(plan: Mapping[str, Any]) -> list[Any]:
    steps = plan.get("steps")
    return steps if isinstance(steps, list) else []


def value_kind(value: Any) -> str:
    """So a problem says ``got null``, as the file spells it, rather than ``NoneType``."""
    return "null" if value is None else type(value).__name__
