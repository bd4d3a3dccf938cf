"""What every command that talks to a Temporal server shares: connecting, finding a plan
workflow, and leaving the process without the Temporal runtime's finalizer."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, NoReturn

from durable_plan.cli.commands import EXIT_BAD_INPUT, EXIT_INTERRUPTED, EXIT_NO_SERVER, CommandError
from durable_plan.server.connection import (
    UNRESOLVED,
    BadAddress,
    Terminated,
    check_address,
    exit_now,
    run_until_signalled,
    transport_reason,
)

if TYPE_CHECKING:
    from temporalio.client import Client, WorkflowExecutionDescription

    from durable_plan.protect.encryption import Keyring
    from durable_plan.temporal.client.start import PlanHandle

CONNECT_TIMEOUT_S = 10.0
START_HINT = "start one with `durable-plan dev`, or pass --address HOST:PORT"


async def connect(
    address: str,
    namespace: str,
    *,
    encrypt: bool | None = None,
    payload_storage: bool | str | None = None,
    **kwargs: Any,
) -> Client:
    """A client, or ``CommandError(EXIT_NO_SERVER)`` saying in one line that nobody answers.

    A malformed address (no port, a scheme, not a host name) is bad input, exit 2, before
    anything is tried. ``encrypt`` is the ``--encrypt/--no-encrypt`` option
    (`durable_plan.protect.encryption.keyring_for`): with keys, the client seals and opens
    payloads; keys that cannot be used exit 2. ``payload_storage``: External Storage as
    `durable_plan.server.connection.connect` takes it (None: as the environment says).
    """
    from temporalio.client import Client

    try:
        address = check_address(address)
    except BadAddress as exc:
        raise CommandError(EXIT_BAD_INPUT, str(exc)) from None
    from durable_plan.protect.payload_storage import with_payload_storage

    kwargs["plugins"] = with_payload_storage(kwargs.get("plugins", ()), payload_storage)
    keys = keyring(encrypt)
    if keys is not None:
        from durable_plan.protect.encryption import EncryptionPlugin

        kwargs["plugins"] = [*kwargs.get("plugins", ()), EncryptionPlugin(keys)]

    fix = START_HINT
    try:
        return await asyncio.wait_for(
            Client.connect(address, namespace=namespace, **kwargs), CONNECT_TIMEOUT_S
        )
    except TimeoutError:
        reason = f"no answer within {CONNECT_TIMEOUT_S:g} s"
    except RuntimeError as exc:
        reason = connect_reason(exc)
        if reason == UNRESOLVED:
            fix = f"check the host name {address.rpartition(':')[0]!r}, or pass --address HOST:PORT"
    raise CommandError(EXIT_NO_SERVER, f"no Temporal server answers at {address} ({reason}); {fix}")


def keyring(encrypt: bool | None) -> Keyring | None:
    """The keys of an ``--encrypt/--no-encrypt`` option; keys that cannot be used exit 2."""
    from durable_plan.protect.encryption import KeyConfigError, keyring_for

    try:
        return keyring_for(encrypt)
    except KeyConfigError as exc:
        raise CommandError(EXIT_BAD_INPUT, str(exc)) from None


def connect_reason(exc: BaseException) -> str:
    """The OS's words from the SDK's nested transport error ("Connection refused")."""
    return transport_reason(str(exc))


async def plan_handle(
    client: Client, workflow_id: str, address: str, *, any_workflow: bool = False
) -> tuple[PlanHandle, WorkflowExecutionDescription]:
    """The plan workflow ``workflow_id`` (or an agent step's child workflow, which answers
    the same ``progress`` query and ``decide_step`` update) and its description; one-line
    errors otherwise. ``any_workflow``: a conversation too, whose direct calls of gated tools
    await a person through the same ``decide_step`` update (``temporal/direct_calls``)."""
    from temporalio.service import RPCError, RPCStatusCode

    from durable_plan.temporal.client.start import PlanHandle
    from durable_plan.temporal.wire.messages import PLAN_WORKFLOW_NAME
    from durable_plan.temporal.workflows.agent_workflow import AGENT_STEP_WORKFLOW_NAME

    handle = client.get_workflow_handle(workflow_id)
    try:
        description = await handle.describe()
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            raise CommandError(
                EXIT_BAD_INPUT,
                f"no workflow {workflow_id!r} on {address} (namespace {client.namespace}): "
                f"{exc.message}; check the id (the Temporal UI lists them)",
            ) from None
        raise CommandError(EXIT_NO_SERVER, f"{address}: {exc.message}") from None
    known = (PLAN_WORKFLOW_NAME, AGENT_STEP_WORKFLOW_NAME)
    if description.workflow_type not in known and not any_workflow:
        raise CommandError(
            EXIT_BAD_INPUT,
            f"workflow {workflow_id!r} is a {description.workflow_type}, not a plan; the plans "
            f"it submits run as child workflows {workflow_id}/plan/<tool use id>",
        )
    return PlanHandle(handle), description


def is_agent_step(description: WorkflowExecutionDescription) -> bool:
    """An agent step's child workflow (``<plan id>/agent/<step id>``), not a plan."""
    from durable_plan.temporal.workflows.agent_workflow import AGENT_STEP_WORKFLOW_NAME

    return description.workflow_type == AGENT_STEP_WORKFLOW_NAME


def client_command(command: Coroutine[Any, Any, int]) -> NoReturn:
    """Run a command that talks to a server, then leave the process at once.

    The Temporal client's native runtime can abort the interpreter while it
    finalizes after a failed update ("PyGILState_Release ... must be current",
    exit -6), turning a clean refusal into a crash; exiting without
    finalization keeps the command's own exit code. Output is flushed first.
    """
    try:
        code = run_until_signalled(command)
    except Terminated as stop:
        code = stop.status
    except CommandError as err:
        print(f"durable-plan: error: {err}", file=sys.stderr)
        code = err.code
    except KeyboardInterrupt:
        code = EXIT_INTERRUPTED
    except Exception as exc:
        from durable_plan.protect.encryption import missing_keys_message

        message = missing_keys_message(exc)  # encrypted payloads, no or wrong keys
        if message is None:
            raise
        print(f"durable-plan: error: {message}", file=sys.stderr)
        code = EXIT_BAD_INPUT
    exit_now(code)
