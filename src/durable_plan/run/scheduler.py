"""The one place plan semantics live: a pure state machine over step statuses.

Shaped like ``graphlib.TopologicalSorter``: ``get_ready()`` hands out steps whose
dependencies have landed, ``done()`` reports how a step ended, ``is_active()``
says whether anything is left. It does no I/O, reads no clock and evaluates no
expression, so the in-process runner and the Temporal workflow drive the very
same object and cannot drift apart. Steps are handed out in plan order, which
keeps workflow code deterministic.

Resolution rules (decided here, nowhere else):

* ``join="all"`` (default): a step runs when every dependency ended ``ok``. A
  failed or skipped dependency makes it ``skipped``; otherwise a ``not_taken``
  dependency makes it ``not_taken`` (the branch prunes its subtree).
* ``join="any"``: once every dependency has ended, the step runs if at least one
  ended ``ok``; a failed or skipped dependency still skips it, and if all were
  ``not_taken`` it is ``not_taken`` too.
* ``on_error="fail_fast"``: the first failure skips every step not yet started;
  running steps finish. ``"continue"``: only dependents of a failure are skipped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from durable_plan.language.plan import Join, OnError, StepStatus


class Scheduler:
    """Hands out ready steps in dependency order; knows nothing about tools."""

    def __init__(
        self,
        deps: Mapping[str, frozenset[str]],
        *,
        order: Sequence[str] | None = None,
        join: Mapping[str, Join] | None = None,
        on_error: OnError = "fail_fast",
        max_parallel: int | None = None,
    ) -> None:
        self._order = list(order) if order is not None else list(deps)
        self._rank = {sid: n for n, sid in enumerate(self._order)}
        self._deps = {sid: frozenset(deps[sid]) for sid in self._order}
        self._join = dict(join or {})
        self._on_error = on_error
        self._capacity = max_parallel
        self._dependents: dict[str, list[str]] = {sid: [] for sid in self._order}
        for sid in self._order:
            for dep in sorted(self._deps[sid], key=self._rank.__getitem__):
                self._dependents[dep].append(sid)
        self._waiting_on = {sid: len(d) for sid, d in self._deps.items()}
        self._status: dict[str, StepStatus] = {}
        self._reason: dict[str, str] = {}
        self._running: set[str] = set()
        self._runnable: list[str] = []
        self._decide = [sid for sid in self._order if not self._deps[sid]]
        self._stopped = False
        self._stop_reason = ""

    # -- queries ----------------------------------------------------------------

    @property
    def statuses(self) -> Mapping[str, StepStatus]:
        """Final statuses of the steps that have ended so far."""
        return dict(self._status)

    @property
    def ended(self) -> int:
        """How many steps have ended so far (cheap, unlike ``statuses``, which copies)."""
        return len(self._status)

    @property
    def running(self) -> frozenset[str]:
        return frozenset(self._running)

    def reason(self, step_id: str) -> str | None:
        """Why the scheduler skipped or pruned a step (for the ledger)."""
        return self._reason.get(step_id)

    def is_active(self) -> bool:
        """True while some step has not ended."""
        return len(self._status) < len(self._order)

    # -- transitions ----------------------------------------------------------

    def get_ready(self) -> list[str]:
        """Steps to start now, in plan order; each is handed out once."""
        self._resolve_decidable()
        if self._stopped:
            return []
        free = len(self._runnable)
        if self._capacity is not None:
            free = max(0, min(free, self._capacity - len(self._running)))
        ready, self._runnable = self._runnable[:free], self._runnable[free:]
        self._running.update(ready)
        return ready

    def done(self, step_id: str, status: StepStatus, reason: str | None = None) -> None:
        """Record how a handed-out step ended: ok, failed, or not_taken (its `when`)."""
        if step_id not in self._running:
            raise ValueError(f"step {step_id!r} is not running")
        self._running.discard(step_id)
        self._finish(step_id, status, reason)
        if status == "failed" and self._on_error == "fail_fast":
            self.stop(f"plan stopped after '{step_id}' failed (on_error=fail_fast)")

    def stop(self, reason: str) -> None:
        """End the plan early (a failure under fail_fast, an ``exit`` step).

        Every step not handed out is skipped with ``reason``; steps running now
        finish (their side effects are under way); steps handed out but not yet
        started by the runner are skipped when it asks ``withdraw``.
        """
        if self._stopped:
            return
        self._stopped = True
        self._stop_reason = reason
        for sid in self._order:
            if sid not in self._status and sid not in self._running:
                self._status[sid] = "skipped"
                self._reason[sid] = reason
        self._runnable = []
        self._decide = []

    def withdraw(self, step_id: str) -> bool:
        """A handed-out step the runner has not started: True if it should still start.

        After a stop it is skipped here, with the stop's reason, so the rule of
        what a stop skips lives in this class only.
        """
        if not self._stopped or step_id not in self._running:
            return True
        self._running.discard(step_id)
        self._finish(step_id, "skipped", self._stop_reason)
        return False

    # -- internals ------------------------------------------------------------

    def _finish(self, step_id: str, status: StepStatus, reason: str | None) -> None:
        self._status[step_id] = status
        if reason is not None:
            self._reason[step_id] = reason
        for child in self._dependents[step_id]:
            self._waiting_on[child] -= 1
            if self._waiting_on[child] == 0:
                self._decide.append(child)

    def _resolve_decidable(self) -> None:
        while self._decide:
            batch = sorted(set(self._decide), key=self._rank.__getitem__)
            self._decide = []
            for sid in batch:
                if sid in self._status or sid in self._running:
                    continue
                verdict = self._verdict(sid)
                if verdict is None:
                    self._runnable.append(sid)
                else:
                    self._finish(sid, verdict[0], verdict[1])
        self._runnable.sort(key=self._rank.__getitem__)

    def _verdict(self, sid: str) -> tuple[StepStatus, str] | None:
        """None when the step should run, else the status it ends with and why."""
        if self._stopped:
            return "skipped", self._stop_reason
        deps = sorted(self._deps[sid], key=self._rank.__getitem__)
        broken = [d for d in deps if self._status[d] in ("failed", "skipped")]
        if broken:
            return "skipped", f"depends on {self._status[broken[0]]} step '{broken[0]}'"
        pruned = [d for d in deps if self._status[d] == "not_taken"]
        if not pruned:
            return None
        if self._join.get(sid, "all") == "any" and len(pruned) < len(deps):
            return None
        return "not_taken", f"depends on not_taken step '{pruned[0]}'"
