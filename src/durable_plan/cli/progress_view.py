"""One picture of a plan's ledger, for ``durable-plan run`` (live) and ``durable-plan show``.

Both commands feed the same renderer with the same lines: the dicts of
``PlanWorkflow``'s ``progress`` query (``PlanHandle.progress``), which
``lines_from_run`` (an in-process ``PlanRun``) and ``lines_from_result`` (a finished
plan's ledger) produce too. So a person sees one table whether the plan runs in
this process, on a server, or ended yesterday: each step's status (pending,
running, ok, failed, skipped, not taken, awaiting approval), level, duration,
attempts, and what it is waiting for.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.table import Table
from rich.text import Text

from durable_plan.language.plan import PlanResult
from durable_plan.run.engine import PlanRun

Line = dict[str, Any]


class ApprovalHint(Protocol):
    """The command that answers a gate: a step's, or (``agent_step``) a tool call's inside
    that agent step, which is decided on the step's child workflow."""

    def __call__(self, step_id: str, digest: str | None, *, agent_step: str | None = None) -> str:
        """``step_id``: the step, or the tool call's id within ``agent_step``."""
        ...


AWAITING = "awaiting_approval"
STATUS_STYLE: dict[str, tuple[str, str]] = {
    "pending": ("· pending", "dim"),
    "running": ("▶ running", "yellow"),
    AWAITING: ("⏸ awaiting approval", "bold magenta"),
    "paused": ("⏸ paused", "bold blue"),
    "ok": ("✓ ok", "green"),
    "failed": ("✗ failed", "bold red"),
    "skipped": ("- skipped", "red"),
    "not_taken": ("○ not taken", "cyan"),
}
ORDER = ("ok", "running", AWAITING, "paused", "pending", "failed", "skipped", "not_taken")


def lines_from_run(run: PlanRun) -> list[Line]:
    """An in-process run's ledger so far, as the workflow's ``progress`` query gives it."""
    return [
        {
            "id": p.id,
            "tool": p.tool,
            "phase": p.phase,
            "level": p.level,
            "duration_ms": p.duration_ms,
            "attempts": p.attempts,
            "error": p.error,
        }
        for p in run.progress()
    ]


def lines_from_result(result: PlanResult) -> list[Line]:
    """A finished plan's ledger, in the same shape."""
    return [
        {
            "id": o.id,
            "tool": o.tool,
            "phase": o.status,
            "level": o.level,
            "duration_ms": o.duration_ms,
            "attempts": o.attempts,
            "error": o.error,
        }
        for o in result.ledger
    ]


class Clock:
    """When this view first saw each step running: the elapsed time of steps not ended yet."""

    def __init__(self) -> None:
        self._since: dict[str, float] = {}

    def elapsed_ms(self, line: Mapping[str, Any]) -> float | None:
        if line["phase"] not in ("running", AWAITING):
            self._since.pop(line["id"], None)
            return None
        started = self._since.setdefault(line["id"], time.monotonic())
        return (time.monotonic() - started) * 1000.0


def counts(lines: Iterable[Mapping[str, Any]]) -> str:
    tally: dict[str, int] = {}
    for line in lines:
        tally[line["phase"]] = tally.get(line["phase"], 0) + 1
    ordered = sorted(tally, key=lambda p: ORDER.index(p) if p in ORDER else len(ORDER))
    return " · ".join(f"{tally[p]} {p.replace('_', ' ')}" for p in ordered)


def table(
    lines: Sequence[Mapping[str, Any]], *, title: str | None = None, clock: Clock | None = None
) -> Table:
    """The ledger as a table; ``clock`` (a live view's) times the steps still running."""
    grid = Table(title=title, caption=counts(lines), caption_justify="left", title_justify="left")
    grid.add_column("step", no_wrap=True)
    grid.add_column("tool", no_wrap=True)
    grid.add_column("status", no_wrap=True)
    grid.add_column("level", justify="right")
    grid.add_column("time", justify="right", no_wrap=True)
    grid.add_column("tries", justify="right")
    grid.add_column("detail", overflow="fold")
    for line in lines:
        label, style = STATUS_STYLE.get(line["phase"], (line["phase"], ""))
        elapsed = clock.elapsed_ms(line) if clock is not None else None
        if elapsed is not None:
            when = f"{_duration(elapsed)}…"
        elif line["phase"] in ("ok", "failed") or line.get("duration_ms"):
            when = _duration(float(line.get("duration_ms") or 0.0))
        else:
            when = ""
        attempts = int(line.get("attempts") or 0)
        grid.add_row(
            line["id"],
            line["tool"],
            Text(label, style=style),
            str(line.get("level", "")),
            when,
            str(attempts) if attempts else "",
            _detail(line),
        )
    return grid


def _detail(line: Mapping[str, Any]) -> str:
    parts = []
    items = line.get("items")
    if isinstance(items, Mapping) and items.get("items") is not None:
        failed = f", {items['failed']} failed" if items.get("failed") else ""
        parts.append(f"{items.get('done', 0)}/{items['items']} items{failed}")
    if line.get("round") is not None and line["phase"] == "running":
        parts.append(f"agent round {line['round']}")
        waiting = len(line.get("awaiting") or ())
        if waiting:
            parts.append(f"{waiting} tool call{'s' if waiting != 1 else ''} awaiting approval")
    if line["phase"] == AWAITING:
        parts.append("waiting for a person's decision")
    if line.get("error"):
        parts.append(str(line["error"]))
    return "; ".join(parts)


def _duration(ms: float) -> str:
    if ms < 10:
        return f"{ms:.1f} ms"
    if ms < 1000:
        return f"{ms:.0f} ms"
    if ms < 60_000:
        return f"{ms / 1000:.1f} s"
    return f"{int(ms // 60_000)} min {int(ms % 60_000 // 1000)} s"


def approval_lines(
    lines: Sequence[Mapping[str, Any]], hint: ApprovalHint | None = None
) -> list[str]:
    """Steps awaiting a person, with the exact arguments they would approve, and refusals;
    tool calls inside agent steps awaiting a person too (decided on the step's child)."""
    out: list[str] = []
    for line in lines:
        if line["phase"] == AWAITING:
            out += _awaiting(f"{line['id']} awaits approval:", line, hint, line["id"], None)
        for call in agent_calls_awaiting(line):
            head = f"{line['id']} (agent step): tool call {call['id']} awaits approval:"
            out += _awaiting(head, call, hint, call["id"], line["id"])
        for refused in line.get("refused_decisions") or []:
            out.append(f"{line['id']}: a decision was refused: {refused}")
    return out


def agent_calls_awaiting(line: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """A running agent step's tool calls awaiting approval (from its child's ``progress``)."""
    if line["phase"] != "running":
        return []
    calls = line.get("awaiting")
    if not isinstance(calls, list):
        return []
    return [c for c in calls if isinstance(c, Mapping) and isinstance(c.get("id"), str)]


def _awaiting(
    head: str,
    item: Mapping[str, Any],
    hint: ApprovalHint | None,
    step_id: str,
    agent_step: str | None,
) -> list[str]:
    digest = item.get("args_digest")
    out = [head, f"    arguments: {json.dumps(item.get('args'), sort_keys=True)}"]
    out.append(f"    digest:    {digest}")
    if hint is not None:
        out.append(f"    answer:    {hint(step_id, digest, agent_step=agent_step)}")
    return out


def renderable(
    lines: Sequence[Mapping[str, Any]],
    *,
    title: str | None = None,
    clock: Clock | None = None,
    hint: ApprovalHint | None = None,
) -> RenderableType:
    """The table, then what the steps awaiting approval need."""
    grid = table(lines, title=title, clock=clock)
    extra = approval_lines(lines, hint)
    return Group(grid, Text("\n".join(extra))) if extra else grid


def print_ledger(
    console: Console,
    lines: Sequence[Mapping[str, Any]],
    *,
    title: str | None = None,
    hint: ApprovalHint | None = None,
) -> None:
    """The table, then the approval lines unwrapped: their `answer:` lines are commands to
    paste, and a child workflow's id makes them long (a terminal wraps them softly; a
    newline from the console's own wrapping would break the paste)."""
    console.print(table(lines, title=title))
    for text in approval_lines(lines, hint):
        console.print(text, soft_wrap=True, highlight=False, markup=False)


def console_for(stream: Any) -> Console:
    """A console on ``stream``; not a terminal (a pipe, a CI log): no colours, wide lines."""
    probe = Console(file=stream)
    if probe.is_terminal:
        return probe
    return Console(file=stream, width=140, color_system=None, highlight=False)


class LiveView:
    """The ledger redrawn in place while a plan runs, on a terminal only.

    It appears only once the run has lasted ``appear_after`` seconds: a plan that
    ends at once prints its result, not a flash of a table. ``close`` says whether
    the table was shown (the caller prints the final one otherwise).
    """

    def __init__(
        self,
        console: Console,
        *,
        title: str | None = None,
        hint: ApprovalHint | None = None,
        appear_after: float = 0.5,
    ) -> None:
        self._console = console
        self._title = title
        self._hint = hint
        self._clock = Clock()
        self._start = time.monotonic()
        self._appear_after = appear_after
        self._live: Live | None = None
        self._shown = False
        self._last: Sequence[Mapping[str, Any]] | None = None

    def update(self, lines: Sequence[Mapping[str, Any]]) -> None:
        self._last = lines
        self.tick()

    def tick(self) -> None:
        """Draw the last lines once the table may appear, and redraw its clock after.

        Called on every update and by the caller's loop between updates: a plan that stops
        to wait (for a person, for a worker) sends no update while it waits, and its
        waiting state must show at once, not at the next event."""
        if self._last is None:
            return
        view = renderable(self._last, title=self._title, clock=self._clock, hint=self._hint)
        if self._live is None:
            waited = time.monotonic() - self._start
            if not self._console.is_terminal or waited < self._appear_after:
                return
            self._live = Live(view, console=self._console, auto_refresh=False, transient=False)
            self._live.start(refresh=True)
            self._shown = True
            return
        self._live.update(view, refresh=True)

    def close(self, lines: Sequence[Mapping[str, Any]] | None = None) -> bool:
        """Draw the last state (if shown) and stop; True when the live table was shown."""
        if self._live is None:
            return self._shown
        if lines is not None:
            self._live.update(renderable(lines, title=self._title, hint=self._hint), refresh=True)
        self._live.stop()
        self._live = None
        return True
