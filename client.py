"""Talk to the game master: one conversation, its answer, and the round trips it cost.

python client.py --demo               # offline: starts its own dev server and worker
python client.py --demo morale        # ... only one of its conversations, by name
python client.py                      # against `durable-plan dev` + `python worker.py`
python client.py round                # one conversation by name: attack (the default),
                                      # round, morale or repair
python client.py --live               # a real Bedrock model writes the plans
python client.py --address host:7233  # another server (or TEMPORAL_ADDRESS=host:7233)
python client.py --encrypt            # seal payloads with $DURABLE_PLAN_KEYS (on if set)

Without --live the worker's scripted model answers (offline, no credentials); it knows only
the demo's prompts. Exit status, as the `durable-plan` command's: 0 answered, 1 a
conversation failed (its root cause is printed), 2 a wrong command (an address that is not
HOST:PORT, a namespace the server lacks), 3 no server (nothing answers at the address, no
`temporal` binary for --demo), 130 interrupted (what was left running is said).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHandle,
)
from temporalio.service import RPCError

from activities.scripts import ATTACK_PROMPT, MORALE_PROMPT, REPAIR_PROMPT, ROUND_PROMPT
from durable_plan.server.activity_logs import one_line_activity_failures
from durable_plan.server.connection import (
    DEFAULT_ADDRESS,
    EXIT_NO_SERVER,
    ServerSetupError,
    add_encryption_argument,
    add_server_arguments,
    default_ui_url,
    run_script,
    setup_exit_code,
    workflow_url,
)
from durable_plan.server.devserver import DevServer, DevServerError, DevServerNotFound
from durable_plan.temporal.client.pollers import task_queue_has_pollers
from durable_plan.temporal.client.start import no_worker_message
from durable_plan.temporal.client.subscribe import conversation_events
from durable_plan.temporal.workflows.failures import root_message
from worker import TASK_QUEUE, build_worker, connect
from workflows.game_master import GameMasterInput, GameMasterOutput, GameMasterWorkflow

EXIT_FAILED = 1
EXIT_INTERRUPTED = 130
CONVERSATIONS = {
    "attack": ATTACK_PROMPT,
    "round": ROUND_PROMPT,
    "morale": MORALE_PROMPT,
    "repair": REPAIR_PROMPT,
}
"""The demo's conversations by name, in the order ``--demo`` runs them."""
STEPS_DRAIN_S = 5.0
"""After the answer, how long the step printer may take to print its plans' last events."""
PICKUP_WAIT_S = 5.0
"""How long a conversation may wait for a worker before the client says that none took it."""
FIRST_TASK_SCHEDULED_EVENTS = 2
"""A started workflow's history before any worker took its first task: WorkflowExecutionStarted
and WorkflowTaskScheduled (a worker's poll adds WorkflowTaskStarted)."""


class ConversationFailed(RuntimeError):
    """The game master's workflow failed; the message is its root cause, on one line."""


async def converse(
    client: Client,
    prompt: str,
    *,
    model: str,
    task_queue: str,
    honor_final: bool = True,
    unclaimed: Callable[[str], None] | None = None,
    watch_steps: bool = True,
    left_running: Callable[[str], None] | None = None,
) -> tuple[str, GameMasterOutput]:
    """One conversation; ``unclaimed(workflow_id)`` is called once if no worker has taken
    its first workflow task after ``PICKUP_WAIT_S`` (it keeps waiting for one);
    ``left_running(workflow_id)`` when this client stops waiting before the answer
    (Ctrl-C, SIGTERM): the conversation goes on on the server."""
    workflow_id = f"game-master-{uuid.uuid4().hex[:8]}"
    handle = await client.start_workflow(
        GameMasterWorkflow.run,
        GameMasterInput(prompt=prompt, model=model, honor_final=honor_final),
        id=workflow_id,
        task_queue=task_queue,
    )
    watchdog = asyncio.ensure_future(_watch_pickup(handle, unclaimed)) if unclaimed else None
    answered = asyncio.Event()
    steps = (
        asyncio.ensure_future(_print_steps(client, workflow_id, answered.is_set))
        if watch_steps
        else None
    )
    try:
        output = await handle.result()
        answered.set()
        if steps is not None:  # the last events of its plans, already published
            with contextlib.suppress(Exception):
                await asyncio.wait_for(steps, STEPS_DRAIN_S)
    except WorkflowFailureError as exc:
        raise ConversationFailed(f"conversation {workflow_id} failed: {root_message(exc)}") from exc
    except (asyncio.CancelledError, KeyboardInterrupt):
        if left_running is not None:
            left_running(workflow_id)
        raise
    finally:
        for task in (watchdog, steps):
            if task is not None and not task.done():
                task.cancel()
    return workflow_id, output


async def _print_steps(client: Client, workflow_id: str, answered: Callable[[], bool]) -> None:
    """Each step of the conversation's plans as it finishes, from the plans' event streams
    (``conversation_events``): the caller sees the work before the answer."""
    async for event in conversation_events(client, workflow_id, ended=answered):
        if event.kind == "step_finished" and event.status != "not_taken":
            took = f" in {event.duration_ms:.3g} ms" if event.duration_ms else ""
            if (event.detail or {}).get("reused_from"):
                took = f" (kept from plan {event.detail['reused_from']})"  # type: ignore[index]
            error = f": {event.error}" if event.error else ""
            print(f"  . {event.step} ({event.tool}) {event.status}{took}{error}", flush=True)
        elif event.kind == "plan_finished":
            print(f"  plan {event.status}", flush=True)


async def _watch_pickup(handle: WorkflowHandle[Any, Any], unclaimed: Callable[[str], None]) -> None:
    """The server remembers a worker's polls for minutes after it stopped, so the check
    before starting passes for a client started a minute after its worker went away; the
    workflow's history says for sure: no workflow task started means no worker took it."""
    await asyncio.sleep(PICKUP_WAIT_S)
    try:
        description = await handle.describe()
    except RPCError:
        return  # the server will not say: the conversation waits as it would anyway
    started = description.history_length > FIRST_TASK_SCHEDULED_EVENTS
    if description.status == WorkflowExecutionStatus.RUNNING and not started:
        unclaimed(handle.id)


def readable(answer: str | dict[str, Any]) -> str:
    """JSON with every value that fits on one line kept on it, else the text as is."""
    if isinstance(answer, dict):  # a final plan's returned results
        return _layout(answer, 0)
    try:
        return _layout(json.loads(answer), 0)
    except ValueError:
        return answer


def _layout(value: object, indent: int, used: int = 0, width: int = 88) -> str:
    """``used``: characters already on the line (the indent and the key)."""
    compact = json.dumps(value)
    if used + len(compact) <= width or not isinstance(value, dict | list) or not value:
        return compact
    pad = " " * (indent + 2)
    if isinstance(value, dict):
        items = []
        for key, item in value.items():
            head = f"{pad}{json.dumps(key)}: "
            items.append(head + _layout(item, indent + 2, len(head)))
        return "{\n" + ",\n".join(items) + "\n" + " " * indent + "}"
    items = [pad + _layout(item, indent + 2, len(pad)) for item in value]
    return "[\n" + ",\n".join(items) + "\n" + " " * indent + "]"


def show(workflow_id: str, output: GameMasterOutput, link: str | None) -> None:
    """What a conversation answered and cost; its prompt and steps were printed before."""
    print(readable(output.answer))
    inside = (
        f", plus {output.agent_step_rounds} model calls inside an agent step"
        if output.agent_step_rounds
        else ""
    )
    print(
        f"model round trips: {output.model_round_trips} "
        f"(a plain loop needs {output.plain_loop_round_trips}){inside}"
    )
    if output.conversation_tokens:
        agents = output.agent_step_tokens or {}
        extra = f", {agents.get('total', 0)} in agent steps" if agents else ""
        print(
            f"model tokens: {output.conversation_tokens.get('total', 0)} in the conversation{extra}"
        )
    if output.plans_rejected:
        print(
            f"plans rejected before anything ran: {output.plans_rejected} (the check found "
            "the misspelled field; the corrected plan ran)"
        )
    if output.steps_reused:
        print(
            f"plans: {output.plans}, steps run: {output.steps_run}, reused without running: "
            f"{output.steps_reused} (the repair plan kept the first plan's results)"
        )
    if link:
        print(f"Temporal UI: {link}")
    print()


@contextlib.asynccontextmanager
async def demo_environment(
    encrypt: bool | None = None,
) -> AsyncIterator[tuple[Client, str | None]]:
    """A private dev server (with UI) and an in-process worker, for the offline demo.
    External Storage is on (this machine's default directory): the worker is this process,
    so it reads what the client stores, whatever the environment says."""
    with DevServer(headless=False) as server:
        client = await connect(server.target, encrypt=encrypt, payload_storage=True)
        async with build_worker(client, TASK_QUEUE):
            yield client, server.ui_url


@dataclass
class Remote:
    """A running server (and, we hope, a worker): what a conversation needs to say when
    nothing takes it."""

    client: Client
    ui: str | None
    address: str
    task_queue: str
    warned: bool = False
    """Already said that no worker polls: the watchdog need not say it again."""
    own_server: bool = False
    """The demo's server, which stops with this client: nothing is left running."""

    def worker_command(self) -> str:
        flags = "" if self.address == DEFAULT_ADDRESS else f" --address {self.address}"
        flags += "" if self.task_queue == TASK_QUEUE else f" --task-queue {self.task_queue}"
        return f"python worker.py{flags}"

    def left_running(self, workflow_id: str) -> None:
        """Said when this client stops waiting: the conversation is durable and goes on
        (or waits for a worker) on the server; the person decides whether to end it."""
        if self.own_server:
            return
        address = "" if self.address == DEFAULT_ADDRESS else f" --address {self.address}"
        print(
            f"\nclient.py: stopped waiting; conversation {workflow_id} is still running on "
            f"{self.address} (a worker finishes it). End it with: temporal workflow cancel -w "
            f"{workflow_id}{address}   (or terminate), or follow it in the web UI",
            file=sys.stderr,
            flush=True,
        )

    def unclaimed(self, workflow_id: str) -> None:
        if self.warned:
            return
        self.warned = True
        print(
            f"client.py: no worker has picked up conversation {workflow_id} after "
            f"{PICKUP_WAIT_S:g} s on task queue {self.task_queue!r} at {self.address} (the "
            f"server remembers a stopped worker for minutes); start `{self.worker_command()}` "
            "in another terminal: the conversation waits until one does (Ctrl-C stops this one)",
            file=sys.stderr,
            flush=True,
        )


@contextlib.asynccontextmanager
async def remote_environment(
    address: str,
    namespace: str,
    ui_url: str | None,
    task_queue: str,
    encrypt: bool | None = None,
) -> AsyncIterator[Remote]:
    """A running server and worker: says so at once if no worker polls the task queue, and
    (`Remote.unclaimed`) if a conversation's first task is not taken within a few seconds."""
    client = await connect(address, namespace=namespace, encrypt=encrypt)
    ui = default_ui_url(address) if ui_url is None else (ui_url.rstrip("/") or None)
    remote = Remote(client, ui, address, task_queue)
    if not await task_queue_has_pollers(client, task_queue):
        fix = (
            f"the conversation waits until one does: start `{remote.worker_command()}` in "
            "another terminal (Ctrl-C stops this one)"
        )
        print(f"client.py: {no_worker_message(task_queue, address, fix)}", file=sys.stderr)
        remote.warned = True
    yield remote


@contextlib.asynccontextmanager
async def _demo(encrypt: bool | None) -> AsyncIterator[Remote]:
    async with demo_environment(encrypt) as (client, ui):
        # Its own worker: no watchdog; its own server: nothing outlives the client.
        yield Remote(client, ui, "", TASK_QUEUE, warned=True, own_server=True)


async def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "conversation",
        nargs="?",
        choices=sorted(CONVERSATIONS),
        help="one of the demo's conversations (default: attack; with --demo: all four)",
    )
    parser.add_argument("--demo", action="store_true", help="own dev server + worker, offline")
    parser.add_argument("--live", action="store_true", help="use the Bedrock model")
    parser.add_argument("--round", action="store_true", help="the same as the name round")
    parser.add_argument(
        "--prompt", help="your own prompt (the scripted model knows only the demo's)"
    )
    parser.add_argument("--prose", action="store_true", help="honor_final=False: prose answer")
    parser.add_argument(
        "--keep", action="store_true", help="with --demo: keep the server up (Ctrl-C stops it)"
    )
    add_server_arguments(parser, ui=True)
    add_encryption_argument(parser)
    parser.add_argument("--task-queue", default=TASK_QUEUE)
    args = parser.parse_args(argv)
    model = "bedrock" if args.live else "scripted"
    name = "round" if args.round else args.conversation
    if args.prompt:
        prompts = [args.prompt]
    elif name is not None:
        prompts = [CONVERSATIONS[name]]
    else:
        prompts = list(CONVERSATIONS.values()) if args.demo else [ATTACK_PROMPT]
    if args.demo:
        # Its worker runs here: a failed tool attempt is one line, not the SDK's traceback.
        one_line_activity_failures(prefix="client.py: ")
    try:
        env = (
            _demo(args.encrypt)
            if args.demo
            else remote_environment(
                args.address, args.namespace, args.ui_url, args.task_queue, args.encrypt
            )
        )
        async with env as remote:
            client, ui = remote.client, remote.ui
            for prompt in prompts:
                print(f"> {prompt}", flush=True)  # then its steps as they finish, the answer
                workflow_id, output = await converse(
                    client,
                    prompt,
                    model=model,
                    task_queue=args.task_queue,
                    honor_final=not args.prose,
                    unclaimed=remote.unclaimed,
                    left_running=remote.left_running,
                )
                link = workflow_url(ui, client.namespace, workflow_id) if ui else None
                show(workflow_id, output, link)
            if args.demo and args.keep:
                print("The dev server and worker keep running; Ctrl-C stops them.", flush=True)
                await asyncio.Event().wait()
            elif args.demo:
                print("(the demo's server stops now; --keep keeps it up to browse the UI)")
    except ServerSetupError as exc:
        print(f"client.py: {exc}", file=sys.stderr)
        return setup_exit_code(exc)
    except DevServerNotFound as exc:
        print(f"client.py: {exc}", file=sys.stderr)
        return EXIT_NO_SERVER
    except DevServerError as exc:
        print(f"client.py: {str(exc).splitlines()[0]}", file=sys.stderr)
        return EXIT_NO_SERVER
    except ConversationFailed as exc:
        print(f"client.py: {exc}", file=sys.stderr)
        return EXIT_FAILED
    return 0


if __name__ == "__main__":
    run_script(main())  # leaves with os._exit: see run_script
