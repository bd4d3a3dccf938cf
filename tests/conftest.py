"""One real Temporal dev server per test session, on a free port (never 7233)."""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncIterator, Iterator

import pytest
from temporalio.client import Client

from durable_plan.devserver import DevServer, DevServerNotFound


def _unique(request: pytest.FixtureRequest, prefix: str) -> str:
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", request.node.name)[:60]
    return f"{prefix}-{name}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="session")
def dev_server() -> Iterator[DevServer]:
    try:
        server = DevServer(headless=True)
    except DevServerNotFound as err:
        pytest.fail(str(err), pytrace=False)
    with server:
        yield server


@pytest.fixture(scope="session")
def temporal_target(dev_server: DevServer) -> str:
    return dev_server.target


@pytest.fixture(scope="session")
async def client(dev_server: DevServer) -> AsyncIterator[Client]:
    yield await dev_server.connect()


@pytest.fixture
def task_queue(request: pytest.FixtureRequest) -> str:
    return _unique(request, "tq")


@pytest.fixture
def workflow_id(request: pytest.FixtureRequest) -> str:
    return _unique(request, "wf")
