"""The break-even scenario: a quest whose every answer needs the previous one.

Six tools form one dependency chain (notice board -> witness -> place -> clue ->
owner -> hideout -> scouting report). The question at depth D needs exactly the
first D links, and no argument of link k can be known before link k-1 has answered,
so a plain tool-calling loop must ask the model again between every two calls while
a plan binds each argument to the previous step's result.

The tools live in one module-level :data:`CHAIN_TOOLS` registry because the
benchmark's workflow (sandboxed) and its worker (activities) must see the same
names and specs. Every tool sleeps :func:`tool_latency` first, a stand-in for real
I/O, so the gap between the arms is attributable to model round trips, not tool
speed; the benchmark sets it, the tests set it to 0. Tools run in the benchmark's own
process (its in-process worker), so :data:`TOOL_LOG` records what really ran.

The scripted model's turns for each arm are built here too, from the same data, so
the scripts and the tools cannot disagree.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from durable_plan.testing import TurnLike, call, say
from durable_plan.tools.registry import ToolRegistry

MAX_DEPTH = 6
PLAN_TOOL = "submit_workflow_plan"

_latency_s: list[float] = [0.25]

TOOL_LOG: list[tuple[str, dict[str, Any], dict[str, Any]]] = []
"""Every tool call this process ran, in order: (tool, arguments, result)."""


def set_tool_latency(seconds: float) -> None:
    """How long every chain tool sleeps before answering (default 0.25 s)."""
    if seconds < 0:
        raise ValueError(f"tool latency must be >= 0, got {seconds}")
    _latency_s[0] = seconds


def tool_latency() -> float:
    """The current simulated tool latency, in seconds."""
    return _latency_s[0]


NOTICES = {"thornwick": {"missing": "Edda Vell"}}
WITNESSES = {"edda vell": {"last_seen": "the Sunken Mill"}}
PLACES = {"the sunken mill": {"clue": "raven badge"}}
CLUES = {"raven badge": {"owner": "the Raven Company"}}
OWNERS = {"the raven company": {"hideout": "Gallows Tower"}}
HIDEOUTS = {"gallows tower": {"guards": 4, "entrance": "the drain under the east wall"}}


async def _answer(
    tool: str, table: dict[str, dict[str, Any]], key: str, what: str
) -> dict[str, Any]:
    delay = tool_latency()
    if delay > 0:
        await asyncio.sleep(delay)
    found = table.get(key.strip().lower())
    if found is None:
        known = ", ".join(repr(k) for k in table)
        raise KeyError(f"{tool}: no {what} {key!r}; known: {known}")
    result = dict(found)
    TOOL_LOG.append((tool, {what: key}, result))
    return result


async def read_notice_board(town: str) -> dict[str, Any]:
    """Read a town's notice board: who is reported missing there.

    Args:
        town: Town name, e.g. "Thornwick".

    Returns:
        An object shaped {"missing": str}, the missing person's name.
    """
    return await _answer("read_notice_board", NOTICES, town, "town")


async def ask_around(person: str) -> dict[str, Any]:
    """Ask the townsfolk where a person was last seen.

    Args:
        person: The person's name, from read_notice_board's "missing" field.

    Returns:
        An object shaped {"last_seen": str}, a place name.
    """
    return await _answer("ask_around", WITNESSES, person, "person")


async def search_place(place: str) -> dict[str, Any]:
    """Search a place for clues.

    Args:
        place: Place name, from ask_around's "last_seen" field.

    Returns:
        An object shaped {"clue": str}, the clue found there.
    """
    return await _answer("search_place", PLACES, place, "place")


async def identify_clue(clue: str) -> dict[str, Any]:
    """Identify who a clue belongs to.

    Args:
        clue: The clue, from search_place's "clue" field.

    Returns:
        An object shaped {"owner": str}.
    """
    return await _answer("identify_clue", CLUES, clue, "clue")


async def find_hideout(owner: str) -> dict[str, Any]:
    """Find where someone hides out.

    Args:
        owner: Who to look for, from identify_clue's "owner" field.

    Returns:
        An object shaped {"hideout": str}.
    """
    return await _answer("find_hideout", OWNERS, owner, "owner")


async def scout_hideout(hideout: str) -> dict[str, Any]:
    """Scout a hideout: its guards and the way in.

    Args:
        hideout: The hideout, from find_hideout's "hideout" field.

    Returns:
        An object shaped {"guards": int, "entrance": str}.
    """
    return await _answer("scout_hideout", HIDEOUTS, hideout, "hideout")


@dataclass(frozen=True)
class Link:
    """One link of the chain: its tool, the argument it takes and the field it passes on."""

    step_id: str
    tool: Callable[..., Awaitable[dict[str, Any]]]
    arg: str
    passes_on: str
    question: str
    expected: str
    """Text the answer at this depth must contain (for a live model's prose answer too)."""

    @property
    def name(self) -> str:
        return self.tool.__name__


START = "Thornwick"
_WHO = "the person missing from Thornwick's notice board"
LINKS: tuple[Link, ...] = (
    Link(
        "notice",
        read_notice_board,
        "town",
        "missing",
        "Who is missing, according to the notice board in Thornwick?",
        "Edda Vell",
    ),
    Link(
        "witness",
        ask_around,
        "person",
        "last_seen",
        f"Where was {_WHO} last seen?",
        "Sunken Mill",
    ),
    Link(
        "search",
        search_place,
        "place",
        "clue",
        f"Search the place where {_WHO} was last seen: what clue is there?",
        "raven badge",
    ),
    Link(
        "clue",
        identify_clue,
        "clue",
        "owner",
        f"Who owns the clue found where {_WHO} was last seen?",
        "Raven Company",
    ),
    Link(
        "owner",
        find_hideout,
        "owner",
        "hideout",
        f"Where is the hideout of whoever owns the clue found where {_WHO} was last seen?",
        "Gallows Tower",
    ),
    Link(
        "scout",
        scout_hideout,
        "hideout",
        "entrance",
        f"Scout the hideout of whoever owns the clue found where {_WHO} was last seen: "
        "how many guards, and which way in?",
        "east wall",
    ),
)

CHAIN_TOOLS = ToolRegistry()
for _each in LINKS:
    CHAIN_TOOLS.add(_each.tool)


def prompt(depth: int) -> str:
    """The question whose answer needs exactly the first ``depth`` links."""
    return _link(depth).question


def expected_text(depth: int) -> str:
    """What the answer at ``depth`` must contain."""
    return _link(depth).expected


def tool_names(depth: int) -> list[str]:
    """The tools a correct run at ``depth`` calls, in order, once each."""
    return [link.name for link in LINKS[:depth]]


def _link(depth: int) -> Link:
    if not 1 <= depth <= MAX_DEPTH:
        raise ValueError(f"depth must be 1..{MAX_DEPTH}, got {depth}")
    return LINKS[depth - 1]


def chain_inputs(depth: int) -> list[str]:
    """Each link's argument value in a correct run (what a model reads off each result)."""
    values = [START]
    for link in LINKS[: depth - 1]:
        table = _TABLES[link.name]
        values.append(str(table[values[-1].lower()][link.passes_on]))
    return values


def final_result(depth: int) -> dict[str, Any]:
    """The last link's result in a correct run."""
    link = LINKS[depth - 1]
    return dict(_TABLES[link.name][chain_inputs(depth)[-1].lower()])


_TABLES: dict[str, dict[str, dict[str, Any]]] = {
    "read_notice_board": NOTICES,
    "ask_around": WITNESSES,
    "search_place": PLACES,
    "identify_clue": CLUES,
    "find_hideout": OWNERS,
    "scout_hideout": HIDEOUTS,
}


# -- the scripted model's turns -------------------------------------------------------------


def _answer_text(depth: int) -> str:
    result = final_result(depth)
    return f"{prompt(depth)} {', '.join(f'{k}: {v}' for k, v in result.items())}."


def loop_script(depth: int) -> list[TurnLike]:
    """A plain loop: one tool call per model call, then the answer (``depth + 1`` calls)."""
    turns: list[TurnLike] = [
        call(link.name, **{link.arg: value})
        for link, value in zip(LINKS[:depth], chain_inputs(depth), strict=True)
    ]
    return [*turns, say(_answer_text(depth))]


def chain_plan(depth: int) -> dict[str, Any]:
    """The whole chain as one final plan; each argument bound to the previous result."""
    steps: list[dict[str, Any]] = [
        {"id": LINKS[0].step_id, "tool": LINKS[0].name, "args": {LINKS[0].arg: START}}
    ]
    for prev, link in itertools.pairwise(LINKS[:depth]):
        steps.append(
            {
                "id": link.step_id,
                "tool": link.name,
                "bind": {link.arg: f"steps.{prev.step_id}.{prev.passes_on}"},
            }
        )
    return {"steps": steps, "returns": [LINKS[depth - 1].step_id], "final": True}


def plan_script(depth: int, *, prose: bool) -> list[TurnLike]:
    """One ``submit_workflow_plan`` call; with ``prose`` the model then answers in words."""
    turns: list[TurnLike] = [call(PLAN_TOOL, **chain_plan(depth))]
    return [*turns, say(_answer_text(depth))] if prose else turns


def scripts(
    build: Callable[[int], list[TurnLike]],
) -> dict[str, list[TurnLike]]:
    """Scripts for every depth, keyed by the depth's prompt."""
    return {prompt(d): build(d) for d in range(1, MAX_DEPTH + 1)}
