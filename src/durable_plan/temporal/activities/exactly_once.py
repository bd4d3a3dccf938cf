"""Exactly-once effects for tools whose effect is a database write.

Temporal runs an activity at least once: a step whose worker died after the
effect but before the server recorded the completion runs again. Only the tool
can prevent the second effect, and only when the effect and a record of it
commit together. ``exactly_once(store)`` does that: it opens a transaction,
returns the recorded result if this step (``current_step().idempotency_key``)
already ran, and otherwise calls the tool with the transaction, records the
result in it, and commits both at once. A crash before the commit rolls the
effect back (the retry does it); a crash after it leaves a record (the retry
returns it without a second effect).

Limits: only effects made *through the transaction* are covered. A call to an
outside system (an HTTP request, an email) cannot join it; pass the
idempotency key to that system instead. Outside a plan step (a direct call)
there is no key, and the tool simply runs in a transaction.

    store = SQLiteEffects("effects.db")

    @exactly_once(store)
    def refund(ticket_id: int, amount: int, effects: sqlite3.Connection) -> dict:
        effects.execute("INSERT INTO refunds VALUES (?, ?)", (ticket_id, amount))
        return {"refunded": amount}
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import json
import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol, TypeVar

from durable_plan.temporal.activities.tool_activities import current_step

F = TypeVar("F", bound=Callable[..., Any])
TRANSACTION_PARAM = "effects"


class EffectTransaction(Protocol):
    """One transaction: the tool's effect and the record of it commit together."""

    def recorded(self, key: str) -> tuple[bool, Any]: ...

    def record(self, key: str, result: Any) -> None: ...


class EffectStore(Protocol):
    def transaction(self) -> contextlib.AbstractContextManager[Any]: ...


class SQLiteEffects:
    """A SQLite store: the tool gets the connection, inside one ``BEGIN IMMEDIATE``."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self._lock = threading.Lock()
        with self._connect() as conn:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS durable_plan_effects "
                "(key TEXT PRIMARY KEY, result TEXT NOT NULL)"
            )

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, isolation_level=None, timeout=30)
        conn.execute("PRAGMA journal_mode=WAL")
        return conn

    @contextlib.contextmanager
    def transaction(self) -> Iterator[_SQLiteTransaction]:
        conn = self._connect()
        try:
            conn.execute("BEGIN IMMEDIATE")  # one writer at a time: no double check-then-act
            try:
                yield _SQLiteTransaction(conn)
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
        finally:
            conn.close()


class _SQLiteTransaction:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self.connection = conn

    def recorded(self, key: str) -> tuple[bool, Any]:
        row = self.connection.execute(
            "SELECT result FROM durable_plan_effects WHERE key = ?", (key,)
        ).fetchone()
        return (False, None) if row is None else (True, json.loads(row[0]))

    def record(self, key: str, result: Any) -> None:
        self.connection.execute(
            "INSERT INTO durable_plan_effects (key, result) VALUES (?, ?)",
            (key, json.dumps(result)),
        )


def exactly_once(store: SQLiteEffects) -> Callable[[F], F]:
    """Make a sync tool's database effect happen once per plan step, across retries.

    The tool takes a parameter named ``effects``: the transaction's connection,
    for its writes. The parameter is hidden from the tool's schema (the model
    never sees it). The result must be JSON (it is recorded).
    """

    def decorate(func: F) -> F:
        signature = inspect.signature(func)
        if TRANSACTION_PARAM not in signature.parameters:
            raise TypeError(
                f"{func.__name__} needs a parameter named '{TRANSACTION_PARAM}' (the "
                "transaction its effect joins)"
            )
        if inspect.iscoroutinefunction(func):
            raise TypeError("exactly_once wraps sync tools (sqlite3 is synchronous)")

        @functools.wraps(func)
        def run(*args: Any, **kwargs: Any) -> Any:
            step = current_step()
            key = f"{step.idempotency_key}:{func.__name__}" if step is not None else None
            with store.transaction() as tx:
                if key is not None:
                    done, result = tx.recorded(key)
                    if done:
                        return result  # the effect already happened in an earlier attempt
                result = func(*args, **{**kwargs, TRANSACTION_PARAM: tx.connection})
                if key is not None:
                    tx.record(key, result)
                return result

        visible = [p for name, p in signature.parameters.items() if name != TRANSACTION_PARAM]
        run.__signature__ = signature.replace(parameters=visible)  # type: ignore[attr-defined]
        return run  # type: ignore[return-value]

    return decorate
