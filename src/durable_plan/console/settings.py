"""What one console serves and how it guards it: the address, the token, the bounds.

Kept apart from the app so the command line, the tests and the bench build the same
settings, and the rules (a token for any address but loopback, the bounds of every
response) live in one place.
"""

from __future__ import annotations

import ipaddress
import secrets
from dataclasses import dataclass, field

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8700
TOKEN_COOKIE = "durable_plan_console"
TOKEN_BYTES = 24

MAX_TEXT_CHARS = 2_000
"""A value preview, an error, a prompt: cut here (the page says so)."""
MAX_LIST_ROWS = 50
"""Rows of the plans list per page."""
MAX_ITEMS = 100
"""Map items, agent rounds, tool calls shown per step (the rest are counted)."""
MAX_HISTORY_EVENTS = 20_000
"""History events read for one step's details: a plan's guard keeps its history well
under Temporal's 51,200, and a console request must not read more than that."""


def is_loopback(host: str) -> bool:
    """Only this machine can reach the address (``localhost``, 127.0.0.0/8, ``::1``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def new_token() -> str:
    return secrets.token_urlsafe(TOKEN_BYTES)


@dataclass(frozen=True)
class ConsoleSettings:
    """``token``: required on every request when set (always set for a host other than
    loopback: ``for_host``). ``decodes``: the console's client holds the keys of
    ``$DURABLE_PLAN_KEYS``, so sealed values can be shown."""

    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    token: str | None = None
    decodes: bool = False
    address: str = ""
    """The Temporal server, shown on the page."""
    namespace: str = "default"
    allowed_hosts: tuple[str, ...] = field(default=())
    """Host names a browser may use to reach the console (the Host header); empty: the
    bound host and, on loopback, ``localhost``/``127.0.0.1``/``[::1]``."""

    @classmethod
    def for_host(
        cls, host: str, port: int, token: str | None = None, **kw: object
    ) -> ConsoleSettings:
        """Settings for ``host``: a host other than loopback always gets a token (the
        given one, else a new random one the caller prints)."""
        if token is None and not is_loopback(host):
            token = new_token()
        return cls(host=host, port=port, token=token, **kw)  # type: ignore[arg-type]

    def host_allowed(self, host_header: str) -> bool:
        """Whether a request's Host header names this console. On loopback without a token
        this is what stops DNS rebinding (a web page whose name resolves to 127.0.0.1); with
        a token the token is the guard, and any name that reaches us is fine."""
        if self.token is not None:
            return True
        name = host_header.rsplit(":", 1)[0] if not host_header.endswith("]") else host_header
        names = {self.host, "localhost", "127.0.0.1", "[::1]", *self.allowed_hosts}
        return name in names
