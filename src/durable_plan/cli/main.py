"""The `durable-plan` entry point: parse the command line, then run one command's handler.

The parser (``cli.parser``) names each handler as "module:function" under
`durable_plan.cli.commands`; `main` imports that module only when the command runs, so
`--version`, `--help` and `validate` answer without importing Strands or the Temporal client
(a second or more). Errors a user can fix end here as one line and an exit code.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Sequence

from durable_plan.cli.arguments import EXIT_SETUP, port_number, port_or_zero
from durable_plan.cli.commands import EXIT_INTERRUPTED, CommandError
from durable_plan.cli.parser import build_parser

__all__ = ["EXIT_BROKEN_PIPE", "EXIT_SETUP", "build_parser", "main", "port_number", "port_or_zero"]

Handler = Callable[[argparse.Namespace], int]

EXIT_BROKEN_PIPE = 141  # what a shell reports for a program ended by SIGPIPE


def _handler(name: str) -> Handler:
    module, _, function = name.partition(":")
    handler: Handler = getattr(importlib.import_module(module), function)
    return handler


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    name: str | None = getattr(args, "handler", None)
    if name is None:
        parser.print_help(sys.stderr)
        return EXIT_SETUP
    try:
        return _handler(name)(args)
    except CommandError as err:
        # A problem the user can fix: one line, no traceback.
        print(f"durable-plan: error: {err}", file=sys.stderr)
        return err.code
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader left (`durable-plan validate --json ... | head`): no traceback, and no
        # second one when Python flushes stdout at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
