"""Talk to the game master: one conversation, its answer, and the round trips it cost.

python client.py --demo               # offline: starts its own dev server and worker
python client.py                      # against `durable-plan dev` + `python worker.py`
python client.py --live               # a real Bedrock model writes the plans
python client.py --round              # the combat round (three maps over the action log)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncIterator, Sequence

from temporalio.client import Client

from activities.scripts import ATTACK_PROMPT, MORALE_PROMPT, ROUND_PROMPT
from durable_plan.devserver import DevServer, DevServerNotFound
from worker import DEFAULT_TARGET, TASK_QUEUE, build_worker, connect
from workflows.game_master import GameMasterInput, GameMasterOutput, GameMasterWorkflow


async def converse(
    client: Client, prompt: str, *, model: str, task_queue: str, honor_final: bool = True
) -> tuple[str, GameMasterOutput]:
    workflow_id = f"game-master-{uuid.uuid4().hex[:8]}"
    output = await client.execute_workflow(
        GameMasterWorkflow.run,
        GameMasterInput(prompt=prompt, model=model, honor_final=honor_final),
        id=workflow_id,
        task_queue=task_queue,
    )
    return workflow_id, output


def show(prompt: str, workflow_id: str, output: GameMasterOutput, ui: str | None) -> None:
    print(f"> {prompt}")
    try:
        print(json.dumps(json.loads(output.answer), indent=2))
    except ValueError:
        print(output.answer)
    inside = (
        f", plus {output.agent_step_rounds} model calls inside an agent step"
        if output.agent_step_rounds
        else ""
    )
    print(
        f"model round trips: {output.model_round_trips} "
        f"(a plain loop needs {output.plain_loop_round_trips}){inside}"
    )
    if ui:
        print(f"Temporal UI: {ui}/namespaces/default/workflows/{workflow_id}")
    print()


@contextlib.asynccontextmanager
async def demo_environment() -> AsyncIterator[tuple[Client, str | None]]:
    """A private dev server (with UI) and an in-process worker, for the offline demo."""
    with DevServer(headless=False) as server:
        client = await connect(server.target)
        async with build_worker(client, TASK_QUEUE):
            yield client, server.ui_url


async def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--demo", action="store_true", help="own dev server + worker, offline")
    parser.add_argument("--live", action="store_true", help="use the Bedrock model")
    parser.add_argument("--round", action="store_true", help="the combat round (three maps)")
    parser.add_argument("--prompt", help="your own prompt (needs --live)")
    parser.add_argument("--prose", action="store_true", help="honor_final=False: prose answer")
    parser.add_argument(
        "--keep", action="store_true", help="with --demo: keep the server up (Ctrl-C stops it)"
    )
    parser.add_argument("--target", default=DEFAULT_TARGET)
    parser.add_argument("--task-queue", default=TASK_QUEUE)
    args = parser.parse_args(argv)
    model = "bedrock" if args.live else "scripted"
    prompts = [args.prompt] if args.prompt else [ROUND_PROMPT if args.round else ATTACK_PROMPT]
    if args.demo and not args.prompt and not args.round:
        prompts = [ATTACK_PROMPT, ROUND_PROMPT, MORALE_PROMPT]
    try:
        env = demo_environment() if args.demo else _remote(args.target)
        async with env as (client, ui):
            for prompt in prompts:
                workflow_id, output = await converse(
                    client,
                    prompt,
                    model=model,
                    task_queue=args.task_queue,
                    honor_final=not args.prose,
                )
                show(prompt, workflow_id, output, ui)
            if args.demo and args.keep:
                print("The dev server and worker keep running; Ctrl-C stops them.", flush=True)
                await asyncio.Event().wait()
            elif args.demo:
                print("(the demo's server stops now; --keep keeps it up to browse the UI)")
    except DevServerNotFound as exc:
        print(exc)
        return 2
    return 0


@contextlib.asynccontextmanager
async def _remote(target: str) -> AsyncIterator[tuple[Client, str | None]]:
    client = await connect(target)
    host, _, port = target.rpartition(":")
    yield client, f"http://{host}:{int(port) + 1000}" if port.isdigit() else None


if __name__ == "__main__":
    try:
        raise SystemExit(asyncio.run(main()))
    except KeyboardInterrupt:
        raise SystemExit(0) from None
