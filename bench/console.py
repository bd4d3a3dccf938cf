"""The plan console's speed, in a real headless Chromium (the system one) on a dev server.

python -m bench.console [--steps 30 --step-s 0.3 --big 300] [--screenshots docs/images]

- Live: a chain of ``--steps`` steps, each ``--step-s`` long; for each step, the time from
  the tool returning (its worker's clock) to its node changing colour in the page (the
  page's clock, the same machine): median and p90.
- Load: a finished plan of ``--big`` steps (levels of ten): from the navigation to every
  node drawn in its final colour.
- ``--screenshots DIR``: writes console-finished.png (a finished plan with a failed step,
  its details open) and console-running.png (a plan running, one step awaiting approval).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

from bench._report import command_line
from durable_plan import plan_worker, start_plan
from durable_plan.console.serve import running_console
from durable_plan.console.settings import ConsoleSettings
from durable_plan.server.connection import exit_now
from durable_plan.server.devserver import DevServer
from tests.cli.test_console import CHROMIUM, FINISHED, REGISTRY, chain


def wide(steps: int, width: int = 10) -> dict[str, Any]:
    """``steps`` steps in levels of ``width``, each reading one step of the level before."""
    plan = []
    for i in range(steps):
        step: dict[str, Any] = {"id": f"n{i:03d}", "tool": "work"}
        if i < width:
            step["args"] = {"name": step["id"]}
        else:
            step["bind"] = {"name": f"steps.n{i - width:03d}.name & '+'"}
        plan.append(step)
    return {"steps": plan, "returns": []}


def showcase() -> dict[str, Any]:
    """A plan that reads well in a picture: a fan-out, a join, a condition, a failure."""
    return {
        "steps": [
            {"id": "fetch_orders", "tool": "work", "args": {"name": "orders", "seconds": 0.2}},
            {"id": "fetch_refunds", "tool": "work", "args": {"name": "refunds", "seconds": 0.3}},
            {"id": "fetch_rates", "tool": "work", "args": {"name": "rates", "seconds": 0.1}},
            {
                "id": "reconcile",
                "tool": "work",
                "bind": {"name": "steps.fetch_orders.name & '/' & steps.fetch_refunds.name"},
            },
            {
                "id": "convert",
                "tool": "work",
                "bind": {"name": "steps.reconcile.name & '@' & steps.fetch_rates.name"},
            },
            {
                "id": "publish",
                "tool": "explode",
                "bind": {"why": "'ledger service answered 503 for ' & steps.convert.name"},
            },
            {
                "id": "notify",
                "tool": "work",
                "when": "steps.reconcile.name = 'none'",
                "bind": {"name": "steps.reconcile.name"},
            },
        ],
        "on_error": "continue",
    }


def gated() -> dict[str, Any]:
    return {
        "steps": [
            {"id": "list_old_files", "tool": "work", "args": {"name": "old", "seconds": 0.1}},
            {"id": "size_report", "tool": "work", "args": {"name": "sizes", "seconds": 0.1}},
            {"id": "wipe_old_files", "tool": "wipe", "bind": {"path": "steps.list_old_files.name"}},
            {"id": "archive_index", "tool": "work", "bind": {"name": "steps.size_report.name"}},
            {"id": "summary", "tool": "work", "bind": {"name": "steps.archive_index.name"}},
        ]
    }


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def main(args: argparse.Namespace) -> None:
    from playwright.async_api import async_playwright

    with DevServer(headless=True) as server:  # the tuned defaults (`durable-plan dev`)
        client = await server.connect()
        queue = "bench-console"
        async with (
            plan_worker(client, task_queue=queue, registry=REGISTRY),
            running_console(client, ConsoleSettings(port=0, address=server.target)) as port,
            async_playwright() as pw,
        ):
            base = f"http://127.0.0.1:{port}"
            browser = await pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            # bypass_csp: Playwright's wait_for_function evaluates its text in the page, which
            # the console's policy (script-src 'self') forbids; the page itself is the same.
            page = await browser.new_page(viewport={"width": 1500, "height": 820}, bypass_csp=True)

            def at(workflow_id: str) -> str:
                return f"{base}/#/w/{quote(workflow_id, safe='')}"

            # Live: colour change after each step's finish.
            plan = chain(args.steps, args.step_s)
            handle = await start_plan(client, plan, task_queue=queue, registry=REGISTRY)
            await page.goto(at(handle.id))
            await handle.result()
            await page.wait_for_function(
                f"Object.values(window.__console.colourChanged).filter(c => c.phase === 'ok')"
                f".length >= {args.steps}",
                timeout=30000,
            )
            changed = await page.evaluate("window.__console.colourChanged")
            lags = [
                changed[f"s{i}"]["at"] / 1000 - FINISHED[f"s{i}"] for i in range(1, args.steps + 1)
            ]
            print(f"live: {args.steps}-step chain, {args.step_s} s a step")
            print(
                f"  step finished -> node ok: median {statistics.median(lags) * 1000:.0f} ms, "
                f"p90 {quantile(lags, 0.9) * 1000:.0f} ms, max {max(lags) * 1000:.0f} ms"
            )

            # Load: a finished plan of many steps.
            big = await start_plan(
                client, wide(args.big), task_queue=queue, registry=REGISTRY, max_steps=args.big
            )
            await big.result()
            loads = []
            for _ in range(args.repeat):
                await page.goto("about:blank")
                started = time.perf_counter()
                await page.goto(at(big.id))
                await page.wait_for_function(
                    f"document.querySelectorAll('#graph .node[data-phase=\"ok\"]').length"
                    f" === {args.big}",
                    timeout=60000,
                )
                loads.append(time.perf_counter() - started)
            print(f"load: a finished {args.big}-step plan, navigation to every node drawn")
            print(
                f"  median {statistics.median(loads) * 1000:.0f} ms over {len(loads)} loads "
                f"(min {min(loads) * 1000:.0f}, max {max(loads) * 1000:.0f})"
            )
            if args.screenshots:
                await screenshots(client, page, at, queue, Path(args.screenshots))
            await browser.close()
    print(f"\n{command_line('bench.console')}")


async def screenshots(client: Any, page: Any, at: Any, queue: str, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    await page.set_viewport_size({"width": 1900, "height": 760})  # the graph beside the details
    done = await start_plan(client, showcase(), task_queue=queue, registry=REGISTRY)
    await done.result()
    await page.goto(at(done.id))
    await page.locator('#graph .node[data-step="publish"][data-phase="failed"]').wait_for()
    await page.locator('#graph .node[data-step="publish"]').click()
    await page.locator("#calls pre").first.wait_for()
    await page.screenshot(path=str(out / "console-finished.png"))
    running = await start_plan(client, gated(), task_queue=queue, registry=REGISTRY)
    await page.goto(at(running.id))
    node = page.locator('#graph .node[data-step="wipe_old_files"][data-phase="awaiting_approval"]')
    await node.wait_for(timeout=20000)
    await page.locator('#graph .node[data-step="summary"][data-phase="ok"]').wait_for()
    await node.click()
    await page.locator("#approval").wait_for(state="visible")
    await page.wait_for_timeout(300)
    await page.screenshot(path=str(out / "console-running.png"))
    await running.decide("wipe_old_files", False, "not today")
    print(f"screenshots: {out / 'console-finished.png'}, {out / 'console-running.png'}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--step-s", type=float, default=0.3)
    parser.add_argument("--big", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--screenshots", metavar="DIR")
    if not os.path.exists(CHROMIUM):
        raise SystemExit(f"bench.console drives the system Chromium at {CHROMIUM}: not installed")
    asyncio.run(main(parser.parse_args()))
    exit_now(0)
