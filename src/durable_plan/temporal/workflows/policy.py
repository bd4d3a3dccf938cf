"""How one tool call runs durably: its timeout, its retries, where it runs. Built here only.

Every path that calls a tool from workflow code (a plan step, a map item, a tool
call inside an agent step, an MCP call, a direct call of the model's) asks
``CallPolicy.of`` and ``retry_policy``, so the owner's rules are applied in one
place:

* ``timeout_s`` and ``retries`` are the owner's upper bounds; a step may ask for
  less (the check refuses more, and this keeps the rule for input that skipped
  the check);
* a local activity only where the owner allows it;
* spare attempts for a lost worker (``max_interruptions``) only where the wrapper
  activity can tell a crash from the tool's own failure, that is for the
  registry's own function tools on regular activities. Existing activities and
  MCP calls get exactly ``retries + 1`` attempts: nothing tells their timeout
  from a dead worker, and spare attempts would call them past the owner's bound.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from temporalio.common import Priority, RetryPolicy

from durable_plan.language.options import ToolOptions

MAX_RETRY_INTERVAL_S = 30.0
"""The longest wait between two attempts of anything a plan runs."""
WRAPPED_KINDS = ("function", "agent_tool", "sandbox")
"""Tools that run inside our wrapper activity, which counts the tool's own failures."""
FAIRNESS_KEY_BYTES = 64
"""Temporal's longest fairness key."""


def retry_policy(max_attempts: int, initial_interval_s: float = 0.5) -> RetryPolicy:
    """Exponential backoff from ``initial_interval_s``, capped at 30 s, ``max_attempts`` in
    all (never Temporal's default of unlimited attempts)."""
    return RetryPolicy(
        initial_interval=timedelta(seconds=initial_interval_s),
        backoff_coefficient=2.0,
        maximum_interval=timedelta(seconds=max(MAX_RETRY_INTERVAL_S, initial_interval_s)),
        maximum_attempts=max(max_attempts, 1),
    )


@functools.lru_cache(maxsize=256)
def _timing(
    timeout_s: float, max_attempts: int, initial_interval_s: float
) -> tuple[timedelta, RetryPolicy]:
    """A call's timeout and retry policy, built once per distinct rule (a plan's steps share a
    handful): the SDK only reads them when it schedules, so one object serves every call of
    every workflow on the worker. An interceptor must replace ``input.retry_policy``, never
    change it in place (the README's Performance section says so too)."""
    return timedelta(seconds=timeout_s), retry_policy(max_attempts, initial_interval_s)


@dataclass(frozen=True)
class CallPolicy:
    """The owner's rules for one call, tightened by what the step asked for."""

    timeout_s: float
    retries: int
    heartbeat_timeout_s: float | None
    local: bool
    interruptions: int = 0
    """Extra attempts a lost worker may cut short (wrapped tools on regular activities)."""
    task_queue: str | None = None
    """The tool's own queue (its owner routed it there); None: the plan's."""

    @classmethod
    def of(
        cls,
        options: ToolOptions,
        *,
        timeout_s: float | None = None,
        retries: int | None = None,
        local: bool = False,
        interruptions: int = 0,
    ) -> CallPolicy:
        # The owner's rules: a step may only tighten them.
        timeout = min(timeout_s or options.timeout_s, options.timeout_s)
        tries = min(options.retries if retries is None else retries, options.retries)
        runs_local = options.local or (local and options.may_run_local)
        # A routed tool's code is on its queue's workers only, never on the plan's worker.
        runs_local = runs_local and options.kind != "activity" and options.task_queue is None
        spare = interruptions if not runs_local else 0
        if options.kind not in WRAPPED_KINDS:
            spare = 0
        return cls(
            timeout, tries, options.heartbeat_timeout_s, runs_local, spare, options.task_queue
        )

    @property
    def max_attempts(self) -> int:
        return self.retries + 1 + self.interruptions

    def activity_options(
        self, activity_id: str, summary: str | None, initial_interval_s: float
    ) -> dict[str, Any]:
        """``execute_activity`` / ``execute_local_activity`` options both take."""
        timeout, retry = _timing(self.timeout_s, self.max_attempts, initial_interval_s)
        return {
            "start_to_close_timeout": timeout,
            "retry_policy": retry,
            "activity_id": activity_id,
            "summary": summary,
        }

    def remote_options(
        self, task_queue: str | None, fairness_key: str | None = None
    ) -> dict[str, Any]:
        """What only a regular activity takes: the tool's own queue before the plan's.

        On a tool's own queue (where its limits make calls wait) each call carries
        ``fairness_key`` (the conversation, or the plan): a server with task-queue fairness
        on serves the waiting keys in turn, so one conversation's fifty calls do not hold
        another's one behind them. Calls on the plan's queue carry no priority, as before."""
        heartbeat = self.heartbeat_timeout_s
        options: dict[str, Any] = {
            "heartbeat_timeout": timedelta(seconds=heartbeat) if heartbeat else None,
            "task_queue": self.task_queue or task_queue,
        }
        if self.task_queue is not None and fairness_key:
            key = fairness_key.encode()[:FAIRNESS_KEY_BYTES].decode(errors="ignore")
            options["priority"] = Priority(fairness_key=key)
        return options
