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
otherwise, and ``namespaces`` restricts which namespaces it answers for. Standard library
only (``http.server`` in a thread), so it needs nothing beyond durable-plan's own
dependencies.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Collection, Iterable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from google.protobuf import json_format
from temporalio.api.common.v1 import Payload, Payloads

from durable_plan.encryption import EncryptionCodec, EncryptionError, Keyring

__all__ = ["DEFAULT_PORT", "DEFAULT_UI_ORIGINS", "MAX_BODY_BYTES", "CodecServer"]

DEFAULT_PORT = 8081
DEFAULT_UI_ORIGINS = ("http://localhost:8233", "http://127.0.0.1:8233")
"""The dev server's web UI (``durable-plan dev``, ``temporal server start-dev``)."""
MAX_BODY_BYTES = 64 * 1024 * 1024
"""The UI sends a page of events at once; Temporal caps a payload at 2 MiB."""
READ_TIMEOUT_S = 30.0
"""A client that announces a body and then stalls is dropped after this long."""
ALLOWED_HEADERS = "content-type,x-namespace,authorization"

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
        log: Callable[[str], None] | None = None,
    ) -> None:
        """``origins``: the web UI origins (scheme://host:port) allowed to call it from a
        browser; ``namespaces``: the only namespaces it answers for (None: any);
        ``log``: called with one line per request (None: quiet)."""
        codec = keys if isinstance(keys, EncryptionCodec) else EncryptionCodec(keys)
        self.codec = codec
        self.origins = frozenset(origin.rstrip("/") for origin in origins)
        self.namespaces = None if namespaces is None else frozenset(namespaces)
        self.log = log
        self._httpd = ThreadingHTTPServer((host, port), self._handler_class())
        self._httpd.daemon_threads = True
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
        if self.headers.get("Origin") and self._origin() is None:
            self._reply(HTTPStatus.FORBIDDEN, {"error": self._origin_refusal()})
            return
        namespace = self.headers.get("X-Namespace", "")
        allowed = self.codec_server.namespaces
        if allowed is not None and namespace not in allowed:
            self._reply(
                HTTPStatus.FORBIDDEN,
                {"error": f"this codec server does not serve namespace {namespace!r}"},
            )
            return
        payloads = self._read_payloads()
        if payloads is None:
            return
        try:
            out = transform(payloads.payloads)
        except EncryptionError as exc:
            self._reply(HTTPStatus.UNPROCESSABLE_ENTITY, {"error": str(exc)})
            return
        except Exception as exc:  # a malformed payload the codec cannot read: a reply, not
            # a handler thread dying with the browser left waiting
            self._reply(HTTPStatus.BAD_REQUEST, {"error": f"cannot {route[1:]}: {exc}"})
            return
        body = json_format.MessageToDict(Payloads(payloads=out))
        self._reply(HTTPStatus.OK, body, note=f"{route} {len(out)} payloads ns={namespace!r}")

    def _read_payloads(self) -> Payloads | None:
        """The request's Payloads, or None after replying 4xx with what is wrong."""
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
        raw = self.rfile.read(length)
        self._body_read = True
        try:
            return json_format.Parse(raw, Payloads())
        except (json_format.ParseError, UnicodeDecodeError) as exc:
            self._reply(
                HTTPStatus.BAD_REQUEST,
                {"error": f'expected {{"payloads": [{{"metadata": ..., "data": ...}}]}}: {exc}'},
            )
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
