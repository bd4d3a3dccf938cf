"""``run_until_signalled`` (every command and script): SIGTERM and SIGHUP cancel the main
coroutine, a signal ignored on purpose (``nohup``) stays ignored, and the caller's own
handlers are back afterwards (review of issue 46, item 7)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from durable_plan.server.connection import Terminated, run_until_signalled


def test_the_callers_handlers_are_back_afterwards() -> None:
    def mine(signum: int, frame: object) -> None:
        return None

    before = signal.signal(signal.SIGHUP, mine)
    try:

        async def main() -> int:
            return 7

        assert run_until_signalled(main()) == 7
        assert signal.getsignal(signal.SIGHUP) is mine
    finally:
        signal.signal(signal.SIGHUP, before)


def test_sigterm_cancels_the_main_coroutine() -> None:
    async def main() -> None:
        os.kill(os.getpid(), signal.SIGTERM)
        await asyncio.sleep(30)

    with pytest.raises(Terminated) as info:
        run_until_signalled(main())
    assert info.value.status == 128 + signal.SIGTERM


def test_a_hangup_ignored_with_nohup_stays_ignored() -> None:
    """`nohup durable-plan worker &` must outlive its terminal."""
    script = textwrap.dedent(
        """
        import asyncio, os, signal
        from durable_plan.server.connection import run_until_signalled
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        async def main():
            os.kill(os.getpid(), signal.SIGHUP)
            await asyncio.sleep(0.2)
            return 0
        print(run_until_signalled(main()))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "0"
