"""Errors as values the model can act on.

A rejected plan costs the model one repair round trip, so the rejection must
carry every problem at once, each naming the step, the field and the fix.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

ProblemCode = Literal[
    "schema",
    "step_limit",
    "duplicate_id",
    "unknown_tool",
    "not_plannable",
    "bad_argument",
    "syntax",
    "forbidden_function",
    "dangling_reference",
    "self_reference",
    "dynamic_reference",
    "returns",
    "cycle",
    "limit",
    "unknown_name",
    "owner_rule",
    "prior_reference",
    "unknown_input",
    "no_field",
    "wrong_type",
]

APPROVAL_REFUSAL = (
    "it requires human approval (the tool exists, but nobody can give that approval in the "
    "middle of an in-process plan)"
)
"""Why a gated tool cannot be planned in-process: it exists, it needs a person, and the fix is
to call it directly (the person is asked then). Said even when a plannable pattern excludes
it too: that it needs a person is what the model must know to call it right."""

REJECTION_HEADER = "Plan rejected, nothing was executed:"


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a plan, found before anything ran."""

    code: ProblemCode
    message: str
    fix: str
    step: str | None = None
    field: str | None = None

    def __str__(self) -> str:
        where = []
        if self.step is not None:
            where.append(f"step '{self.step}'")
        if self.field is not None:
            where.append(f"field '{self.field}'")
        prefix = f"{', '.join(where)}: " if where else ""
        return f"{prefix}{self.message}. Fix: {self.fix}"


class PlanRejected(ValueError):
    """The plan failed its checks; nothing was executed.

    ``rules``: how to write the step kinds the problems are about (an agent step, a
    map, ...), each once, after the problems. The plan tool's spec, sent on every model
    call, teaches only their minimal form; the model reads the rest where it needs it.
    """

    def __init__(self, problems: list[Problem], rules: Sequence[str] = ()) -> None:
        self.problems = list(problems)
        self.rules = list(dict.fromkeys(rules))
        super().__init__(self.render())

    def render(self) -> str:
        lines = [REJECTION_HEADER]
        lines += [f"- {p}" for p in self.problems]
        lines += self.rules
        return "\n".join(lines)

    @property
    def codes(self) -> list[str]:
        return [p.code for p in self.problems]


class StepError(Exception):
    """A step failed for a reason the plan engine found (binding, condition, result)."""


class StepFailure(Exception):
    """Raised by an invoker when the message is already the step's error, word for word
    (a hook's cancellation, a tool asking for a person), not a tool's exception."""


def interrupt_message(tool: str) -> str:
    """What the model reads when a tool needs a person's answer inside a plan."""
    return (
        f"tool '{tool}' asked for a person's input (a Strands interrupt), which cannot be "
        "answered inside a plan: call it directly, outside the plan"
    )


def describe_exception(exc: BaseException) -> str:
    """A one-line error the model can read: the class name and the message."""
    try:
        text = str(exc).strip()
    except Exception as unprintable:  # e.g. a message holding a 5,000-digit integer
        text = f"(its message cannot be shown: {type(unprintable).__name__})"
    if isinstance(exc, StepFailure):
        return text
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
