"""Where the Temporal server and its web UI are, and a connect that explains a miss.

`worker.py`, `client.py`, the examples and the command line all read the same settings
(``--address`` / ``TEMPORAL_ADDRESS``, ``--namespace`` / ``TEMPORAL_NAMESPACE``,
``--ui-url`` / ``TEMPORAL_UI_URL``) with the same defaults, so pointing one of them at a
server points all of them there. A server that does not answer is a setup problem, not a
bug: `connect` turns the SDK's 40-line transport traceback into one line saying which address
was tried and how to start a server.

Importing this module is cheap (no Temporal SDK until `connect` runs): the command line
imports it to build its parser. How a script runs and ends (``run_script``, ``exit_now``)
is ``script_runner.py``, re-exported here.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from durable_plan.server.script_runner import (
    Terminated,
    exit_now,
    run_script,
    run_until_signalled,
)

if TYPE_CHECKING:
    from temporalio.client import Client

__all__ = [
    "ADDRESS_ENV",
    "DEFAULT_ADDRESS",
    "DEFAULT_NAMESPACE",
    "EXIT_BAD_SETUP",
    "EXIT_NO_SERVER",
    "NAMESPACE_ENV",
    "UI_URL_ENV",
    "BadAddress",
    "NamespaceNotFound",
    "ServerSetupError",
    "ServerUnreachable",
    "Terminated",
    "add_encryption_argument",
    "add_server_arguments",
    "check_address",
    "connect",
    "default_address",
    "default_namespace",
    "default_ui_url",
    "exit_now",
    "run_script",
    "run_until_signalled",
    "setup_exit_code",
    "transport_reason",
    "unreachable_message",
    "workflow_url",
]

ADDRESS_ENV = "TEMPORAL_ADDRESS"
NAMESPACE_ENV = "TEMPORAL_NAMESPACE"
UI_URL_ENV = "TEMPORAL_UI_URL"
DEFAULT_ADDRESS = "127.0.0.1:7233"
DEFAULT_NAMESPACE = "default"
# `temporal server start-dev` and `durable-plan dev` serve the UI on the gRPC port + 1000
# (7233 -> 8233); a server elsewhere has no such rule, so no UI link is guessed for it.
DEV_UI_PORT_OFFSET = 1000
_LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})


class ServerSetupError(RuntimeError):
    """The server cannot be used as configured; the message is one line with the fix."""


class ServerUnreachable(ServerSetupError):
    """No Temporal server answered; the message is one line with the address and the fix."""


EXIT_BAD_SETUP = 2
"""Fix the command: an address that is not HOST:PORT, a namespace the server lacks."""
EXIT_NO_SERVER = 3
"""Nothing answers at the address, or the dev server cannot start (the CLI's code too)."""


def setup_exit_code(exc: BaseException) -> int:
    """The exit status of a script that could not use its server, the same as the CLI's:
    3 when no server answers (or none can be started), 2 when the command is wrong."""
    return EXIT_NO_SERVER if isinstance(exc, ServerUnreachable) else EXIT_BAD_SETUP


class NamespaceNotFound(ServerSetupError):
    """The server answered but has no such namespace (a worker would fail on its first poll)."""


class BadAddress(ServerSetupError, ValueError):
    """The address is not HOST:PORT; nothing was tried. The message is one line with the fix."""


UNRESOLVED = "the host name does not resolve"
_HOST_NAME = re.compile(r"[A-Za-z0-9_]([A-Za-z0-9_.-]*[A-Za-z0-9_])?")
_ADDRESS_FIX = f"write HOST:PORT, e.g. {DEFAULT_ADDRESS}"


def check_address(address: str) -> str:
    """``address`` if it is ``HOST:PORT`` (``[v6]:PORT`` for IPv6), else `BadAddress`.

    The SDK's own answers to a malformed address are a ``ValueError`` traceback ("invalid
    international domain name"), a deprecation warning (``http://...``) or, for a missing
    port, an attempt on port 80 that reads as "no server answers": checking the text first
    turns each into one line naming the address and what to write instead.
    """
    where = f"the address {address!r} (--address or ${ADDRESS_ENV})"
    text = address.strip()
    if "://" in text:
        scheme, _, rest = text.partition("://")
        bare = rest.split("/", 1)[0]
        raise BadAddress(
            f"{where} has a scheme ({scheme}://); a Temporal address is HOST:PORT without "
            f"one: write {bare or 'HOST:PORT'}"
        )
    if not text or any(c.isspace() for c in text):
        raise BadAddress(f"{where} is not HOST:PORT; {_ADDRESS_FIX}")
    if text.startswith("["):
        close = text.find("]")
        host, rest = (text[1:close], text[close + 1 :]) if close > 0 else ("", text)
        if not _is_ip_v6(host):
            raise BadAddress(f"{where} is not [IPv6]:PORT; {_ADDRESS_FIX}")
        if not rest.startswith(":"):
            raise BadAddress(f"{where} has no port; write [{host}]:7233 (the dev server's port)")
        port = rest[1:]
    else:
        if text.count(":") > 1:
            raise BadAddress(
                f"{where} looks like an IPv6 address without brackets; write [HOST]:PORT, e.g. "
                "[::1]:7233"
            )
        host, sep, port = text.rpartition(":")
        if not sep:
            raise BadAddress(f"{where} has no port; write {text}:7233 (the dev server's port)")
        if not _HOST_NAME.fullmatch(host):
            raise BadAddress(f"{where} does not start with a host name; {_ADDRESS_FIX}")
    if not (port.isdigit() and 1 <= int(port) <= 65535):
        raise BadAddress(f"{where} has no valid port (1-65535) after the colon; {_ADDRESS_FIX}")
    return text


def _is_ip_v6(text: str) -> bool:
    import ipaddress

    try:
        ipaddress.IPv6Address(text)
    except ValueError:
        return False
    return True


def default_address() -> str:
    """``$TEMPORAL_ADDRESS``, else the dev server's ``127.0.0.1:7233``."""
    return os.environ.get(ADDRESS_ENV) or DEFAULT_ADDRESS


def default_namespace() -> str:
    """``$TEMPORAL_NAMESPACE``, else ``default``."""
    return os.environ.get(NAMESPACE_ENV) or DEFAULT_NAMESPACE


def default_ui_url(address: str) -> str | None:
    """``$TEMPORAL_UI_URL`` (empty: no UI links), else the dev server's UI for a loopback
    address (its port + 1000), else None: a guess for a remote server would be a wrong link."""
    explicit = os.environ.get(UI_URL_ENV)
    if explicit is not None:
        return explicit.rstrip("/") or None
    host, _, port = address.rpartition(":")
    if host in _LOOPBACK and port.isdigit():
        return f"http://{host}:{int(port) + DEV_UI_PORT_OFFSET}"
    return None


def workflow_url(ui_url: str, namespace: str, workflow_id: str) -> str:
    """The web UI page of one workflow (ids of child plans hold ``/``, so they are quoted)."""
    return f"{ui_url.rstrip('/')}/namespaces/{quote(namespace, safe='')}/workflows/" + quote(
        workflow_id, safe=""
    )


def add_server_arguments(parser: argparse.ArgumentParser, *, ui: bool = False) -> None:
    """``--address`` (alias ``--target``), ``--namespace`` and, with ``ui``, ``--ui-url``."""
    parser.add_argument(
        "--address",
        "--target",
        dest="address",
        metavar="HOST:PORT",
        default=default_address(),
        help=f"Temporal server (default: ${ADDRESS_ENV} or {DEFAULT_ADDRESS})",
    )
    parser.add_argument(
        "--namespace",
        default=default_namespace(),
        help=f"namespace (default: ${NAMESPACE_ENV} or {DEFAULT_NAMESPACE})",
    )
    if ui:
        parser.add_argument(
            "--ui-url",
            metavar="URL",
            default=None,
            help=f"the web UI, for links (default: ${UI_URL_ENV}, else port + 1000 for a "
            "dev server on this machine; '' for none)",
        )


KEYS_ENV = "DURABLE_PLAN_KEYS"
"""The encryption keys (`protect.encryption`; repeated here to keep this import cheap)."""


def add_encryption_argument(parser: argparse.ArgumentParser) -> None:
    """``--encrypt/--no-encrypt``: seal payloads with ``$DURABLE_PLAN_KEYS`` (default: on
    when it is set); pass the value to `connect` as ``encrypt``."""
    parser.add_argument(
        "--encrypt",
        action=argparse.BooleanOptionalAction,
        default=None,
        help=f"seal every payload (plan, arguments, results) with the keys in ${KEYS_ENV} and "
        "open sealed ones; --no-encrypt: never (default: on when the variable is set)",
    )


def unreachable_message(address: str, reason: str = "") -> str:
    """One line: which address did not answer, why, and how to start a server there."""
    why = f" ({reason})" if reason else ""
    if reason.lower() == UNRESOLVED.lower():
        host = address.rpartition(":")[0] or address
        return (
            f"no Temporal server answers at {address}{why}: check the host name {host!r}, or "
            f"point --address / {ADDRESS_ENV} at your server"
        )
    cli = _bundled_cli()
    bundled = f" or `{cli} server start-dev`" if cli else ""
    return (
        f"no Temporal server answers at {address}{why}: start one with `durable-plan dev`"
        f"{bundled}, or point --address / {ADDRESS_ENV} at yours"
    )


async def connect(
    address: str | None = None,
    *,
    namespace: str | None = None,
    timeout_s: float = 10.0,
    check_namespace: bool = True,
    encrypt: bool | None = None,
    payload_storage: bool | str | None = None,
    **kwargs: Any,
) -> Client:
    """``Client.connect`` with the shared defaults; a server that does not answer within
    ``timeout_s`` raises `ServerUnreachable`, and (``check_namespace``, one more request) a
    namespace it does not have raises `NamespaceNotFound`: one line each, instead of the
    transport's traceback now or a worker's validation traceback later.

    ``kwargs`` go to ``Client.connect`` (``plugins``, ``tls``, ``data_converter`` ...).
    ``encrypt`` (the ``--encrypt`` option) adds `EncryptionPlugin` after ``plugins`` when
    there are keys; keys that cannot be used raise `ServerSetupError` too.
    ``payload_storage``: large payloads through Temporal's External Storage
    (``protect/payload_storage.py``; composes with encryption: only ciphertext is stored).
    None: as the environment says, alike in every process (on when ``$DURABLE_PLAN_STORE``
    is set or ``DURABLE_PLAN_PAYLOAD_STORAGE=on``); True: on, at ``$DURABLE_PLAN_STORE`` or
    the default directory (a process that runs its own server and worker); a store (a
    directory or ``s3://bucket/prefix``): on, there; False: no storage plugin at all. Never
    chosen from how ``address`` is written. Off, a payload another process stored fails its
    workflow, naming it, instead of its workflow task failing forever.
    """
    from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
    from temporalio.client import Client
    from temporalio.service import RPCError, RPCStatusCode

    target = address or default_address()
    namespace = namespace or default_namespace()
    if payload_storage is not False:
        from durable_plan.protect.payload_storage import with_payload_storage

        kwargs["plugins"] = with_payload_storage(kwargs.get("plugins", ()), payload_storage)
    if encrypt is not False:
        from durable_plan.protect.encryption import EncryptionPlugin, KeyConfigError, keyring_for

        try:
            keys = keyring_for(encrypt)
        except KeyConfigError as exc:
            raise ServerSetupError(str(exc)) from None
        if keys is not None:
            kwargs["plugins"] = [*kwargs.get("plugins", ()), EncryptionPlugin(keys)]
    target = check_address(target)
    try:
        client = await asyncio.wait_for(
            Client.connect(target, namespace=namespace, **kwargs), timeout_s
        )
    except TimeoutError:
        raise ServerUnreachable(
            unreachable_message(target, f"no answer within {timeout_s:g} s")
        ) from None
    except RuntimeError as exc:
        if not str(exc).startswith("Failed client connect"):
            raise
        raise ServerUnreachable(unreachable_message(target, _reason(str(exc)))) from None
    if check_namespace:
        try:
            await client.workflow_service.describe_namespace(
                DescribeNamespaceRequest(namespace=namespace)
            )
        except RPCError as exc:
            if exc.status != RPCStatusCode.NOT_FOUND:
                raise
            raise NamespaceNotFound(
                f"the Temporal server at {target} has no namespace {namespace!r}: create it "
                f"(`temporal operator namespace create --address {target} "
                f"--namespace {namespace}`) or choose another with --namespace / {NAMESPACE_ENV}"
            ) from None
    return client


def _reason(text: str) -> str:
    """The OS's words from the SDK's transport error ("connection refused"), else its tail."""
    return transport_reason(text).lower()


def transport_reason(text: str) -> str:
    """Why the SDK could not connect, in the OS's words, from its nested transport error:
    ``Connection refused``, ``the host name does not resolve``, or the error's first line."""
    if "dns error" in text:
        return UNRESOLVED
    found = re.search(r'message: "([^"]+)"', text)
    if found:
        return found.group(1)
    found = re.search(r'ConnectError\("([^"]+)"', text)
    if found:
        return found.group(1)
    tail = text.removeprefix("Failed client connect:").strip().splitlines()[0]
    return tail if len(tail) <= 120 else tail[:117] + "..."


def _bundled_cli() -> str | None:
    """The `temporal` binary the `server` extra put next to this interpreter, as typed from
    the current directory (``.venv/bin/temporal``), or None if it is not installed."""
    from durable_plan.server.temporal_cli import find_temporal_cli

    path = find_temporal_cli()
    if path is None:
        return None
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)
