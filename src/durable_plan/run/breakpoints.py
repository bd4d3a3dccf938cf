"""Breakpoints: where a run pauses for a person, and what the person may answer.

A breakpoint is a step path pattern (``language.step_path``). A tool call pauses before it
starts, after its arguments are bound, when a pattern names its path or the path of a step
whose calls it makes: ``e1`` on an agent step pauses each tool call the agent makes
(``e1/agent.2/lookup``), on a map step each item (``e1/do.3``), on a saved-plan step each
call inside it (``e4/plan.fetch``). Pauses are only ever at tool calls: an agent step or a
map step has no call of its own to pause before (the agent's model rounds are not paused).

A person answers one pause, addressed by its path: ``continue`` (the call goes on, through
every stage it would have passed: a breakpoint never loosens anything, approvals still
apply), ``skip`` (the call is not made: a step or an item ends ``not_taken`` and a step's
dependents are pruned, as a false ``when`` does; a tool call inside an agent step goes back
to the agent as the tool's error) or ``abort`` (the plan ends cancelled, with its ledger).

This module holds what both runners share: the patterns and the rule, the answers, and the
``Skipped`` value a runner records for a skipped call. Durably the pause is a wait in
workflow code (``temporal/workflows/pauses.py``); in-process an async callback
(``OnPause``) or a ``Pauses`` handle answers. No I/O, no clock.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal

from durable_plan.check.saved_plans import PLAN_TOOL_PREFIX
from durable_plan.language.agent_step import AGENT_TOOL
from durable_plan.language.control_steps import LOOPS
from durable_plan.language.step_path import StepPath, check_pattern, matches, parse

Action = Literal["continue", "skip", "abort"]
ACTIONS: tuple[Action, ...] = ("continue", "skip", "abort")
SKIPPED_REASON = "skipped at a breakpoint"
ABORTED_REASON = "aborted at a breakpoint"


@dataclass(frozen=True)
class Skipped:
    """A call a person skipped: runners record it as ``not_taken`` (``PlanRun.record_failure``
    and ``ItemRun.record`` read it), never as a failure."""

    reason: str = SKIPPED_REASON


class PlanAborted(Exception):
    """In-process: a person aborted the plan at a breakpoint; ``ledger`` is the plan's
    ledger so far (as ``progress`` lines), the way a durable plan ends cancelled with it."""

    def __init__(self, path: str, ledger: list[dict[str, Any]]) -> None:
        super().__init__(f"plan aborted at breakpoint {path}")
        self.path = path
        self.ledger = ledger


def check_action(action: object) -> Action:
    """``action`` if it is one, else a ``ValueError`` naming the three."""
    if action not in ACTIONS:
        raise ValueError(f"breakpoint action {action!r}: one of {', '.join(ACTIONS)}")
    return action


@dataclass(frozen=True)
class Breakpoints:
    """A run's breakpoint patterns, each checked before anything runs."""

    patterns: tuple[str, ...] = ()

    @classmethod
    def of(cls, patterns: Iterable[str] | None) -> Breakpoints:
        if isinstance(patterns, str):
            raise TypeError("breakpoints: a list of step path patterns, not one string")
        return cls(tuple(check_pattern(p) for p in patterns or ()))

    def __bool__(self) -> bool:
        return bool(self.patterns)

    def hits(self, path: str) -> bool:
        """Does the call at ``path`` pause? Its own path, or the path of a step whose calls
        it makes (the part before an ``agent.N``, ``do.N`` or ``plan.X`` segment)."""
        if not self.patterns:
            return False
        names = callers(parse(path))
        return any(matches(p, name) for p in self.patterns for name in names)


def pauses_before(tool: str) -> bool:
    """Can a call of ``tool`` pause before itself? A tool's call can; an agent step, a map
    or reduce and a saved plan (``plan__*``) pause inside instead: before each call they
    make (the rule of both runners)."""
    return tool != AGENT_TOOL and tool not in LOOPS and not tool.startswith(PLAN_TOOL_PREFIX)


def callers(path: StepPath) -> list[str]:
    """``path`` and the steps (agent, map, saved-plan) whose calls it is one of."""
    names = [str(path)]
    for n, segment in enumerate(path.segments[1:], start=1):
        if segment.kind in ("round", "item", "saved_step"):
            names.append(str(StepPath(path.segments[:n])))
    return names


@dataclass(frozen=True)
class Pause:
    """A call paused at a breakpoint: what a person sees before answering."""

    path: str
    tool: str
    args: dict[str, Any]
    scope: dict[str, Any] | None = None
    """What the call's bindings read (a step's dependencies, an item's ``item``/``index``);
    None for a tool call an agent's model made (its arguments are the model's)."""

    def to_wire(self) -> dict[str, Any]:
        return {"path": self.path, "tool": self.tool, "args": self.args, "scope": self.scope}


OnPause = Callable[[Pause], Awaitable[Action]]
"""In-process: called at each pause, answers with the action (``execute_plan(on_pause=)``)."""


class Pauses:
    """An awaitable handle on an in-process run's pauses (pass it as ``on_pause``): await
    ``next()`` for the next pause, answer it with ``continue_``/``skip``/``abort`` by path;
    several may be open at once (parallel branches)."""

    def __init__(self) -> None:
        self._open: dict[str, asyncio.Future[Action]] = {}
        self._seen: asyncio.Queue[Pause] = asyncio.Queue()
        self._paused: dict[str, Pause] = {}

    async def __call__(self, pause: Pause) -> Action:
        future: asyncio.Future[Action] = asyncio.get_running_loop().create_future()
        self._open[pause.path] = future
        self._paused[pause.path] = pause
        self._seen.put_nowait(pause)
        try:
            return await future
        finally:
            self._open.pop(pause.path, None)
            self._paused.pop(pause.path, None)

    async def next(self) -> Pause:
        """The next call that pauses (in the order they paused)."""
        return await self._seen.get()

    def paused(self) -> list[Pause]:
        """Every call paused now, in the order they paused."""
        return list(self._paused.values())

    def answer(self, path: str, action: str) -> None:
        """Answer the pause at ``path`` (``ValueError`` when none is open there)."""
        checked = check_action(action)
        future = self._open.get(path)
        if future is None or future.done():
            open_ = ", ".join(self._open) or "none"
            raise ValueError(f"no call is paused at {path!r} (paused: {open_})")
        future.set_result(checked)

    def continue_(self, path: str) -> None:
        self.answer(path, "continue")

    def skip(self, path: str) -> None:
        self.answer(path, "skip")

    def abort(self, path: str) -> None:
        self.answer(path, "abort")
