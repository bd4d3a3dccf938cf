"""What one request may cost the codec server, and whom it answers, over real HTTP.

It accepted 64 MiB bodies (42 MiB took 11.5 s and 575 MiB of memory), started a thread per
connection without a bound, and decoded requests with any ``Host`` when no ``Origin`` was
sent, so only browsers stood between it and a DNS-rebinding page. Now: a body over
``MAX_BODY_BYTES`` or holding more than ``MAX_PAYLOADS`` payloads gets 413 (a too-long one
before a byte of it is read), connections past ``max_connections`` get 503, and a request
without an Origin must name the server in its Host.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from durable_plan.protect.codec_server import (
    MAX_BODY_BYTES,
    MAX_PAYLOADS,
    CodecServer,
)
from durable_plan.protect.encryption import Keyring, new_key

ROOT = Path(__file__).resolve().parents[3]
UI = "http://localhost:8233"
PLAIN = {
    "metadata": {"encoding": base64.b64encode(b"json/plain").decode()},
    "data": base64.b64encode(b'{"secret": "under the mill"}').decode(),
}


@pytest.fixture
def server() -> Iterator[CodecServer]:
    with CodecServer(Keyring((new_key("k1"),)), port=0, allowed_hosts=["codec.example"]) as s:
        yield s


def request(
    server: CodecServer,
    body: bytes,
    headers: dict[str, str],
    *,
    path: str = "/encode",
) -> tuple[int, dict[str, Any]]:
    """POST with exactly these headers (http.client adds no Host of its own here)."""
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        connection.putrequest("POST", path, skip_host=True, skip_accept_encoding=True)
        for name, value in {
            "Content-Type": "application/json",
            "Content-Length": str(len(body)),
            **headers,
        }.items():
            connection.putheader(name, value)
        connection.endheaders(body)
        response = connection.getresponse()
        data = response.read()
        return response.status, json.loads(data) if data else {}
    finally:
        connection.close()


def payloads(n: int) -> bytes:
    return json.dumps({"payloads": [PLAIN] * n}).encode()


def test_a_body_over_the_cap_is_refused_before_it_is_read(server: CodecServer) -> None:
    """Only the headers are sent: the 413 comes without the server waiting for the body."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        sock.sendall(
            (
                "POST /decode HTTP/1.1\r\n"
                f"Host: 127.0.0.1:{server.port}\r\n"
                "Content-Type: application/json\r\n"
                f"Content-Length: {MAX_BODY_BYTES + 1}\r\n\r\n"
            ).encode()
        )
        answer = b""
        while chunk := sock.recv(65536):  # the server closes the connection after its reply
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413 ")
    assert json.loads(body) == {
        "error": f"the body is {MAX_BODY_BYTES + 1} bytes, at most {MAX_BODY_BYTES}"
    }


def test_too_many_payloads_in_one_request_are_refused(server: CodecServer) -> None:
    host = {"Host": f"127.0.0.1:{server.port}"}
    status, answer = request(server, payloads(MAX_PAYLOADS), host)
    assert status == 200 and len(answer["payloads"]) == MAX_PAYLOADS
    status, answer = request(server, payloads(MAX_PAYLOADS + 1), host)
    assert status == 413
    assert answer == {
        "error": f"{MAX_PAYLOADS + 1} payloads in one request, at most {MAX_PAYLOADS}"
    }
    # Tiny values by the hundred thousand fit in 8 MiB: refused before json.loads builds them.
    swarm = b'{"payloads": [' + b",".join([b"[]"] * 200_000) + b"]}"
    assert len(swarm) < MAX_BODY_BYTES
    status, answer = request(server, swarm, host)
    assert status == 413 and "values" in answer["error"]


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        ("127.0.0.1:{port}", 200),
        ("localhost:{port}", 200),
        ("[::1]:{port}", 200),
        ("codec.example", 200),  # allowed_hosts: by name, on any port
        ("codec.example:443", 200),
        ("evil.example:{port}", 403),  # a DNS-rebinding page names its own host
        ("localhost:1", 403),  # another port: not this server
        ("localhost", 403),  # port 80
        ("127.0.0.1:{port}:9", 403),
    ],
)
def test_without_an_origin_the_host_must_name_this_server(
    server: CodecServer, host: str, expected: int
) -> None:
    status, answer = request(server, payloads(1), {"Host": host.format(port=server.port)})
    assert status == expected, answer
    if expected == 403:
        assert answer["error"].startswith(f"Host {host.format(port=server.port)!r} does not name")
        assert "--allowed-host" in answer["error"]


def test_a_request_without_host_or_origin_is_refused(server: CodecServer) -> None:
    status, answer = request(server, payloads(1), {})
    assert (status, answer) == (400, {"error": "send a Host header"})


def test_an_allowed_origin_is_answered_whatever_the_host(server: CodecServer) -> None:
    """The browser's Origin cannot be forged by a page; the Host check is for requests
    without one (a UI behind a proxy may reach the server by any name)."""
    status, _ = request(server, payloads(1), {"Host": "proxy.internal:80", "Origin": UI})
    assert status == 200
    status, answer = request(
        server, payloads(1), {"Host": f"127.0.0.1:{server.port}", "Origin": "http://evil.example"}
    )
    assert status == 403 and "is not an allowed web UI origin" in answer["error"]


def test_connections_past_the_bound_get_503_and_the_server_recovers() -> None:
    with (
        CodecServer(Keyring((new_key("k1"),)), port=0, max_connections=2) as server,
        ExitStack() as idle,
    ):
        # Two connections that send nothing hold both slots (each waits for its request).
        for _ in range(2):
            idle.enter_context(socket.create_connection(("127.0.0.1", server.port), timeout=30))
        host = {"Host": f"127.0.0.1:{server.port}"}
        status, answer = request(server, payloads(1), host)
        assert (status, answer) == (503, {"error": "the codec server is busy; try again"})
        idle.close()  # the handlers see EOF and give their slots back
        status, _ = request(server, payloads(1), host)  # waits for a slot, then is served
        assert status == 200


def test_the_command_takes_allowed_hosts() -> None:
    keys = f"k1:{base64.b64encode(new_key('k1')[1]).decode()}"
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "durable_plan",
            "codec-server",
            "--port",
            str(port),
            "--allowed-host",
            "codec.example",
        ],
        cwd=ROOT,
        env={**os.environ, "DURABLE_PLAN_KEYS": keys},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith("codec server: ")
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        for host, expected in (("codec.example:8081", 200), ("other.example:8081", 403)):
            body = payloads(1)
            connection.request(
                "POST",
                "/encode",
                body,
                {"Host": host, "Content-Type": "application/json"},
            )
            response = connection.getresponse()
            response.read()
            assert response.status == expected, host
        connection.close()
    finally:
        proc.terminate()
        assert proc.wait(timeout=30) == 0
