"""`durable-plan keygen` and `durable-plan codec-server`: keys for encrypted history, and the
endpoint that lets the web UI show it to a person who holds them."""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import threading
from datetime import UTC, datetime
from types import FrameType

from durable_plan.cli.commands import EXIT_BAD_INPUT, EXIT_OK, CommandError
from durable_plan.protect.encryption import KEYS_ENV, KeyConfigError, Keyring, new_key


def keygen(args: argparse.Namespace) -> int:
    """Print ``ID:BASE64KEY`` (or, with --rotate, the whole new ``$DURABLE_PLAN_KEYS``) on
    stdout alone, so ``export DURABLE_PLAN_KEYS="$(durable-plan keygen)"`` works."""
    current: Keyring | None = None
    if args.rotate:
        try:
            current = Keyring.from_env()
        except KeyConfigError as exc:
            raise CommandError(
                EXIT_BAD_INPUT, f"keygen --rotate appends to the current keys: {exc}"
            ) from None
    taken = set(current.ids) if current else set()
    key_id = args.id or _dated_id(taken)
    if key_id in taken:
        raise CommandError(
            EXIT_BAD_INPUT, f"keygen: {KEYS_ENV} already has a key {key_id!r}; pick another --id"
        )
    try:
        pair = new_key(key_id)
        keys = current.with_key(*pair) if current else Keyring((pair,))
    except KeyConfigError as exc:  # a bad --id, or one key more than a keyring holds
        raise CommandError(EXIT_BAD_INPUT, f"keygen: {exc}") from None
    print(keys.to_text(), flush=True)
    what = "all keys, newest last" if args.rotate else "a new key"
    print(
        f"keygen: {what}; the new key id is {key_id!r}. Give it to every worker, client and "
        f"codec server as {KEYS_ENV} (a secret: anyone holding it reads the histories)",
        file=sys.stderr,
    )
    return EXIT_OK


def _dated_id(taken: set[str]) -> str:
    """``kYYYYMMDD``, with ``-2``, ``-3``... for a second key the same day."""
    base = f"k{datetime.now(UTC):%Y%m%d}"
    key_id, n = base, 1
    while key_id in taken:
        n += 1
        key_id = f"{base}-{n}"
    return key_id


def codec_server(args: argparse.Namespace) -> int:
    """Serve /encode and /decode for the web UI until Ctrl-C or SIGTERM."""
    from durable_plan.protect.codec_server import DEFAULT_UI_ORIGINS, CodecServer

    try:
        keys = Keyring.from_env()
    except KeyConfigError as exc:
        raise CommandError(EXIT_BAD_INPUT, f"codec-server: {exc}") from None
    origins = args.ui_origin or list(DEFAULT_UI_ORIGINS)
    log = (lambda line: print(line, file=sys.stderr, flush=True)) if args.verbose else None
    try:
        server = CodecServer(
            keys,
            host=args.host,
            port=args.port,
            origins=origins,
            namespaces=args.namespace or None,
            allowed_hosts=args.allowed_host,
            log=log,
        )
    except OSError as exc:
        raise CommandError(
            EXIT_BAD_INPUT,
            f"codec-server: cannot listen on {args.host}:{args.port} ({exc.strerror}); "
            "pick another --port",
        ) from None

    # SIGTERM (docker stop) stops it like Ctrl-C; shutdown must come from another thread.
    def stop(signum: int, frame: FrameType | None) -> None:
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    namespaces = ", ".join(args.namespace) if args.namespace else "any"
    print(
        f"codec server: {server.url} (keys {', '.join(keys.ids)}; web UI origins "
        f"{', '.join(origins)}; namespaces {namespaces}). Set it as the UI's codec endpoint "
        f"(Data Encoder), or start the dev server with `durable-plan dev --ui-codec-endpoint "
        f"{server.url}`. Ctrl-C stops it",
        flush=True,
    )
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()
    return EXIT_OK
