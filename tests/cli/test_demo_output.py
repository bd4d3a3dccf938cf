"""The demo block of docs/getting-started.md is the demo's whole output (issue 46): a test
runs `client.py --demo` and compares, with only what changes from run to run (ports, ids,
step times) masked. And what `client.py` says when it is stopped before the answer."""

from __future__ import annotations

import asyncio
import re
import signal
import subprocess
import sys

from tests.support.helpers import ROOT

VARYING = [
    (re.compile(r"127\.0\.0\.1:\d+"), "127.0.0.1:PORT"),
    (re.compile(r"game-master-[0-9a-f]{8}"), "game-master-ID"),
    (re.compile(r"ok in [\d.]+ ms"), "ok in T ms"),
]


def masked(text: str) -> str:
    for pattern, replacement in VARYING:
        text = pattern.sub(replacement, text)
    return text


def readme_demo_block() -> str:
    readme = (ROOT / "docs" / "getting-started.md").read_text()
    intro = readme.index("This is its whole output")
    start = readme.index("```text\n", intro) + len("```text\n")
    return readme[start : readme.index("```\n", start)]


def test_the_readme_shows_the_demo_s_whole_output() -> None:
    demo = subprocess.run(
        [sys.executable, "client.py", "--demo"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert demo.returncode == 0, demo.stderr
    assert demo.stderr == ""
    assert masked(demo.stdout) == masked(readme_demo_block())


async def _started_on(address: str, task_queue: str) -> None:
    """The conversation the client started is on the server (visibility lags a little)."""
    from temporalio.client import Client

    client = await Client.connect(address)
    for _ in range(300):
        async for _ in client.list_workflows(f'TaskQueue="{task_queue}"'):
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"no conversation started on {task_queue}")


async def test_stopping_the_client_says_the_conversation_goes_on(
    temporal_target: str, task_queue: str
) -> None:
    """Ctrl-C left a conversation RUNNING on the server without a word (on an unserved
    queue, forever): the client now says what it left and how to end it."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "client.py",
        "morale",
        "--address",
        temporal_target,
        "--task-queue",
        task_queue,
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert proc.stderr is not None and proc.stdout is not None
        notice = (await asyncio.wait_for(proc.stderr.readline(), 60)).decode()
        assert "no worker polls task queue" in notice, notice
        prompt = (await asyncio.wait_for(proc.stdout.readline(), 60)).decode()
        assert prompt.startswith("> The mage hits the goblin again."), prompt  # by its name
        await _started_on(temporal_target, task_queue)
        proc.send_signal(signal.SIGINT)
        _, err = await asyncio.wait_for(proc.communicate(), 60)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 130
    said = err.decode()
    found = re.search(r"conversation (game-master-[0-9a-f]{8}) is still running", said)
    assert found, said
    assert (
        f"End it with: temporal workflow cancel -w {found.group(1)} --address {temporal_target}"
        in said
    )
