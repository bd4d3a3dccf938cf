"""Record this version's corpus of workflow histories: every kind of step and ending.

    python -m scripts.record_histories                 # into tests/histories/<version>/
    python -m scripts.record_histories --out DIR

A published release adds its corpus in one command, and every later release replays all of
them (``tests/durable/replay/test_history_corpus.py``, ``durable-plan replay``); until the first,
the tests
record this version's corpus with it in another process and replay that
(``tests/corpus/recorded.py``). The script starts its own dev server, a worker (and, for
the kill, worker subprocesses of its own), the scripted model and the test MCP server; the
user's side of every history is ``tests/corpus/workflows.py`` (frozen once a release's
corpus depends on it).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from temporalio.client import Client  # noqa: E402
from temporalio.strands_agents import StrandsPlugin  # noqa: E402

import durable_plan  # noqa: E402
from durable_plan import plan_worker, start_plan  # noqa: E402
from durable_plan.protect.encryption import EncryptionPlugin, Keyring, new_key  # noqa: E402
from durable_plan.server.devserver import DevServer  # noqa: E402
from durable_plan.testing import ScriptedModel  # noqa: E402
from durable_plan.tools.mcp import mcp_tool_table  # noqa: E402
from tests.corpus.workflows import (  # noqa: E402
    ATTACK,
    CORPUS_TOOLS,
    ConversationInput,
    CorpusConversation,
    scripts,
)
from tests.support.mcp_support import tracker_client  # noqa: E402

QUEUE = "corpus"
MANIFEST = "manifest.json"


def model() -> ScriptedModel:
    return ScriptedModel(scripts=scripts())


def strands_plugin() -> StrandsPlugin:
    return StrandsPlugin(models={"scripted": model}, mcp_clients={"github": tracker_client})


class Recorder:
    """Saves each finished workflow's history and what replaying it needs."""

    def __init__(self, client: Client, out: Path) -> None:
        self.client = client
        self.out = out
        self.entries: dict[str, dict[str, Any]] = {}

    async def save(self, name: str, workflow_id: str, *, encrypted: bool = False) -> None:
        handle = self.client.get_workflow_handle(workflow_id)
        description = await handle.describe()
        history = await handle.fetch_history()
        (self.out / f"{name}.json").write_text(history.to_json() + "\n")
        self.entries[name] = {
            "workflow_id": workflow_id,
            "workflow_type": description.workflow_type,
            "status": description.status.name if description.status else None,
            "events": len(history.events),
            "encrypted": encrypted,
        }
        print(f"  {name}: {description.workflow_type} {len(history.events)} events")

    async def save_family(self, name: str, root_id: str) -> None:
        """A conversation and every plan and agent step it started (children by id)."""
        await self.save(name, root_id)
        query = f'WorkflowId STARTS_WITH "{root_id}/"'
        found: list[str] = []
        for _ in range(50):  # visibility lags a little behind the workflows themselves
            now = sorted([w.id async for w in self.client.list_workflows(query)])
            if now and now == found:
                break
            found = now
            await asyncio.sleep(0.2)
        for child in found:
            suffix = child[len(root_id) + 1 :].replace("/", "_")
            await self.save(f"{name}__{suffix}", child)


async def until(predicate: Callable[[], Awaitable[bool]], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not await predicate():
        if time.monotonic() > deadline:
            raise TimeoutError("the corpus run did not get there")
        await asyncio.sleep(0.05)


async def phase(handle: Any, step: str, wanted: str) -> bool:
    return any(line["id"] == step and line["phase"] == wanted for line in await handle.progress())


async def plans(rec: Recorder, client: Client) -> None:
    """Plans started from a client: each kind of step and ending."""

    async def run(name: str, plan: dict[str, Any], **extra: Any) -> Any:
        handle = await start_plan(
            client,
            plan,
            task_queue=QUEUE,
            registry=CORPUS_TOOLS,
            workflow_id=f"corpus-{name}-{uuid.uuid4().hex[:6]}",
            if_no_worker="ignore",
            **extra,
        )
        try:
            await handle.result()
        except Exception as exc:
            print(f"  ({name} ended: {type(exc).__name__})")
        return handle

    cases: dict[str, dict[str, Any]] = {
        "plan_chain": ATTACK,
        "plan_local": {
            "steps": [
                {"id": "attack", "tool": "roll_attack", "args": {"armour": 12}, "local": True},
                {
                    "id": "damage",
                    "tool": "apply_damage",
                    "args": {"monster": "goblin"},
                    "bind": {"damage": "steps.attack.damage"},
                },
            ]
        },
        "plan_branch_join": {
            "steps": [
                {"id": "lookup", "tool": "look_up_monster", "args": {"name": "goblin"}},
                {
                    "id": "hit",
                    "tool": "roll_attack",
                    "bind": {"armour": "steps.lookup.armour"},
                    "when": "steps.lookup.hp > 5",
                },
                {
                    "id": "miss",
                    "tool": "roll_attack",
                    "args": {"armour": 30},
                    "when": "steps.lookup.hp <= 5",
                },
                {
                    "id": "join",
                    "tool": "apply_damage",
                    "join": "any",
                    "args": {"monster": "goblin"},
                    "bind": {"damage": "$sum([steps.hit.damage, steps.miss.damage])"},
                },
            ]
        },
        "plan_map_reduce": {
            "steps": [
                {
                    "id": "looks",
                    "tool": "map",
                    "args": {
                        "over": ["goblin", "ogre", "troll"],
                        "do": {"tool": "look_up_monster", "bind": {"name": "item"}},
                    },
                },
                {
                    "id": "total",
                    "tool": "reduce",
                    "bind": {"over": "steps.looks.results"},
                    "args": {
                        "initial": {"hp": 0},
                        "do": {"tool": "measure", "bind": {"text": "$string(item.hp)"}},
                    },
                },
                {
                    "id": "broken",
                    "tool": "map",
                    "args": {
                        "over": ["a", "b"],
                        "do": {"tool": "fail", "bind": {"message": "item"}},
                    },
                },
            ],
            "on_error": "continue",
        },
        "plan_exit": {
            "steps": [
                {"id": "lookup", "tool": "look_up_monster", "args": {"name": "goblin"}},
                {
                    "id": "stop",
                    "tool": "exit",
                    "when": "steps.lookup.hp < 100",
                    "args": {"status": "error", "message": "too strong"},
                },
                {"id": "never", "tool": "roll_attack", "args": {"armour": 1}, "after": ["stop"]},
            ]
        },
        "plan_failed": {
            "steps": [
                {"id": "boom", "tool": "fail", "args": {"message": "the tool broke"}},
                {"id": "after", "tool": "roll_attack", "args": {"armour": 1}, "after": ["boom"]},
                {"id": "free", "tool": "roll_attack", "args": {"armour": 2}},
            ]
        },
        "plan_stored": {
            "steps": [
                {"id": "doc", "tool": "report", "args": {"kib": 64}},
                {"id": "size", "tool": "measure", "bind": {"text": "steps.doc"}},
            ],
            "returns": ["size", "doc"],
        },
    }
    for name, plan in cases.items():
        extra = {"store_over_bytes": 16 * 1024} if name == "plan_stored" else {}
        handle = await run(name, plan, **extra)
        await rec.save(name, handle.id)

    # An agent step: the plan, and the agent step's own child workflow.
    handle = await start_plan(
        client,
        {"steps": [dict(s) for s in scripts_agent_plan()["steps"]], "final": True},
        task_queue=QUEUE,
        registry=CORPUS_TOOLS,
        workflow_id=f"corpus-plan_agent_step-{uuid.uuid4().hex[:6]}",
        model="scripted",
        if_no_worker="ignore",
    )
    await handle.result()
    await rec.save_family("plan_agent_step", handle.id)

    # Approvals: one approved, one rejected, decided while the step waits.
    for name, approved in (("plan_approved", True), ("plan_rejected", False)):
        plan = {
            "steps": [
                {"id": "lookup", "tool": "look_up_monster", "args": {"name": "goblin"}},
                {"id": "pay", "tool": "refund", "args": {"order": "A1"}, "after": ["lookup"]},
            ]
        }
        handle = await start_plan(
            client,
            plan,
            task_queue=QUEUE,
            registry=CORPUS_TOOLS,
            workflow_id=f"corpus-{name}-{uuid.uuid4().hex[:6]}",
            if_no_worker="ignore",
        )
        await until(lambda h=handle: phase(h, "pay", "awaiting_approval"))
        await handle.decide("pay", approved=approved, reason="" if approved else "not today")
        await handle.result()
        await rec.save(name, handle.id)

    # Cancelled while a step runs.
    handle = await start_plan(
        client,
        {"steps": [{"id": "wait", "tool": "hold", "args": {"seconds": 30}}]},
        task_queue=QUEUE,
        registry=CORPUS_TOOLS,
        workflow_id=f"corpus-plan_cancelled-{uuid.uuid4().hex[:6]}",
        if_no_worker="ignore",
    )
    await until(lambda: phase(handle, "wait", "running"))
    await asyncio.sleep(0.5)
    await handle.handle.cancel()
    with contextlib.suppress(Exception):  # it ends cancelled
        await handle.handle.result()
    await rec.save("plan_cancelled", handle.id)

    # MCP steps: the server's call-tool activity, from the plan workflow.
    with tracker_client() as listing:
        table = mcp_tool_table("github", listing.list_tools_sync(), timeout_s=10, retries=1)
    mcp_plan = {
        "steps": [
            {"id": "issue", "tool": "github__get_issue", "args": {"number": 7}},
            {
                "id": "labelled",
                "tool": "github__add_label",
                "bind": {"number": "steps.issue.number"},
                "args": {"label": "corpus"},
            },
        ]
    }
    handle = await start_plan(
        client,
        mcp_plan,
        task_queue=QUEUE,
        registry={**CORPUS_TOOLS.options(), **table},
        workflow_id=f"corpus-plan_mcp-{uuid.uuid4().hex[:6]}",
        if_no_worker="ignore",
    )
    await handle.result()
    await rec.save("plan_mcp", handle.id)


def scripts_agent_plan() -> dict[str, Any]:
    from tests.corpus.workflows import AGENT_PLAN

    return AGENT_PLAN


async def conversations(rec: Recorder, client: Client) -> None:
    """TemporalAgent conversations: a plan without hooks, with hooks (and an agent step
    whose tool calls pass them), and a repair that reuses the first plan's steps."""
    for name, prompt, hooks in (
        ("conversation_plain", "attack", False),
        ("conversation_hooks", "morale", True),
        ("conversation_reuse", "repair", False),
    ):
        workflow_id = f"corpus-{name}-{uuid.uuid4().hex[:6]}"
        await client.execute_workflow(
            CorpusConversation.run,
            ConversationInput(prompt, hooks=hooks),
            id=workflow_id,
            task_queue=QUEUE,
        )
        await rec.save_family(name, workflow_id)


async def encrypted(rec: Recorder, target: str, keys: Keyring) -> None:
    client = await Client.connect(target, plugins=[strands_plugin(), EncryptionPlugin(keys)])
    queue = f"{QUEUE}-sealed"
    async with plan_worker(client, task_queue=queue, registry=CORPUS_TOOLS, encryption=keys):
        handle = await start_plan(
            client,
            ATTACK,
            task_queue=queue,
            registry=CORPUS_TOOLS,
            workflow_id=f"corpus-plan_encrypted-{uuid.uuid4().hex[:6]}",
            if_no_worker="ignore",
        )
        await handle.result()
    sealed = Recorder(client, rec.out)
    await sealed.save("plan_encrypted", handle.id, encrypted=True)
    rec.entries.update(sealed.entries)


def spawn_worker(target: str) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "scripts.record_histories", "--worker", target],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path])},
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if b"READY" not in line:
        raise RuntimeError(f"the corpus worker did not start: {line!r}")
    return proc


async def killed(rec: Recorder, client: Client, target: str) -> None:
    """A worker SIGKILLed while a step runs; a replacement finishes the plan."""
    first = await asyncio.to_thread(spawn_worker, target)
    handle = await start_plan(
        client,
        {
            "steps": [
                {"id": "lookup", "tool": "look_up_monster", "args": {"name": "goblin"}},
                {"id": "wait", "tool": "hold", "args": {"seconds": 3}, "after": ["lookup"]},
            ]
        },
        task_queue=f"{QUEUE}-kill",
        registry=CORPUS_TOOLS,
        workflow_id=f"corpus-plan_worker_killed-{uuid.uuid4().hex[:6]}",
        if_no_worker="ignore",
    )
    await until(lambda: phase(handle, "wait", "running"))
    await asyncio.sleep(0.5)
    first.send_signal(signal.SIGKILL)
    first.wait()
    second = await asyncio.to_thread(spawn_worker, target)
    try:
        await asyncio.wait_for(handle.result(), 60)
    finally:
        second.send_signal(signal.SIGKILL)
        second.wait()
    await rec.save("plan_worker_killed", handle.id)


async def worker_process(target: str) -> None:
    client = await Client.connect(target, plugins=[strands_plugin()])
    async with plan_worker(client, task_queue=f"{QUEUE}-kill", registry=CORPUS_TOOLS):
        print("READY", flush=True)
        await asyncio.Event().wait()


async def record(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    keys = Keyring((new_key("corpus"),))
    (out / "keys.txt").write_text(keys.to_text() + "\n")  # a test key: this corpus only
    with DevServer(headless=True) as server:
        client = await Client.connect(server.target, plugins=[strands_plugin()])
        rec = Recorder(client, out)
        async with plan_worker(
            client, task_queue=QUEUE, registry=CORPUS_TOOLS, workflows=[CorpusConversation]
        ):
            await plans(rec, client)
            await conversations(rec, client)
        await encrypted(rec, server.target, keys)
        await killed(rec, client, server.target)
    manifest = {"version": durable_plan.__version__, "histories": rec.entries}
    (out / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    print(f"{len(rec.entries)} histories in {out}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--worker", metavar="TARGET", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        asyncio.run(worker_process(args.worker))
        return 0
    out = args.out or ROOT / "tests" / "histories" / durable_plan.__version__
    asyncio.run(record(out))
    return 0


if __name__ == "__main__":
    from durable_plan.server.connection import exit_now

    exit_now(main())
