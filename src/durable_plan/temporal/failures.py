"""The root cause of a Temporal failure chain, as one line a person can act on.

A failed conversation reaches its caller as ``WorkflowFailureError`` <- ``ApplicationError``
<- ``ActivityError("Activity task failed")`` <- the model's own error: the useful words
("NoCredentialsError: Unable to locate credentials") are at the bottom of a 40-line
traceback, and the web UI shows only the top. Workflows put `root_message` into their own
failure, and clients print it.

Pure functions over exception objects: safe in workflow code.
"""

from __future__ import annotations

from temporalio.exceptions import ApplicationError, FailureError

__all__ = ["MAX_MESSAGE_CHARS", "root_cause", "root_message"]

MAX_MESSAGE_CHARS = 1_000
_MAX_DEPTH = 32  # a cycle or an absurd chain must not loop


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
