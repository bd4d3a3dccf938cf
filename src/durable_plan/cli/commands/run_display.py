"""What the person sees while ``durable-plan run`` runs a plan: a live table on stderr,
the ``PlanResult`` as JSON on stdout at the end.

Apart from ``run.py`` (which prepares the plan and picks where it runs) because both
runners, in-process and on a server, show the same display: it follows progress lines,
approvals and events, and knows nothing of where they come from.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

from rich.console import Console

from durable_plan.check.plan_file.records import PlanFile
from durable_plan.cli.commands import EXIT_FAILED, EXIT_OK
from durable_plan.cli.event_watch import Watch, follow_events
from durable_plan.cli.progress_view import (
    AWAITING,
    ApprovalHint,
    LiveView,
    agent_calls_awaiting,
    approval_lines,
    console_for,
    lines_from_result,
    renderable,
)
from durable_plan.run.events import PlanEvent

if TYPE_CHECKING:
    from durable_plan.language.plan import PlanResult

POLL_S = 0.25
WATCH_DRAIN_S = 2.0


class Display:
    """The live table on stderr while the plan runs; the result as JSON on stdout at the end."""

    def __init__(self, pf: PlanFile, quiet: bool, hint: ApprovalHint | None) -> None:
        self._console: Console = console_for(sys.stderr)
        self._quiet = quiet
        self._hint = hint
        self._title = pf.title
        self._view = LiveView(self._console, title=pf.title, hint=hint)
        self._announced: set[str] = set()

    def note(self, text: str) -> None:
        if not self._quiet:
            self._console.print(text, highlight=False, soft_wrap=True)

    async def follow(
        self,
        work: Awaitable[PlanResult],
        lines: Callable[[], Awaitable[list[dict[str, Any]] | None]],
        events: AsyncIterator[PlanEvent] | None = None,
    ) -> PlanResult:
        """Await ``work``, redrawing the ledger as ``events`` arrive (Ctrl-C stops
        watching); without them, or when the stream cannot be read (a worker from before
        streams), from ``lines`` every ``POLL_S``."""
        task = asyncio.ensure_future(work)
        watcher = None
        watch = Watch()
        if events is not None and not self._quiet:
            watcher = asyncio.ensure_future(follow_events(events, lines, self._show_lines, watch))
        try:
            while not task.done():
                await asyncio.wait([task], timeout=POLL_S)
                if task.done() or self._quiet:
                    continue
                self._view.tick()  # a waiting plan sends no event: draw it all the same
                failed = watcher is not None and watcher.done() and watcher.exception()
                if watcher is not None and not failed and not watch.quiet():
                    continue  # the stream draws
                current = await lines()
                if current is not None:
                    self._show_lines(current)
            if watcher is not None and not watcher.done():
                # plan_finished is published before the plan completes: the next read has
                # it. A read cut off instead leaves the worker of this process warning.
                await asyncio.wait([watcher], timeout=WATCH_DRAIN_S)
            return task.result()
        except BaseException:
            self._view.close()
            raise
        finally:
            for pending in (task, watcher):
                if pending is not None and not pending.done():
                    pending.cancel()

    def _show_lines(self, lines: list[dict[str, Any]]) -> None:
        self._announce(lines)
        self._view.update(lines)

    def _announce(self, lines: list[dict[str, Any]]) -> None:
        """Steps (and tool calls inside agent steps) that start waiting for a person, once
        each, also where no table is drawn."""
        for line in lines:
            keys = [line["id"]] if line["phase"] == AWAITING else []
            keys += [f"{line['id']} {call['id']}" for call in agent_calls_awaiting(line)]
            fresh = [key for key in keys if key not in self._announced]
            if not fresh:
                continue
            self._announced.update(fresh)
            if not self._console.is_terminal:
                for text in approval_lines([line], self._hint):
                    self.note(text)

    def finish(self, result: PlanResult) -> int:
        final = lines_from_result(result)
        if not self._view.close(final) and not self._quiet:
            self._console.print(renderable(final, title=self._title))
        # Why the plan failed, one line a step, also with --quiet: quiet drops the table
        # and the notes, never the error (the exit code alone does not say which step).
        for failure in result.failures:
            self._say(f"step '{failure.id}' failed: {failure.error}")
        if result.exited is not None and (not self._quiet or not result.ok):
            self._say(f"exited at step '{result.exited['step']}': {result.exited['message']}")
        print(json.dumps(result.model_dump(mode="json"), indent=2))
        return EXIT_OK if result.ok else EXIT_FAILED

    def _say(self, text: str) -> None:
        self._console.print(text, highlight=False, soft_wrap=True)

    def failed(self, message: str, lines: list[dict[str, Any]] | None) -> int:
        if not self._view.close(lines) and not self._quiet and lines:
            self._console.print(renderable(lines, title=self._title))
        print(f"durable-plan: the plan failed: {message}", file=sys.stderr)
        return EXIT_FAILED
