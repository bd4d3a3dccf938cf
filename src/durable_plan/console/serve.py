"""Running the console: a uvicorn server on the settings' address, until stopped.

``running_console`` serves in this process's event loop (the Temporal client's loop), so
tests and the bench drive the same app the command line serves.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import uvicorn
from temporalio.client import Client

from durable_plan.console.app import create_app
from durable_plan.console.settings import ConsoleSettings


def console_url(settings: ConsoleSettings, port: int | None = None) -> str:
    """The URL to open; with a token, the one that hands it to the browser once."""
    host = settings.host if ":" not in settings.host else f"[{settings.host}]"
    url = f"http://{host}:{port or settings.port}/"
    return url + (f"?token={settings.token}" if settings.token else "")


def server_for(client: Client, settings: ConsoleSettings) -> uvicorn.Server:
    config = uvicorn.Config(
        create_app(client, settings),
        host=settings.host,
        port=settings.port,
        log_level="warning",
        access_log=False,
        lifespan="off",
        # SSE streams stay open: stop waiting for them after a moment on shutdown.
        timeout_graceful_shutdown=1,
    )
    return uvicorn.Server(config)


@contextlib.asynccontextmanager
async def running_console(client: Client, settings: ConsoleSettings) -> AsyncIterator[int]:
    """Serve the console while the block runs; yields the port it listens on (``port=0``
    in the settings: a free one)."""
    server = server_for(client, settings)
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            task.result()  # raises why it did not start (the port is taken...)
            raise RuntimeError("the console server stopped before it started")
        await asyncio.sleep(0.02)
    port = int(server.servers[0].sockets[0].getsockname()[1])
    try:
        yield port
    finally:
        server.should_exit = True
        with contextlib.suppress(asyncio.CancelledError):
            await task
