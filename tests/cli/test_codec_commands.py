"""The encryption commands as a person runs them: ``keygen``, ``codec-server`` (a real HTTP
server in its own process, asked in the web UI's request shape) and ``dev
--ui-codec-endpoint`` (the UI's settings name the endpoint)."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from durable_plan.server.devserver import free_port

ROOT = Path(__file__).resolve().parents[2]
UI = "http://localhost:8233"


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "durable_plan", *args],
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
    )


@contextmanager
def _serving(args: list[str], env: dict[str, str], first_line: str) -> Iterator[str]:
    """Start a long-running command, wait for its announcement, stop it with SIGTERM."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "durable_plan", *args],
        cwd=ROOT,
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith(first_line), line + (proc.stderr.read() if proc.stderr else "")
        yield line
    finally:
        proc.terminate()
        assert proc.wait(timeout=30) == 0, "SIGTERM stops it cleanly"


def _post(url: str, body: dict[str, object]) -> tuple[int, dict[str, object]]:
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "X-Namespace": "default", "Origin": UI},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        return answer.status, json.loads(answer.read())


def test_keygen_prints_a_key_and_rotates() -> None:
    first = _cli("keygen", "--id", "k1")
    assert first.returncode == 0, first.stderr
    key_id, _, key = first.stdout.strip().partition(":")
    assert key_id == "k1" and len(base64.b64decode(key)) == 32
    rotated = _cli("keygen", "--id", "k2", "--rotate", env={"DURABLE_PLAN_KEYS": first.stdout})
    assert rotated.returncode == 0, rotated.stderr
    assert rotated.stdout.startswith(first.stdout.strip()) and "k2:" in rotated.stdout


def test_codec_server_command_encodes_and_decodes_for_the_ui() -> None:
    keys = _cli("keygen", "--id", "k1").stdout.strip()
    port = free_port()
    with _serving(
        ["codec-server", "--port", str(port)], {"DURABLE_PLAN_KEYS": keys}, "codec server:"
    ):
        plain = {
            "metadata": {"encoding": base64.b64encode(b"json/plain").decode()},
            "data": base64.b64encode(b'{"secret": "under the mill"}').decode(),
        }
        status, sealed = _post(f"http://127.0.0.1:{port}/encode", {"payloads": [plain]})
        assert status == 200
        (payload,) = sealed["payloads"]
        assert b"under the mill" not in base64.b64decode(payload["data"])
        status, opened = _post(f"http://127.0.0.1:{port}/decode", {"payloads": [payload]})
        assert status == 200 and opened["payloads"] == [plain]


def test_codec_server_without_keys_is_one_line() -> None:
    env = {k: v for k, v in os.environ.items() if k != "DURABLE_PLAN_KEYS"}
    done = subprocess.run(
        [sys.executable, "-m", "durable_plan", "codec-server", "--port", str(free_port())],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "DURABLE_PLAN_KEYS" in done.stderr and "Traceback" not in done.stderr


def test_dev_server_tells_the_ui_where_the_codec_server_is() -> None:
    port, ui_port = free_port(), free_port()
    endpoint = "http://127.0.0.1:8081"
    args = ["dev", "--port", str(port), "--ui-port", str(ui_port), "--ui-codec-endpoint", endpoint]
    with _serving(args, {}, "Temporal dev server:"):
        deadline = time.monotonic() + 30
        while True:
            try:
                url = f"http://127.0.0.1:{ui_port}/api/v1/settings"
                with urllib.request.urlopen(url, timeout=5) as answer:
                    settings = json.loads(answer.read())
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.3)
    assert settings["Codec"]["Endpoint"] == endpoint
