"""Breakpoints in-process: the gate every call of an in-process run passes first.

The rule and the answers are ``run.breakpoints``'s, shared with the durable runner; here a
pause is an ``await`` on the caller's ``on_pause`` (an async callback, or a ``Pauses``
handle to await and answer), with the same events (``paused``, ``resumed``) and the same
outcomes: ``skip`` is recorded as ``not_taken`` by the engine, ``abort`` cancels the run,
which ``execute_plan`` raises as ``PlanAborted`` with the ledger so far.

The gate travels in a context variable, as the current step does (``events.step_context``):
an agent step's tool calls reach it through the invoker, which knows only a tool and its
arguments, and a saved plan's nested run finds its caller's gate and adds its own prefix.
"""

from __future__ import annotations

import asyncio
import contextvars
from dataclasses import dataclass, replace
from typing import Any

from durable_plan.language.step_path import parse, rooted
from durable_plan.run.breakpoints import (
    Action,
    Breakpoints,
    OnPause,
    Pause,
    check_action,
    pauses_before,
)
from durable_plan.run.events import SILENT, Emitter


@dataclass(frozen=True)
class Gate:
    """One run's breakpoints and who answers them."""

    breakpoints: Breakpoints
    on_pause: OnPause
    events: Emitter = SILENT
    """The top-level run's events (its ``path_prefix`` is empty: paths go out whole)."""
    path_prefix: str = ""
    aborted: list[str] | None = None
    """The path a person aborted at (shared by a run and its nested runs)."""
    runner: list[asyncio.Task[Any]] | None = None
    """The top-level run's task: an abort cancels it (a cancellation raised inside an
    agent's tool call would end that call only: Strands runs each in a task of its own)."""

    def under(self, path_prefix: str) -> Gate:
        """The gate of a nested run (a saved plan's) started at ``path_prefix``: its pauses
        are announced where the top-level run's events go, named from the root."""
        return replace(self, path_prefix=path_prefix)

    async def check(
        self, call_id: str, tool: str, args: dict[str, Any], scope: dict[str, Any] | None
    ) -> Action | None:
        """None when no breakpoint names the call (``call_id``: its path inside the run);
        else the person's answer, ``abort`` having cancelled the run."""
        if not pauses_before(tool):
            return None  # an agent step, a map, a saved plan: they pause inside
        path = rooted(self.path_prefix, call_id)
        if not self.breakpoints.hits(path):
            return None
        step = parse(path).step
        self.events.emit("paused", step=step, path=path, tool=tool)
        action = check_action(await self.on_pause(Pause(path, tool, args, scope)))
        self.events.emit("resumed", step=step, path=path, tool=tool, status=action)
        if action == "abort":
            if self.aborted is not None and not self.aborted:
                self.aborted.append(path)
            for task in self.runner or ():
                task.cancel(f"aborted at breakpoint {path}")
            raise asyncio.CancelledError(f"aborted at breakpoint {path}")
        return action


_GATE: contextvars.ContextVar[Gate | None] = contextvars.ContextVar(
    "durable_plan_pause_gate", default=None
)


def current_gate() -> Gate | None:
    """The gate of the in-process run this task belongs to (None: no breakpoints)."""
    return _GATE.get()


def set_gate(gate: Gate | None) -> contextvars.Token[Gate | None]:
    return _GATE.set(gate)


def reset_gate(token: contextvars.Token[Gate | None]) -> None:
    _GATE.reset(token)


def make_gate(breakpoints: Any, on_pause: OnPause | None) -> Gate | None:
    """The gate ``execute_plan`` runs with, checked before anything runs: every pattern
    (``step_path.check_pattern``), and someone to answer when there are any."""
    checked = Breakpoints.of(breakpoints)
    if not checked:
        return None
    if on_pause is None:
        raise ValueError(
            "breakpoints need someone to answer them in-process: pass on_pause= (an async "
            "callback taking a Pause and returning 'continue', 'skip' or 'abort', or a "
            "durable_plan.run.breakpoints.Pauses handle)"
        )
    return Gate(checked, on_pause, aborted=[], runner=[])
