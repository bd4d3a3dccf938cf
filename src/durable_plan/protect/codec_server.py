"""A codec server, so a person with the keys can read encrypted histories in the web UI.

The Temporal web UI never holds keys. Given a "remote codec endpoint" (the UI's Data
Encoder setting, or the server's ``--ui-codec-endpoint``), the UI's JavaScript in the
person's browser POSTs the payloads it is about to show to ``<endpoint>/decode`` and shows
what comes back; ``/encode`` serves payloads typed into the UI (a signal's input, say).
Both take and return ``{"payloads": [{"metadata": {...}, "data": "<base64>"}]}`` (the
protobuf JSON form of ``temporal.api.common.v1.Payloads``); the request names its namespace
in the ``X-Namespace`` header. Because the browser calls it from the UI's origin, the
server answers CORS preflights for the UI origins it is told about and no others.

Anyone who can reach this server can decrypt payloads: it listens on 127.0.0.1 unless told
otherwise, and ``namespaces`` restricts which namespaces it answers for. A request without
an ``Origin`` (not a browser's cross-origin call, or a page that a DNS rebinding pointed
here) must name this server in its ``Host``: a loopback name or address with this port, or
an ``allowed_hosts`` entry. What one request may cost is bounded: a body of at most
``MAX_BODY_BYTES`` and ``MAX_PAYLOADS`` payloads (a bigger one is refused with 413 before
it is read), ``MAX_CONNECTIONS`` connections at once (more wait ``BUSY_WAIT_S``, then get
503) and ``MAX_BUSY`` bodies decoded at once. Standard library only (``http.server`` in a
thread), so it needs nothing beyond durable-plan's own dependencies. The bounded
connections are ``bounded_http.py``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Collection, Iterable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler
from typing import Any

from google.protobuf import json_format
from temporalio.api.common.v1 import Payload, Payloads

from durable_plan.protect.bounded_http import _BoundedHTTPServer
from durable_plan.protect.encryption import EncryptionCodec, EncryptionError, Keyring

__all__ = [
    "DEFAULT_PORT",
    "DEFAULT_UI_ORIGINS",
    "MAX_BODY_BYTES",
    "MAX_CONNECTIONS",
    "MAX_PAYLOADS",
    "CodecServer",
]

DEFAULT_PORT = 8081
DEFAULT_UI_ORIGINS = ("http://localhost:8233", "http://127.0.0.1:8233")
"""The dev server's web UI (``durable-plan dev``, ``temporal server start-dev``)."""
MAX_BODY_BYTES = 8 * 1024 * 1024
"""The UI asks for one field's payloads at a time (an event's input, a result, a memo).
Temporal refuses a payload over 2 MiB and carries a workflow task's commands in one gRPC
message of at most 4 MiB, so what one field holds is at most 4 MiB, about 5.4 MiB as the
base64 JSON the UI sends: 8 MiB leaves room and refuses anything bigger (a 42 MiB body took
11.5 s and 575 MiB of memory to decode before this cap)."""
MAX_PAYLOADS = 1000
"""An event field holds a handful of payloads; thousands of tiny ones cost seconds and
hundreds of MiB to parse (about 200,000 fit in 8 MiB)."""
MAX_VALUES = 10 * MAX_PAYLOADS + 16
"""Objects, arrays and commas a body may hold: about five a payload, with room."""
MAX_CONNECTIONS = 16
"""Connections served at once, each in its own thread: a browser opens at most six to one
host, so this is several people's UIs. More wait ``BUSY_WAIT_S``, then get 503."""
MAX_BUSY = 4
"""Requests whose bodies are read and decoded at once; the others wait their turn, so at
most this many bodies are in memory."""
READ_TIMEOUT_S = 30.0
"""A client that announces a body and then stalls is dropped after this long."""
ALLOWED_HEADERS = "content-type,x-namespace,authorization"
LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})

Transform = Callable[[Iterable[Payload]], list[Payload]]


class CodecServer:
    """``/encode`` and ``/decode`` over HTTP for the web UI, in a background thread.

    ``with CodecServer(keyring, port=0) as server: ... server.url`` (port 0: a free one);
    `serve_forever` runs it in the foreground instead (``durable-plan codec-server``).
    """

    def __init__(
        self,
        keys: Keyring | EncryptionCodec,
        *,
        host: str = "127.0.0.1",
        port: int = DEFAULT_PORT,
        origins: Collection[str] = DEFAULT_UI_ORIGINS,
        namespaces: Collection[str] | None = None,
        allowed_hosts: Collection[str] = (),
        log: Callable[[str], None] | None = None,
        max_connections: int = MAX_CONNECTIONS,
    ) -> None:
        """``origins``: the web UI origins (scheme://host:port) allowed to call it from a
        browser; ``namespaces``: the only namespaces it answers for (None: any);
        ``allowed_hosts``: ``HOST`` or ``HOST:PORT`` names a request without an Origin may
        use in its Host header besides loopback ones (a name this machine is reached by);
        ``log``: called with one line per request (None: quiet)."""
        if not 0 <= port <= 65535:
            raise ValueError(f"CodecServer port={port} is not a port number (0-65535)")
        codec = keys if isinstance(keys, EncryptionCodec) else EncryptionCodec(keys)
        self.codec = codec
        self.origins = frozenset(origin.rstrip("/") for origin in origins)
        self.namespaces = None if namespaces is None else frozenset(namespaces)
        self.allowed_hosts = frozenset(h.strip().lower() for h in allowed_hosts if h.strip())
        self.log = log
        self.busy = threading.BoundedSemaphore(MAX_BUSY)
        self._httpd = _BoundedHTTPServer((host, port), self._handler_class(), max_connections)
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        """The endpoint to give the web UI (``--ui-codec-endpoint``)."""
        host = str(self._httpd.server_address[0])
        return f"http://{host}:{self.port}"

    def start(self) -> CodecServer:
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True
        )
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        """Serve in this thread until `stop` (from another thread) or KeyboardInterrupt."""
        try:
            self._httpd.serve_forever(poll_interval=0.2)
        finally:
            self._httpd.server_close()

    def shutdown(self) -> None:
        """Make `serve_forever` return (call it from another thread)."""
        self._httpd.shutdown()

    def stop(self) -> None:
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join()
            self._thread = None
        self._httpd.server_close()

    def __enter__(self) -> CodecServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(_Handler):
            codec_server = server

        return Handler

    def host_allowed(self, host_header: str) -> bool:
        """Whether a request's ``Host`` names this server: a loopback name or address with
        its port, the address it listens on, or an ``allowed_hosts`` entry (``HOST``: any
        port, ``HOST:PORT``: that one). A page that a DNS rebinding pointed here names the
        attacker's host instead."""
        host, port = _split_host(host_header.strip().lower())
        if host is None:
            return False
        port = 80 if port is None else port
        listening = str(self._httpd.server_address[0]).lower()
        if port == self.port and (host in LOOPBACK_HOSTS or host == listening):
            return True
        return host in self.allowed_hosts or f"{_bracketed(host)}:{port}" in self.allowed_hosts


def _split_host(text: str) -> tuple[str | None, int | None]:
    """``name[:port]`` or ``[v6][:port]`` as (host, port); (None, None) if malformed."""
    if text.startswith("["):
        close = text.find("]")
        if close < 0:
            return None, None
        host, rest = text[1:close], text[close + 1 :]
    else:
        host, sep, rest = text.partition(":")
        rest = sep + rest
    if not host:
        return None, None
    if not rest:
        return host, None
    if not rest.startswith(":") or not rest[1:].isdigit():
        return None, None
    return host, int(rest[1:])


def _bracketed(host: str) -> str:
    return f"[{host}]" if ":" in host else host


class _Handler(BaseHTTPRequestHandler):
    codec_server: CodecServer
    server_version = "durable-plan-codec"
    protocol_version = "HTTP/1.1"
    timeout = READ_TIMEOUT_S
    _body_read = False

    def do_OPTIONS(self) -> None:
        """A CORS preflight: allowed for the configured UI origins only."""
        if self._origin() is None:
            self._reply(HTTPStatus.FORBIDDEN, {"error": self._origin_refusal()})
            return
        self._reply(HTTPStatus.NO_CONTENT, None)

    def do_POST(self) -> None:
        route = self.path.split("?", 1)[0].rstrip("/")
        codec = self.codec_server.codec
        transform: Transform | None = None
        if route.endswith("/decode"):
            transform = codec.decode_sync
        elif route.endswith("/encode"):
            transform = codec.encode_sync
        if transform is None:
            self._reply(HTTPStatus.NOT_FOUND, {"error": "POST /encode or /decode"})
            return
        if self.headers.get("Origin"):
            if self._origin() is None:
                self._reply(HTTPStatus.FORBIDDEN, {"error": self._origin_refusal()})
                return
        elif not self._host_checked():
            return
        namespace = self.headers.get("X-Namespace", "")
        allowed = self.codec_server.namespaces
        if allowed is not None and namespace not in allowed:
            self._reply(
                HTTPStatus.FORBIDDEN,
                {"error": f"this codec server does not serve namespace {namespace!r}"},
            )
            return
        length = self._content_length()
        if length is None:
            return
        with self.codec_server.busy:  # at most MAX_BUSY bodies in memory at once
            payloads = self._read_payloads(length)
            if payloads is None:
                return
            try:
                out = transform(payloads.payloads)
            except EncryptionError as exc:
                self._reply(HTTPStatus.UNPROCESSABLE_ENTITY, {"error": str(exc)})
                return
            except Exception as exc:  # a malformed payload the codec cannot read: a reply,
                # not a handler thread dying with the browser left waiting
                self._reply(HTTPStatus.BAD_REQUEST, {"error": f"cannot {route[1:]}: {exc}"})
                return
            body = json_format.MessageToDict(Payloads(payloads=out))
            note = f"{route} {len(out)} payloads ns={namespace!r}"
            self._reply(HTTPStatus.OK, body, note=note)

    def _host_checked(self) -> bool:
        """A request without an Origin must name this server in its Host (else 4xx sent)."""
        host = self.headers.get("Host")
        if not host:
            self._reply(HTTPStatus.BAD_REQUEST, {"error": "send a Host header"})
            return False
        if self.codec_server.host_allowed(host):
            return True
        self._reply(
            HTTPStatus.FORBIDDEN,
            {
                "error": f"Host {host!r} does not name this codec server (a loopback address "
                f"with port {self.codec_server.port}); start it with --allowed-host "
                f"{host.strip()} if that is how it is reached"
            },
        )
        return False

    def _content_length(self) -> int | None:
        """The announced body size if it may be read, or None after replying 4xx (a body
        too big is refused here, before a byte of it is read)."""
        content_type = self.headers.get("Content-Type", "").split(";", 1)[0].strip().lower()
        if content_type != "application/json":
            self._reply(
                HTTPStatus.UNSUPPORTED_MEDIA_TYPE,
                {"error": "send Content-Type: application/json"},
            )
            return None
        try:
            length = int(self.headers.get("Content-Length", ""))
        except ValueError:
            self._reply(HTTPStatus.LENGTH_REQUIRED, {"error": "send Content-Length"})
            return None
        if length < 0 or length > MAX_BODY_BYTES:
            self._reply(
                HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
                {"error": f"the body is {length} bytes, at most {MAX_BODY_BYTES}"},
            )
            return None
        return length

    def _read_payloads(self, length: int) -> Payloads | None:
        """The request's Payloads, or None after replying 4xx with what is wrong."""
        raw = self.rfile.read(length)
        self._body_read = True
        expected = '{"payloads": [{"metadata": ..., "data": ...}]}'
        # Each payload is two objects and a few commas; base64 holds none of these bytes.
        # Counting them (fast, in C) bounds what json.loads builds before it runs.
        values = raw.count(b"{") + raw.count(b"[") + raw.count(b",")
        if values > MAX_VALUES:
            self._reply(
                HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
                {
                    "error": f"the body holds over {MAX_VALUES} values; at most {MAX_PAYLOADS} "
                    "payloads a request"
                },
            )
            return None
        try:
            document = json.loads(raw)
        except (ValueError, RecursionError) as exc:
            self._reply(HTTPStatus.BAD_REQUEST, {"error": f"expected {expected}: {exc}"})
            return None
        items = document.get("payloads") if isinstance(document, dict) else None
        if isinstance(items, list) and len(items) > MAX_PAYLOADS:
            self._reply(
                HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
                {"error": f"{len(items)} payloads in one request, at most {MAX_PAYLOADS}"},
            )
            return None
        try:
            return json_format.ParseDict(document, Payloads())
        except (json_format.ParseError, TypeError, ValueError) as exc:
            self._reply(HTTPStatus.BAD_REQUEST, {"error": f"expected {expected}: {exc}"})
            return None

    def _origin(self) -> str | None:
        """The request's Origin if it is an allowed UI origin."""
        origin = self.headers.get("Origin", "").rstrip("/")
        return origin if origin in self.codec_server.origins else None

    def _origin_refusal(self) -> str:
        origin = self.headers.get("Origin") or "(none)"
        allowed = ", ".join(sorted(self.codec_server.origins)) or "none"
        return (
            f"origin {origin} is not an allowed web UI origin (allowed: {allowed}); start the "
            "codec server with --ui-origin for it"
        )

    def _reply(self, status: HTTPStatus, body: dict[str, Any] | None, *, note: str = "") -> None:
        data = b"" if body is None else json.dumps(body).encode()
        if self.command == "POST" and not self._body_read:
            # The unread body would be taken for the next request on this connection.
            self.close_connection = True
        self.send_response(status)
        origin = self._origin()
        if origin is not None:
            self.send_header("Access-Control-Allow-Origin", origin)
            self.send_header("Access-Control-Allow-Methods", "POST, OPTIONS")
            self.send_header("Access-Control-Allow-Headers", ALLOWED_HEADERS)
            self.send_header("Access-Control-Allow-Credentials", "true")
            self.send_header("Access-Control-Max-Age", "600")
            self.send_header("Vary", "Origin")
        if body is not None:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if data:
            self.wfile.write(data)
        log = self.codec_server.log
        if log is not None:
            detail = note or (body or {}).get("error", "")
            log(f"{self.command} {self.path} -> {int(status)} {detail}".rstrip())

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: `_reply` logs one line per request through ``log`` instead."""
