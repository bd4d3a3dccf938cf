"""Nested step paths: one name for every call a plan makes, from the plan's root.

A plan's calls nest: an agent step makes tool calls round after round, a map step runs its
body once per item, a saved plan (``plan__<name>``) runs steps of its own. Each call needs a
name that says where it sits, the same wherever it is shown or addressed (the ledger, step
events, span attributes, the Temporal UI's summaries, approvals, breakpoints, ``show``), and
that never depends on scheduling: the round number and the item index are the plan's, not
the order in which things finished. The grammar, segments joined by ``/``:

    path     := step ( "/" segment )*
    step     := a step id (``^[a-z][a-z0-9_]{0,31}$``)
    segment  := "agent." ROUND   a round of an agent step (1-based, as the model saw it)
              | "do." INDEX      an item of a map or reduce step (0-based, the item's place)
              | "plan." step     a step of the saved plan the step before called
              | tool             the tool a round called (a tool name never holds "." or "/")
              | tool "~" NTH     the NTH call (2, 3, ...) to that tool in that round

    E1                          a top-level step
    E1/agent.2/lookup           the call to ``lookup`` that agent step E1 made in round 2
    E1/do.3                     item 3 of map step E1
    E1/do.3/agent.2/lookup      the same inside an agent that is a map's body
    E4/plan.fetch/agent.1/look  inside step ``fetch`` of the saved plan E4 called
    E1/agent.2/lookup~2         the second call to ``lookup`` in that round

A model may call one tool several times in one round: the first call is ``<tool>``, the
next ``<tool>~2``, ``<tool>~3``, numbered in the order the model wrote them in its message
(recorded, so the same on replay), never in the order they ran or finished.

A pattern (breakpoints) is a path whose segments may hold ``*``, which never crosses a
``/``: ``E1/agent.*/charge*`` is every charge-like call of agent step E1, in any round. A
pattern that names a tool without ``~`` names every call to it in the round
(``E1/agent.2/charge`` matches ``E1/agent.2/charge~2`` too); ``charge~2`` only that one.
Only this module builds or reads paths; nothing else splits on ``/``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from durable_plan.language.plan import STEP_ID_PATTERN

SEPARATOR = "/"
MAX_DEPTH = 21
"""Segments a path may hold: a run and the four saved plans it may nest (``MAX_PLAN_DEPTH``,
``check.saved_plans``) each add at most four (its step, an item, a round, a call), and one
more for the deepest call: a longer text is not a path of ours."""
MAX_PATTERN_CHARS = 512
"""A breakpoint pattern past this is refused: no path of ours is that long."""

_STEP = re.compile(STEP_ID_PATTERN)
_TOOL = re.compile(r"^[A-Za-z0-9_-]{1,128}$")
_CALL = re.compile(r"^([A-Za-z0-9_-]{1,128})~([2-9]|[1-9][0-9]{1,5})$")
_NTH = re.compile(r"~[0-9]+(?=/|$)")
_NUMBERED = re.compile(r"^(agent|do)\.(0|[1-9][0-9]{0,8})$")
_SAVED = re.compile(r"^plan\.([a-z][a-z0-9_]{0,31})$")

SegmentKind = Literal["step", "round", "item", "saved_step", "call"]


class StepPathError(ValueError):
    """A text that is not a step path (or pattern): the message names the segment and why."""


@dataclass(frozen=True)
class Segment:
    kind: SegmentKind
    value: str
    """The step id, the tool name, or the number (as text) of a round or an item."""

    def text(self) -> str:
        prefix = {"round": "agent.", "item": "do.", "saved_step": "plan."}.get(self.kind, "")
        return f"{prefix}{self.value}"


@dataclass(frozen=True)
class StepPath:
    """A call's place in its plan. Build it from the top-level step down."""

    segments: tuple[Segment, ...]

    @classmethod
    def of(cls, step_id: str) -> StepPath:
        if not _STEP.match(step_id):
            raise StepPathError(f"{step_id!r} is not a step id ({STEP_ID_PATTERN})")
        return cls((Segment("step", step_id),))

    def round(self, number: int) -> StepPath:
        """Round ``number`` (1-based) of the agent step this path names."""
        if number < 1:
            raise StepPathError(f"an agent's rounds count from 1, not {number}")
        return self._then(Segment("round", str(number)))

    def item(self, index: int) -> StepPath:
        """Item ``index`` (0-based, its place in ``over``) of the map or reduce step."""
        if index < 0:
            raise StepPathError(f"an item's index counts from 0, not {index}")
        return self._then(Segment("item", str(index)))

    def saved_step(self, step_id: str) -> StepPath:
        """Step ``step_id`` of the saved plan this path's step called."""
        if not _STEP.match(step_id):
            raise StepPathError(f"{step_id!r} is not a step id ({STEP_ID_PATTERN})")
        return self._then(Segment("saved_step", step_id))

    def call(self, tool: str, nth: int = 1) -> StepPath:
        """The ``nth`` call (1-based) to ``tool`` that the agent round this path names made."""
        if not _TOOL.match(tool):
            raise StepPathError(f"{tool!r} is not a tool name (letters, digits, _ and -)")
        if nth < 1:
            raise StepPathError(f"a round's calls to one tool count from 1, not {nth}")
        return self._then(Segment("call", tool if nth == 1 else f"{tool}~{nth}"))

    def _then(self, segment: Segment) -> StepPath:
        if len(self.segments) >= MAX_DEPTH:
            raise StepPathError(f"a step path holds at most {MAX_DEPTH} segments")
        return StepPath((*self.segments, segment))

    @property
    def step(self) -> str:
        """The top-level step the call belongs to."""
        return self.segments[0].value

    @property
    def depth(self) -> int:
        """How many saved plans deep the call runs (0: in the plan itself)."""
        return sum(1 for s in self.segments if s.kind == "saved_step")

    @property
    def index(self) -> int | None:
        """The item index this path ends with (a map or reduce item), else None."""
        last = self.segments[-1]
        return int(last.value) if last.kind == "item" else None

    def hops(self) -> list[tuple[str, str]]:
        """The child workflows a durable run reaches this call through, outermost first,
        each as (kind, key): ``("agent", k)`` for the agent step whose loop makes the call,
        ``("plan", k)`` for the saved-plan call whose child plan runs it. A key is the path
        inside the run that starts the child (from its own step: ``fetch``, not
        ``e4/plan.fetch``), as that run names its child workflow (``ids.child_workflow_id``).
        Empty: the plan's own workflow holds the call (its approvals and pauses)."""
        hops: list[tuple[str, str]] = []
        start = 0  # where the current run's own path begins
        for n, segment in enumerate(self.segments[1:], start=1):
            if segment.kind not in ("round", "saved_step"):
                continue
            own = SEPARATOR.join(
                s.value if i == 0 else s.text() for i, s in enumerate(self.segments[start:n])
            )
            hops.append(("agent" if segment.kind == "round" else "plan", own))
            if segment.kind == "saved_step":
                start = n
        return hops

    def within_run(self) -> str:
        """This path inside the run that makes the call (from the last saved plan's step
        on): the id its own run knows the call by (a step, an item, an agent's call)."""
        start = max((n for n, s in enumerate(self.segments) if s.kind == "saved_step"), default=0)
        own = self.segments[start:]
        return SEPARATOR.join(s.value if i == 0 else s.text() for i, s in enumerate(own))

    def parent(self) -> StepPath | None:
        return StepPath(self.segments[:-1]) if len(self.segments) > 1 else None

    def __str__(self) -> str:
        return SEPARATOR.join(s.text() for s in self.segments)


def parse(text: str) -> StepPath:
    """The path ``text`` names; ``StepPathError`` says which segment is wrong and why."""
    parts = text.split(SEPARATOR)
    if len(parts) > MAX_DEPTH:
        raise StepPathError(f"{_cut(text)!r}: a step path holds at most {MAX_DEPTH} segments")
    path = StepPath.of(_first(parts[0], text))
    for part in parts[1:]:
        path = path._then(_segment(part, text))
    return path


def _first(part: str, text: str) -> str:
    if not _STEP.match(part):
        raise StepPathError(
            f"{_cut(text)!r}: a path starts with a step id ({STEP_ID_PATTERN}), not {part!r}"
        )
    return part


def _segment(part: str, text: str) -> Segment:
    if numbered := _NUMBERED.match(part):
        kind: SegmentKind = "round" if numbered[1] == "agent" else "item"
        if kind == "round" and numbered[2] == "0":
            raise StepPathError(f"{_cut(text)!r}: an agent's rounds count from 1 (agent.1)")
        return Segment(kind, numbered[2])
    if saved := _SAVED.match(part):
        return Segment("saved_step", saved[1])
    if _TOOL.match(part) or _CALL.match(part):
        return Segment("call", part)
    raise StepPathError(
        f"{_cut(text)!r}: {part!r} is not a segment (agent.<round>, do.<index>, "
        "plan.<step id>, a tool name or tool~<nth>)"
    )


def under(prefix: str, step_id: str) -> StepPath:
    """The path of step ``step_id`` of a run started at ``prefix``: the step itself in a
    top-level plan (``prefix`` empty), ``<prefix>/plan.<step>`` in a saved plan's run."""
    return StepPath.of(step_id) if not prefix else parse(prefix).saved_step(step_id)


def rooted(prefix: str, own: str) -> str:
    """The path from the top-level plan's root of the call its run knows as ``own`` (a
    step id, ``e1/do.3``, ``e1/agent.2/x``): ``own`` itself in a top-level plan, else
    ``own`` under ``prefix`` (``StepPath.within_run`` reverses it)."""
    if not prefix:
        return own
    inner = parse(own)
    path = parse(prefix).saved_step(inner.step)
    for segment in inner.segments[1:]:
        path = path._then(segment)
    return str(path)


def matches(pattern: str, path: StepPath | str) -> bool:
    """Whether ``path`` is one ``pattern`` names: segment by segment, ``*`` matching any run
    of characters inside one segment (never a ``/``), so a pattern names calls of one depth.
    A pattern without ``~`` ignores a call's ``~NTH``: it names every call to the tool."""
    text = str(path)
    if "~" not in pattern:
        text = _NTH.sub("", text)
    wanted, given = pattern.split(SEPARATOR), text.split(SEPARATOR)
    return len(wanted) == len(given) and all(map(_segment_matches, wanted, given))


def check_pattern(pattern: str) -> str:
    """``pattern`` if it can name a path (each segment a segment once ``*`` stands for
    something), else ``StepPathError`` saying why: a breakpoint that can never pause is a
    typo, refused before the plan runs."""
    parts = pattern.split(SEPARATOR)
    if not pattern or len(parts) > MAX_DEPTH or len(pattern) > MAX_PATTERN_CHARS:
        raise StepPathError(
            f"{_cut(pattern)!r} is not a step path pattern (at most {MAX_DEPTH} segments and "
            f"{MAX_PATTERN_CHARS} characters)"
        )
    for index, part in enumerate(parts):
        if part.strip("*") == "":
            continue  # any step, round, item or call at this depth
        candidates = {part.replace("*", filler) for filler in ("1", "2", "a")}
        if not any(_names_a_segment(c, first=index == 0) for c in candidates):
            expected = (
                f"a step id ({STEP_ID_PATTERN})"
                if index == 0
                else "agent.<round>, do.<index>, plan.<step id>, a tool name or tool~<nth>"
            )
            raise StepPathError(
                f"breakpoint {_cut(pattern)!r}: {part!r} can match no segment (expected "
                f"{expected}, with * for any characters)"
            )
    return pattern


def _names_a_segment(text: str, *, first: bool) -> bool:
    try:
        _first(text, text) if first else _segment(text, text)
    except StepPathError:
        return False
    return True


def _segment_matches(pattern: str, text: str) -> bool:
    """``*`` as any run of characters, in time linear in the two lengths' product at worst
    (the classic two-pointer walk, back to the last ``*`` on a mismatch): a regex built from
    an operator's pattern could backtrack for minutes and hold a worker's every workflow."""
    p = t = 0
    star, mark = -1, 0
    while t < len(text):
        if p < len(pattern) and pattern[p] != "*" and pattern[p] == text[t]:
            p, t = p + 1, t + 1
        elif p < len(pattern) and pattern[p] == "*":
            star, mark = p, t
            p += 1
        elif star >= 0:
            p, mark = star + 1, mark + 1
            t = mark
        else:
            return False
    return all(c == "*" for c in pattern[p:])


def _cut(text: str, limit: int = 120) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
