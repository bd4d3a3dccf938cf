"""The errors a stored payload that cannot be read back raises, shared by every driver.

Apart from the drivers because all of them raise these (the file driver, the S3 driver
and the stand-in of a process with storage off, ``payload_storage._Unavailable``), and one
class per failure keeps ``except`` clauses and the fix text in one place.
"""

from __future__ import annotations

from temporalio.exceptions import ApplicationError

SAME_STORE_FIX = (
    "give every worker and every client the same store: $DURABLE_PLAN_STORE (a directory "
    "or s3://bucket/prefix), set alike for all of them"
)


class StoredPayloadUnreadable(ApplicationError):
    """A reference in history this process cannot turn back into its payload: storage not
    configured here, another store, the object gone or altered. Non-retryable: a worker
    raising it while decoding a workflow task fails the workflow (the SDK fails the
    execution on a non-retryable ``ApplicationError``) instead of retrying the task forever,
    since no retry of this worker brings the payload back."""

    def __init__(self, message: str) -> None:
        super().__init__(message, type=type(self).__name__, non_retryable=True)


class MissingStoredPayload(StoredPayloadUnreadable):
    """A reference in history whose stored payload is gone (deleted, expired, elsewhere) or
    is not what was stored."""
