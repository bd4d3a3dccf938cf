"""One line per failed activity attempt, instead of the Temporal SDK's traceback.

The SDK logs every failed activity attempt as a WARNING, "Completing activity as failed",
with the exception's whole traceback (about 25 lines, the tool's exception and the
``ApplicationError`` raised from it), on the ``temporalio.activity`` logger. A plan step
whose tool fails three times printed 75 lines on the stderr of ``durable-plan run`` before
the one-line summary the ledger gives anyway, and as many on a worker's terminal.

The entry points install `one_line_activity_failures` (``durable-plan run`` and
``worker``, ``worker.py``, ``client.py --demo``); library code (``plan_worker``) never
does, because how a program logs is its owner's choice. The filter rewrites the record in
place, so whatever handler the program has prints one line, or drops it where the caller
shows it already:

- a plan step's attempt (its workflow is a ``PlanWorkflow`` or an ``AgentStepWorkflow``):
  ``step 'lookup' (look_up_monster) of plan-dragon-1a2b, attempt 1: KeyError: ...``; with
  ``drop_plan_steps`` (``durable-plan run``, whose table shows each step's attempts and
  last error) nothing.
- any other activity: ``activity invoke_model (3) of game-master-1a2b, attempt 1: ...``.

``DURABLE_PLAN_TRACEBACKS=1`` keeps the SDK's records as they are, for debugging a tool.
"""

from __future__ import annotations

import logging
import os
from typing import Any

__all__ = [
    "ACTIVITY_LOGGER",
    "TRACEBACKS_ENV",
    "ActivityFailureLines",
    "one_line_activity_failures",
]

ACTIVITY_LOGGER = "temporalio.activity"
TRACEBACKS_ENV = "DURABLE_PLAN_TRACEBACKS"
FAILED_MESSAGE = "Completing activity as failed"
PLAN_WORKFLOW_TYPES = frozenset({"PlanWorkflow", "AgentStepWorkflow"})
"""``PLAN_WORKFLOW_NAME`` and ``AGENT_STEP_WORKFLOW_NAME`` (not imported: this module is
imported before the SDK is, and must stay cheap)."""
MAX_LINE_CHARS = 400


class ActivityFailureLines(logging.Filter):
    """Turns the SDK's "Completing activity as failed" records into one line (or drops a
    plan step's, with ``drop_plan_steps``); every other record passes unchanged."""

    def __init__(self, *, drop_plan_steps: bool = False, prefix: str = "") -> None:
        super().__init__()
        self.drop_plan_steps = drop_plan_steps
        self.prefix = prefix

    def filter(self, record: logging.LogRecord) -> bool:
        if not isinstance(record.msg, str) or not record.msg.startswith(FAILED_MESSAGE):
            return True
        error = record.exc_info[1] if record.exc_info else None
        details: dict[str, Any] = getattr(record, "temporal_activity", None) or {}
        plan_step = details.get("workflow_type") in PLAN_WORKFLOW_TYPES
        if plan_step and self.drop_plan_steps:
            return False
        record.msg = self.prefix + _one_line(details, error, plan_step=plan_step)
        record.args = None
        record.exc_info = None
        record.exc_text = None
        record.stack_info = None
        return True


def one_line_activity_failures(
    *, drop_plan_steps: bool = False, prefix: str = ""
) -> ActivityFailureLines | None:
    """Install the filter on the SDK's activity logger (once: a second call replaces the
    first); None, installing nothing, when ``$DURABLE_PLAN_TRACEBACKS`` is set."""
    logger = logging.getLogger(ACTIVITY_LOGGER)
    for old in [f for f in logger.filters if isinstance(f, ActivityFailureLines)]:
        logger.removeFilter(old)
    if os.environ.get(TRACEBACKS_ENV, "").strip() not in ("", "0"):
        return None
    lines = ActivityFailureLines(drop_plan_steps=drop_plan_steps, prefix=prefix)
    logger.addFilter(lines)
    return lines


def _one_line(details: dict[str, Any], error: BaseException | None, *, plan_step: bool) -> str:
    activity_id = details.get("activity_id", "?")
    activity_type = details.get("activity_type", "?")
    workflow_id = details.get("workflow_id", "?")
    attempt = details.get("attempt", "?")
    if plan_step and details.get("workflow_type") == "PlanWorkflow":
        what = f"step '{activity_id}' ({activity_type}) of {workflow_id}"
    elif plan_step:
        what = f"tool call {activity_id} of agent step {workflow_id}"
    else:
        what = f"activity {activity_type} ({activity_id}) of {workflow_id}"
    line = f"{what}, attempt {attempt}: {_message(error)}"
    line = " ".join(line.split())
    return line if len(line) <= MAX_LINE_CHARS else line[: MAX_LINE_CHARS - 1] + "…"


def _message(error: BaseException | None) -> str:
    """The error as the ledger words it: an ``ApplicationError``'s message already starts
    with the tool's exception type (``KeyError: ...``)."""
    if error is None:
        return "failed"
    message = getattr(error, "message", None)
    if isinstance(message, str) and message and type(error).__name__ == "ApplicationError":
        return message
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
