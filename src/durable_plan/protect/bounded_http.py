"""A threading HTTP server that serves a bounded number of connections at once.

Apart from the codec server (``codec_server.py``) because admission is its own concern:
one connection more than ``max_connections`` waits ``BUSY_WAIT_S`` for a free slot, then
gets 503 without its request being read, so a burst of clients cannot take every thread.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

BUSY_WAIT_S = 2.0
"""How long a connection past the limit waits for a free slot before its 503."""


class _BoundedHTTPServer(ThreadingHTTPServer):
    """A thread per connection, at most ``max_connections`` at once: one more waits
    ``BUSY_WAIT_S`` for a free slot, then gets 503 without its request being read."""

    daemon_threads = True

    def __init__(
        self,
        address: tuple[str, int],
        handler: type[BaseHTTPRequestHandler],
        max_connections: int,
    ) -> None:
        super().__init__(address, handler)
        self.slots = threading.BoundedSemaphore(max_connections)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self.slots.acquire(timeout=BUSY_WAIT_S):
            _refuse_busy(request)
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self.slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()


def _refuse_busy(request: Any) -> None:
    body = json.dumps({"error": "the codec server is busy; try again"}).encode()
    head = (
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nRetry-After: 1\r\nConnection: close\r\n\r\n"
    )
    try:
        request.settimeout(1.0)  # never let a client that does not read hold the server
        request.sendall(head.encode() + body)
    except OSError:
        pass
