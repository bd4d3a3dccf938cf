"""The worker: plan workflows, the game master agent, the game tools, the models.

    python worker.py                      # next to `durable-plan dev` (127.0.0.1:7233)
    python worker.py --live               # real Bedrock model available as "bedrock"
    python worker.py --address host:7233  # another server (or TEMPORAL_ADDRESS=host:7233)
    python worker.py --encrypt            # seal payloads with $DURABLE_PLAN_KEYS (on if set)

Models are registered on the *client* through ``StrandsPlugin(models=...)``
(on the worker as well it would register ``invoke_model`` twice). The scripted
model is always there, for offline runs; "bedrock" is built only when a
workflow asks for it, so it needs credentials only with ``--live``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from collections.abc import Callable, Sequence
from typing import Any

from temporalio.client import Client
from temporalio.strands_agents import StrandsPlugin
from temporalio.worker import Worker

from activities.game_master import GAME_TOOLS
from activities.scripts import DEMO_SCRIPTS
from durable_plan.protect.encryption import is_encrypting
from durable_plan.server.activity_logs import one_line_activity_failures
from durable_plan.server.connection import (
    ServerSetupError,
    add_encryption_argument,
    add_server_arguments,
    default_address,
    run_script,
    setup_exit_code,
)
from durable_plan.server.connection import connect as connect_server
from durable_plan.server.long_lived import freeze_startup_objects
from durable_plan.temporal.worker.plugin import DurablePlanPlugin
from durable_plan.testing import ScriptedModel
from workflows.conversation import GameMasterConversation
from workflows.game_master import GameMasterWorkflow

TASK_QUEUE = "durable-plan"
DEFAULT_BEDROCK_MODEL = "global.anthropic.claude-sonnet-4-6"


def bedrock_model() -> Any:
    """A Bedrock model with botocore retries off: Temporal owns retries."""
    from botocore.config import Config
    from strands.models.bedrock import BedrockModel

    return BedrockModel(
        model_id=os.environ.get("BEDROCK_MODEL_ID", DEFAULT_BEDROCK_MODEL),
        boto_client_config=Config(retries={"max_attempts": 0}),
    )


def model_factories(scripted_latency_s: float = 0.0) -> dict[str, Callable[[], Any]]:
    return {
        "scripted": lambda: ScriptedModel(scripts=DEMO_SCRIPTS, latency_s=scripted_latency_s),
        "bedrock": bedrock_model,
    }


async def connect(
    address: str | None = None,
    *,
    namespace: str | None = None,
    encrypt: bool | None = None,
    payload_storage: bool | str | None = None,
    **models: Callable[[], Any],
) -> Client:
    """A client carrying the Strands plugin (models and the pydantic converter) and
    `DurablePlanPlugin` (the plans' converter; its workers serve the plans).

    ``address`` / ``namespace`` default to ``$TEMPORAL_ADDRESS`` / ``$TEMPORAL_NAMESPACE``
    (else the dev server's); a server that does not answer raises ``ServerSetupError``.
    ``encrypt``: seal payloads with ``$DURABLE_PLAN_KEYS`` (None: when it is set).
    ``payload_storage``: External Storage (None: as ``$DURABLE_PLAN_STORE`` /
    ``DURABLE_PLAN_PAYLOAD_STORAGE`` say, alike in this worker and the client; True: on, as
    the offline demo runs it, its worker in the same process).
    """
    from durable_plan.protect.keys import KeyConfigError, keyring_for

    factories = {**model_factories(), **models}
    try:
        keys = keyring_for(encrypt)
    except KeyConfigError as exc:
        raise ServerSetupError(str(exc)) from None
    # The plans' converter (keys, External Storage) on the client: the client and every
    # worker built from it agree, and those workers serve the plans (``build_worker``).
    plans = DurablePlanPlugin(GAME_TOOLS, encryption=keys, payload_storage=payload_storage)
    return await connect_server(
        address or default_address(),
        namespace=namespace,
        encrypt=False,  # the plugin's
        payload_storage=False,  # the plugin's
        plugins=[StrandsPlugin(models=factories), plans],
    )


def build_worker(client: Client, task_queue: str = TASK_QUEUE, **kwargs: Any) -> Worker:
    """Everything the demo needs on one task queue: the demo's workflows, and (through the
    client's `DurablePlanPlugin`, or one added here) ``PlanWorkflow``, the game tools and
    recovery. Added here, the plugin keeps the client's converter (``payload_storage=False``:
    the client's storage, not another)."""
    plugins = list(kwargs.pop("plugins", ()))
    if not any(isinstance(p, DurablePlanPlugin) for p in client.config()["plugins"]):
        # A client not made by ``connect``: the plugin on this worker alone.
        plugins.append(DurablePlanPlugin(GAME_TOOLS, payload_storage=False))
    return Worker(
        client,
        task_queue=task_queue,
        workflows=[GameMasterWorkflow, GameMasterConversation],
        plugins=plugins,
        **kwargs,
    )


def _check_live_credentials() -> None:
    import boto3

    if boto3.Session().get_credentials() is None:
        sys.exit(
            "--live needs AWS credentials with Bedrock access: export AWS_PROFILE=... "
            "(or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY) and AWS_REGION=..."
        )


async def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_server_arguments(parser)
    add_encryption_argument(parser)
    parser.add_argument("--task-queue", default=TASK_QUEUE)
    parser.add_argument("--live", action="store_true", help="check Bedrock credentials first")
    args = parser.parse_args(argv)
    if args.live:
        _check_live_credentials()
    # A failed tool attempt is one line on this terminal, not the SDK's traceback.
    one_line_activity_failures(prefix="worker.py: ")
    try:
        client = await connect(args.address, namespace=args.namespace, encrypt=args.encrypt)
    except ServerSetupError as exc:
        print(f"worker.py: {exc}", file=sys.stderr)
        return setup_exit_code(exc)
    worker = build_worker(client, args.task_queue)
    # SIGTERM (a deploy, `docker stop`) drains: running steps finish, within the
    # worker's graceful shutdown timeout, instead of waiting out their heartbeat timeout
    # on another worker.
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    freeze_startup_objects()  # later collections skip what start-up made (long_lived.py)
    async with worker:
        sealed = ", payloads encrypted" if is_encrypting(client) else ""
        print(f"worker polling {args.task_queue!r} on {args.address}{sealed}", flush=True)
        await stop.wait()
    print("worker stopped", flush=True)
    return 0


if __name__ == "__main__":
    run_script(main(), interrupted=0)  # leaves with os._exit: see run_script
