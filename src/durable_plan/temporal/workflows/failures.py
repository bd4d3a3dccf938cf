"""The root cause of a Temporal failure chain, as one line a person can act on.

A failed conversation reaches its caller as ``WorkflowFailureError`` <- ``ApplicationError``
<- ``ActivityError("Activity task failed")`` <- the model's own error: the useful words
("NoCredentialsError: Unable to locate credentials") are at the bottom of a 40-line
traceback, and the web UI shows only the top. Workflows put `root_message` into their own
failure, and clients print it.

Pure functions over exception objects: safe in workflow code.

``PlanFailed`` lives here too: the one error for "the plan as a whole failed", raised by
the client (``PlanHandle.result``) and by the plugin's durable path, both of which can
import this module (and only a class with one identity keeps ``except PlanFailed`` true
for every raise).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from temporalio import workflow
from temporalio.exceptions import ApplicationError, FailureError

if TYPE_CHECKING:
    from durable_plan.temporal.workflows.recovery import Salvage

__all__ = [
    "MAX_MESSAGE_CHARS",
    "PlanFailed",
    "fail_on_agent_error",
    "root_cause",
    "root_message",
]

MAX_MESSAGE_CHARS = 1_000
_MAX_DEPTH = 32  # a cycle or an absurd chain must not loop


class PlanFailed(RuntimeError):
    """The plan workflow itself failed (not a step: the plan as a whole): the child workflow
    failed, or the plugin is misconfigured. ``salvage``: what the plan had done, when the
    plugin's durable path could find it (``None`` from ``PlanHandle.result``)."""

    def __init__(self, message: str, salvage: Salvage | None = None) -> None:
        super().__init__(message)
        self.salvage = salvage


def root_cause(exc: BaseException) -> BaseException:
    """The innermost ``__cause__`` (Temporal links a failure's cause the same way)."""
    for _ in range(_MAX_DEPTH):
        if exc.__cause__ is None:
            break
        exc = exc.__cause__
    return exc


def root_message(exc: BaseException) -> str:
    """``"<type>: <message>"`` of the root cause, on one line and at most 1,000 characters."""
    cause = root_cause(exc)
    if isinstance(cause, ApplicationError):
        text = str(cause)  # "<type>: <message>" when the error has a type
    elif isinstance(cause, FailureError):
        text = f"{type(cause).__name__}: {cause.message}"
    else:
        text = f"{type(cause).__name__}: {cause}"
    line = " ".join(text.split())
    if len(line) > MAX_MESSAGE_CHARS:
        line = line[: MAX_MESSAGE_CHARS - 3] + "..."
    return line


@contextmanager
def fail_on_agent_error() -> Iterator[None]:
    """Around an agent's call in a workflow: an error ends the workflow with its root cause.

    ::

        with fail_on_agent_error():
            answer = await agent.invoke_async(prompt)

    An exception that is not a Temporal failure (a model's ``ValidationException``, a
    tool's ``KeyError``) would fail only the workflow task, and Temporal retries that
    forever: a conversation stuck, not ended. This raises a non-retryable
    ``ApplicationError`` with `root_message` instead (the line people can act on, not the
    top of a 40-line chain), its cause chained. Temporal's own control flow (cancellation,
    nondeterminism, a read-only context) passes through untouched."""
    try:
        yield
    except (workflow.NondeterminismError, workflow.ReadOnlyContextError):
        raise
    except Exception as exc:
        raise ApplicationError(root_message(exc), non_retryable=True) from exc
