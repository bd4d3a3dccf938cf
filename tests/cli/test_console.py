"""The plan console (`durable-plan ui`): a real dev server, a real worker, the console
served in this event loop, and a real headless Chromium (the system one, driven by
Playwright) reading it."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from temporalio.client import Client

from durable_plan import plan_worker, start_plan
from durable_plan.console.serve import running_console
from durable_plan.console.settings import ConsoleSettings
from durable_plan.tools.registry import ToolRegistry

CHROMIUM = "/usr/bin/chromium"
needs_chromium = pytest.mark.skipif(
    not os.path.exists(CHROMIUM),
    reason=f"browser tests drive the system Chromium at {CHROMIUM} (apt-get install chromium; "
    ".ci/run installs it); it is not installed here",
)

FINISHED: dict[str, float] = {}


async def work(name: str, seconds: float = 0.0) -> dict[str, Any]:
    """A step that takes ``seconds`` and notes when it returned (the bench's clock too)."""
    await asyncio.sleep(seconds)
    FINISHED[name] = time.time()
    return {"name": name}


async def explode(why: str) -> None:
    raise ValueError(why)


async def wipe(path: str) -> dict[str, str]:
    return {"wiped": path}


def registry() -> ToolRegistry:
    tools = ToolRegistry()
    tools.add(work)
    tools.add(explode, retries=0)
    tools.add(wipe, requires_approval=True)
    return tools


REGISTRY = registry()


@pytest.fixture
async def console(client: Client) -> AsyncIterator[str]:
    settings = ConsoleSettings(port=0, address="dev server")
    async with running_console(client, settings) as port:
        yield f"http://127.0.0.1:{port}"


@pytest.fixture
async def page() -> AsyncIterator[Any]:
    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            yield await browser.new_page(viewport={"width": 1400, "height": 800})
        finally:
            await browser.close()


def chain(n: int, seconds: float) -> dict[str, Any]:
    steps: list[dict[str, Any]] = [{"id": "s1", "tool": "work", "args": {"name": "s1"}}]
    for i in range(2, n + 1):
        steps.append(
            {
                "id": f"s{i}",
                "tool": "work",
                "args": {"seconds": seconds},
                "bind": {"name": f"$string('s{i}') & $substring(steps.s{i - 1}.name, 99)"},
            }
        )
    steps[0]["args"]["seconds"] = seconds
    return {"steps": steps}


def url(base: str, workflow_id: str) -> str:
    return f"{base}/#/w/{quote(workflow_id, safe='')}"


async def phase(page: Any, step: str) -> str:
    return str(
        await page.get_attribute(f'#graph .node[data-step="{step}"]', "data-phase", timeout=5000)
    )


@needs_chromium
async def test_nodes_turn_ok_in_order_without_a_reload(
    client: Client, task_queue: str, console: str, page: Any
) -> None:
    async with plan_worker(client, task_queue=task_queue, registry=REGISTRY):
        # Held at s1 until the page is drawn (a breakpoint), so a slow page load under a
        # loaded machine cannot miss the first steps (the test raced the page before).
        handle = await start_plan(
            client, chain(4, 0.4), task_queue=task_queue, registry=REGISTRY, breakpoints=["s1"]
        )
        await page.goto(url(console, handle.id))
        await page.wait_for_selector('#graph .node[data-step="s4"]')
        await page.evaluate("window.__sameDocument = true")
        for _ in range(200):  # the pause has reached the page
            if await phase(page, "s1") == "paused":
                break
            await asyncio.sleep(0.05)
        drawn = [await phase(page, f"s{i}") for i in range(1, 5)]
        assert drawn == ["paused", "pending", "pending", "pending"], drawn
        await handle.continue_("s1")
        seen: list[list[str]] = [drawn]
        for _ in range(200):
            phases = [await phase(page, f"s{i}") for i in range(1, 5)]
            if seen[-1] != phases:
                seen.append(phases)
            if phases == ["ok"] * 4:
                break
            await asyncio.sleep(0.05)
        await handle.result()
    assert seen[-1] == ["ok"] * 4, seen
    # The page saw each step turn ok after the one before, and none out of order.
    for phases in seen:
        oks = [p == "ok" for p in phases]
        assert oks == sorted(oks, reverse=True), f"a step ok before the one it reads: {seen}"
    changed = await page.evaluate("window.__console.colourChanged")
    times = [changed[f"s{i}"]["at"] for i in range(1, 5)]
    assert times == sorted(times)
    assert await page.evaluate("window.__sameDocument === true"), "the page was reloaded"


@needs_chromium
async def test_an_approval_clicked_in_the_page_lets_the_plan_finish(
    client: Client, task_queue: str, console: str, page: Any
) -> None:
    plan = {
        "steps": [
            {"id": "look", "tool": "work", "args": {"name": "look"}},
            {"id": "rm", "tool": "wipe", "bind": {"path": "'/tmp/' & steps.look.name"}},
        ]
    }
    async with plan_worker(client, task_queue=task_queue, registry=REGISTRY):
        handle = await start_plan(client, plan, task_queue=task_queue, registry=REGISTRY)
        await page.goto(url(console, handle.id))
        node = page.locator('#graph .node[data-step="rm"][data-phase="awaiting_approval"]')
        await node.wait_for(timeout=15000)
        await node.click()
        await page.locator("#approval").wait_for(state="visible")
        assert (await page.text_content("#approval-digest") or "").strip()
        assert "/tmp/look" in (await page.text_content("#approval-args") or "")
        await page.click("#approve")
        result = await asyncio.wait_for(handle.result(), 20)
        await page.locator('#graph .node[data-step="rm"][data-phase="ok"]').wait_for()
    assert result.returned["rm"] == {"wiped": "/tmp/look"}
    assert "approved" in (await page.text_content("#action-said") or "")


@needs_chromium
async def test_a_breakpoint_continued_in_the_page_lets_the_plan_finish(
    client: Client, task_queue: str, console: str, page: Any
) -> None:
    plan = {
        "steps": [
            {"id": "look", "tool": "work", "args": {"name": "look"}},
            {
                "id": "fan",
                "tool": "map",
                "args": {"over": ["a", "b"], "do": {"tool": "work", "bind": {"name": "item"}}},
            },
        ]
    }
    async with plan_worker(client, task_queue=task_queue, registry=REGISTRY):
        handle = await start_plan(
            client, plan, task_queue=task_queue, registry=REGISTRY, breakpoints=["fan/do.1"]
        )
        await page.goto(url(console, handle.id))
        node = page.locator('#graph .node[data-step="fan"][data-phase="paused"]')
        await node.wait_for(timeout=15000)
        await node.click()
        await page.locator("#breakpoint").wait_for(state="visible")
        assert (await page.text_content("#breakpoint-path") or "").strip() == "fan/do.1"
        await page.click('#breakpoint button[data-action="continue"]')
        result = await asyncio.wait_for(handle.result(), 20)
        await page.locator('#graph .node[data-step="fan"][data-phase="ok"]').wait_for()
    assert result.returned["fan"]["results"] == [{"name": "a"}, {"name": "b"}]
    assert "fan/do.1: continue" in (await page.text_content("#action-said") or "")


@needs_chromium
async def test_a_failed_steps_error_is_in_its_node(
    client: Client, task_queue: str, console: str, page: Any
) -> None:
    plan = {"steps": [{"id": "boom", "tool": "explode", "args": {"why": "disk on fire"}}]}
    async with plan_worker(client, task_queue=task_queue, registry=REGISTRY):
        handle = await start_plan(client, plan, task_queue=task_queue, registry=REGISTRY)
        result = await handle.result()
    assert not result.ok
    await page.goto(url(console, handle.id))  # ended: the same view, from history
    node = page.locator('#graph .node[data-step="boom"][data-phase="failed"]')
    await node.wait_for()
    assert "disk on fire" in (await node.text_content() or "")
    await node.click()
    await page.locator("#details .f-error").wait_for()
    assert "disk on fire" in (await page.text_content("#details .f-error") or "")
    # The call's arguments come from the history.
    await page.locator("#calls pre").first.wait_for()
    assert "disk on fire" in (await page.text_content("#calls") or "")


@needs_chromium
async def test_the_list_shows_a_plan_with_its_steps(
    client: Client, task_queue: str, console: str, page: Any
) -> None:
    async with plan_worker(client, task_queue=task_queue, registry=REGISTRY):
        handle = await start_plan(client, chain(2, 0), task_queue=task_queue, registry=REGISTRY)
        await handle.result()
    await page.goto(console + "/")
    await page.fill("#search", handle.id)
    row = page.locator(f'tr.row[data-id="{handle.id}"]')
    await row.wait_for(timeout=15000)  # visibility is eventually consistent
    assert "2/2" in (await row.text_content() or "")
    await row.click()
    await page.locator('#graph .node[data-step="s2"][data-phase="ok"]').wait_for()


# --- the guard: plain HTTP (no browser needed) -------------------------------------------------


async def test_off_loopback_every_request_needs_the_token(client: Client) -> None:
    settings = ConsoleSettings.for_host("0.0.0.0", 0, address="dev server")
    assert settings.token, "a host other than loopback gets a token"
    async with running_console(client, settings) as port:
        base = f"http://127.0.0.1:{port}"
        async with httpx.AsyncClient(base_url=base) as http:
            assert (await http.get("/api/plans")).status_code == 401
            assert (await http.get("/")).status_code == 401
            wrong = {"authorization": "Bearer nope"}
            assert (await http.get("/", headers=wrong)).status_code == 401
            bearer = {"authorization": f"Bearer {settings.token}"}
            answer = await http.get("/api/info", headers=bearer)
            assert answer.status_code == 200
            assert answer.headers["cache-control"] == "no-store"
            # The printed URL hands the token over once, as an HttpOnly cookie.
            first = await http.get(f"/?token={settings.token}")
            assert first.status_code == 303 and first.headers["location"] == "/"
            assert "HttpOnly" in first.headers["set-cookie"]
            assert (await http.get("/api/info")).status_code == 200  # the cookie now
            http.cookies.clear()
            # An action: the token, and the page's own origin, and JSON.
            action = "/api/plans/nope/cancel"
            json_type = {"content-type": "application/json"}
            cross = {**bearer, **json_type, "origin": "http://evil.example"}
            assert (await http.post(action, headers=cross, content="{}")).status_code == 403
            no_origin = {**bearer, **json_type}
            assert (await http.post(action, headers=no_origin, content="{}")).status_code == 403
            same = {**bearer, **json_type, "origin": base}
            assert (await http.post(action, headers=same, content="{}")).status_code == 404


async def test_on_loopback_actions_need_the_same_origin_and_the_host_is_checked(
    client: Client,
) -> None:
    async with running_console(client, ConsoleSettings(port=0)) as port:
        base = f"http://127.0.0.1:{port}"
        async with httpx.AsyncClient(base_url=base) as http:
            assert (await http.get("/api/info")).status_code == 200
            rebound = await http.get("/api/info", headers={"host": "evil.example"})
            assert rebound.status_code == 421  # a name that resolves to us: DNS rebinding
            json_type = {"content-type": "application/json"}
            bad = await http.post(
                "/api/plans/x/cancel", headers={**json_type, "origin": "http://evil.example"}
            )
            assert bad.status_code == 403
            form = await http.post(
                "/api/plans/x/cancel",
                headers={"content-type": "text/plain", "origin": base},
                content="{}",
            )
            assert form.status_code == 415
            # A breakpoint's answer: a workflow that does not exist is a 404, a bad action 400.
            paused = await http.post(
                "/api/plans/x/steps/s/breakpoint",
                headers={**json_type, "origin": base},
                content='{"action": "continue"}',
            )
            assert paused.status_code == 404 and "no workflow 'x'" in paused.json()["error"]
            bad_action = await http.post(
                "/api/plans/x/steps/s/breakpoint",
                headers={**json_type, "origin": base},
                content='{"action": "jump"}',
            )
            assert bad_action.status_code == 400
