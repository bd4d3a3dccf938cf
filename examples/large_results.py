"""A plan passes a 20 MiB document from one step to the next; history holds a reference.

.venv/bin/durable-plan dev                      # terminal 1 (or TEMPORAL_ADDRESS=host:port)
.venv/bin/python examples/large_results.py
"""

import tempfile
from typing import Any

from durable_plan import FileResultStore, ToolRegistry, connect, plan_worker, run_script, start_plan


async def fetch_report(pages: int) -> dict[str, Any]:
    """Fetch a long report: {"title", "pages": [str]} (here made up, 10 KiB a page)."""
    return {"title": "annual report", "pages": [f"page {n} " + "x" * 10_233 for n in range(pages)]}


async def count_pages(report: dict[str, Any]) -> dict[str, Any]:
    """Count a report's pages and characters; takes the whole report."""
    return {"pages": len(report["pages"]), "chars": sum(len(p) for p in report["pages"])}


TOOLS = ToolRegistry()
TOOLS.add(fetch_report, timeout_s=60)
TOOLS.add(count_pages, timeout_s=60)

PLAN = {
    "steps": [
        {"id": "report", "tool": "fetch_report", "args": {"pages": 2048}},
        # The whole result, bound as it is: the step's activity reads it from the store.
        {"id": "count", "tool": "count_pages", "bind": {"report": "steps.report"}},
    ]
}


async def main() -> None:
    client = await connect()
    # Where results too large for history go: a directory here ($DURABLE_PLAN_STORE by
    # default), S3ResultStore(bucket, prefix) when workers run on several machines.
    store = FileResultStore(tempfile.mkdtemp(prefix="durable-plan-results-"))
    async with plan_worker(client, task_queue="large", registry=TOOLS, result_store=store):
        handle = await start_plan(client, PLAN, task_queue="large", registry=TOOLS)
        result = await handle.result()
    print("count:", result.returned["count"])
    report = result.returned["report"]  # too large for the model: size and a preview
    print("report:", report["bytes"], "bytes, preview", repr(report["preview"][:40]))
    history = await handle.handle.fetch_history()
    print("history:", sum(event.ByteSize() for event in history.events), "bytes")
    print("left in the store:", [p.name for p in store.root.rglob("*") if p.is_file()])


if __name__ == "__main__":
    run_script(main())
