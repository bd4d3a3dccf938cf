"""The console's guard: every request passes here before any route runs.

- The Host header must name the console (DNS rebinding) unless a token guards it.
- With a token, every request carries it: the ``Authorization: Bearer`` header, or the
  cookie the page gets when it is first opened with ``?token=`` (then redirected to a URL
  without it, so the token does not stay in the address bar or the history). Compared in
  constant time.
- A request that changes something is a POST, from the same origin (``Origin`` equal to
  the console's own; a browser always sends it on a cross-site POST), with a JSON body:
  another web site cannot make the browser act, even on loopback without a token.
- Every answer says ``Cache-Control: no-store`` (decoded values never land in a browser's
  disk cache) and carries a content security policy that allows only this origin (the
  page loads nothing from elsewhere).
"""

from __future__ import annotations

import hmac
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qs, urlencode

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from durable_plan.console.settings import TOKEN_COOKIE, ConsoleSettings

SECURITY_HEADERS: list[tuple[bytes, bytes]] = [
    (b"cache-control", b"no-store"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (
        b"content-security-policy",
        b"default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
        b"connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
    ),
]


def _headers(scope: Scope) -> dict[str, str]:
    return {k.decode("latin-1"): v.decode("latin-1") for k, v in scope.get("headers", [])}


class ConsoleGuard:
    """ASGI middleware enforcing ``ConsoleSettings``' rules on every HTTP request."""

    def __init__(self, app: ASGIApp, settings: ConsoleSettings) -> None:
        self.app = app
        self.settings = settings

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = _headers(scope)
        refusal = self._refusal(scope, headers)
        if refusal is not None:
            await _send_text(send, *refusal)
            return
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        if self.settings.token is not None and "token" in query and scope["method"] == "GET":
            await self._set_cookie_and_redirect(scope, query, send)
            return

        async def secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *SECURITY_HEADERS]
            await send(message)

        await self.app(scope, receive, secured)

    def _refusal(self, scope: Scope, headers: dict[str, str]) -> tuple[int, str] | None:
        if not self.settings.host_allowed(headers.get("host", "")):
            return 421, "this console answers only to its own host name (DNS rebinding guard)"
        if self.settings.token is not None and not self._token_ok(scope, headers):
            return 401, "a token is required: open the URL `durable-plan ui` printed"
        method = scope["method"]
        if method in ("GET", "HEAD"):
            return None
        if method != "POST":
            return 405, "only GET and POST"
        origin = headers.get("origin")
        own = {f"http://{headers.get('host', '')}", f"https://{headers.get('host', '')}"}
        if origin is None or origin not in own:
            return 403, "actions are accepted only from the console's own page (same origin)"
        if not headers.get("content-type", "").startswith("application/json"):
            return 415, "actions are JSON (Content-Type: application/json)"
        return None

    def _token_ok(self, scope: Scope, headers: dict[str, str]) -> bool:
        expected = (self.settings.token or "").encode()
        given: list[str] = []
        auth = headers.get("authorization", "")
        if auth.lower().startswith("bearer "):
            given.append(auth[7:].strip())
        cookie = SimpleCookie()
        try:
            cookie.load(headers.get("cookie", ""))
        except Exception:  # a malformed cookie header is no token
            cookie = SimpleCookie()
        if TOKEN_COOKIE in cookie:
            given.append(cookie[TOKEN_COOKIE].value)
        if scope["method"] == "GET":  # the first visit, which sets the cookie
            given += parse_qs(scope.get("query_string", b"").decode("latin-1")).get("token", [])
        return any(hmac.compare_digest(g.encode(), expected) for g in given)

    async def _set_cookie_and_redirect(
        self, scope: Scope, query: dict[str, list[str]], send: Send
    ) -> None:
        rest = {k: v for k, v in query.items() if k != "token"}
        location = scope.get("path", "/") + (("?" + urlencode(rest, doseq=True)) if rest else "")
        cookie = (
            f"{TOKEN_COOKIE}={self.settings.token}; Path=/; HttpOnly; SameSite=Strict"
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 303,
                "headers": [
                    (b"location", location.encode()),
                    (b"set-cookie", cookie),
                    *SECURITY_HEADERS,
                ],
            }
        )
        await send({"type": "http.response.body", "body": b""})


async def _send_text(send: Send, status: int, text: str) -> None:
    body = (text + "\n").encode()
    headers: list[Any] = [
        (b"content-type", b"text/plain; charset=utf-8"),
        (b"content-length", str(len(body)).encode()),
        *SECURITY_HEADERS,
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
