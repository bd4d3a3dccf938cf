"""What leaves history with Temporal's External Storage, against our own claim check.

    python -m bench.external_storage

Three workloads (issue 27), each in three modes, each run in a fresh subprocess (its peak
RSS is that run's), against one dev server:

  (a) a conversation of 100 model calls whose context grows to ~150k tokens (99 tool
      results of 6 KiB; every model call carries the whole conversation)
  (b) an agent step of 16 rounds reading 64 KiB tool results (and of 32, the cap now)
  (c) a plan passing a 20 MiB result from one step to the next

Modes: ``claim-check`` (today: our result store for step results, no External Storage),
``external`` (External Storage, our result store off), ``both``. Printed: history bytes of
every workflow of the run (conversation or plan, and its children), stored bytes, peak RSS
of the process, wall time. Prints only; never asserts.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

WORKLOADS = ("a-conversation", "b-agent-step", "b-agent-step-32", "c-20mib-result")
MODES = ("claim-check", "external", "both")


async def one(target: str, workload: str, mode: str, store: str) -> dict[str, Any]:
    from temporalio.client import Client
    from temporalio.strands_agents import StrandsPlugin

    from bench._storage_workloads import (
        AGENT_PLAN,
        BLOB_PLAN,
        CONVERSATION_PROMPT,
        LONG_AGENT_PLAN,
        REGISTRY,
        SCRIPTS,
        StorageBenchConversation,
    )
    from durable_plan import plan_worker, start_plan
    from durable_plan.protect.payload_file_driver import FileStorageDriver
    from durable_plan.protect.payload_storage import PayloadStoragePlugin
    from durable_plan.protect.payload_storage import external_storage as storage_of
    from durable_plan.protect.result_store import FileResultStore
    from durable_plan.testing import ScriptedModel

    plugins: list[Any] = [
        StrandsPlugin(models={"scripted": lambda: ScriptedModel(scripts=SCRIPTS)})
    ]
    payloads = Path(store) / "payloads"
    if mode in ("external", "both"):
        plugins.append(PayloadStoragePlugin(storage_of(FileStorageDriver(payloads))))
    client = await Client.connect(target, plugins=plugins)
    queue = f"storage-{uuid.uuid4().hex[:8]}"
    results = FileResultStore(Path(store) / "results")
    plan_options: dict[str, Any] = {
        "store_results": mode != "external",
        "keep_stored_results": True,
    }
    if mode == "external":
        # Our guard refuses results over 256 KiB that would stay in history; with External
        # Storage only a reference stays, so the limit is raised (to what one step returns).
        plan_options["max_result_bytes"] = 24 * 1024 * 1024
    started = time.perf_counter()
    ids: list[str] = []
    status = "ok"
    async with plan_worker(
        client,
        task_queue=queue,
        registry=REGISTRY,
        workflows=[StorageBenchConversation],
        result_store=results,
        max_concurrent_activities=4,
    ):
        try:
            if workload == "a-conversation":
                wid = f"conv-{uuid.uuid4().hex[:8]}"
                await client.execute_workflow(
                    StorageBenchConversation.run, CONVERSATION_PROMPT, id=wid, task_queue=queue
                )
                ids.append(wid)
            else:
                plan = {
                    "b-agent-step": AGENT_PLAN,
                    "b-agent-step-32": LONG_AGENT_PLAN,
                }.get(workload, BLOB_PLAN)
                handle = await start_plan(
                    client,
                    plan,
                    task_queue=queue,
                    registry=REGISTRY,
                    model="scripted",
                    **plan_options,
                )
                ids.append(handle.id)
                if workload.startswith("b-agent-step"):
                    ids.append(f"{handle.id}/agent/count")
                result = await handle.result()
                if not result.ok:
                    status = "failed: " + "; ".join(str(o.error)[:120] for o in result.failures)
        except Exception as exc:  # a run that dies (history too large) is a result too
            from durable_plan.temporal.workflows.failures import root_message

            status = f"failed: {root_message(exc)[:200]}"
        wall = time.perf_counter() - started
        history = 0
        events = 0
        for wid in ids:
            try:
                h = await client.get_workflow_handle(wid).fetch_history()
            except Exception:
                continue
            history += sum(e.ByteSize() for e in h.events)
            events += len(h.events)
    stored = sum(p.stat().st_size for p in Path(store).rglob("*") if p.is_file())
    return {
        "workload": workload,
        "mode": mode,
        "status": status,
        "history_bytes": history,
        "events": events,
        "stored_bytes": stored,
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "wall_s": wall,
    }


def main_child(args: argparse.Namespace) -> None:
    row = asyncio.run(one(args.target, args.workload, args.mode, args.store))
    print(json.dumps(row))
    os._exit(0)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.external_storage", description=__doc__)
    parser.add_argument("--one", nargs=2, metavar=("WORKLOAD", "MODE"))
    parser.add_argument("--target")
    parser.add_argument("--store")
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    args = parser.parse_args(argv)
    if args.one:
        args.workload, args.mode = args.one
        main_child(args)
        return
    from bench._report import markdown_table
    from durable_plan.server.devserver import DevServer

    rows = []
    with DevServer(headless=True) as server:
        for workload in args.workloads.split(","):
            for mode in MODES:
                with tempfile.TemporaryDirectory() as store:
                    done = subprocess.run(
                        [
                            sys.executable,
                            "-m",
                            "bench.external_storage",
                            "--one",
                            workload,
                            mode,
                            "--target",
                            server.target,
                            "--store",
                            store,
                        ],
                        capture_output=True,
                        text=True,
                        timeout=900,
                        env={**os.environ, "DURABLE_PLAN_PAYLOAD_STORAGE": "off"},
                    )
                    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
                    if not lines:
                        print(f"{workload} {mode}: no result\n{done.stderr[-2000:]}")
                        continue
                    rows.append(json.loads(lines[-1]))
                    print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    print("## External Storage vs our claim check\n")
    print("`python -m bench.external_storage`\n")
    table = [
        [
            r["workload"],
            r["mode"],
            r["status"][:40],
            f"{r['history_bytes'] / 1024:,.0f}",
            r["events"],
            f"{r['stored_bytes'] / 1024:,.0f}",
            f"{r['peak_rss_mib']:.0f}",
            f"{r['wall_s']:.1f}",
        ]
        for r in rows
    ]
    print(
        markdown_table(
            [
                "workload",
                "mode",
                "status",
                "history KiB",
                "events",
                "stored KiB",
                "peak RSS MiB",
                "wall s",
            ],
            table,
        )
    )


if __name__ == "__main__":
    main()
