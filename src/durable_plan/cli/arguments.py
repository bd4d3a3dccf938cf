"""What the subcommands' parsers share: the parser class, argument types, common options.

Several subcommands take the same server, encryption and `temporal` binary options, and
every one reports usage errors the same way; written once here, they cannot drift apart
between commands. Nothing here imports a command's module (see ``cli.main``).
"""

from __future__ import annotations

import argparse
import os
from typing import NoReturn, TypeAlias

from durable_plan.cli.commands import EXIT_BAD_INPUT, EXIT_CODES_HELP, TOOLS_ENV

SubParsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"

EXIT_SETUP = EXIT_BAD_INPUT  # the same code argparse uses for a usage error
KEYS_ENV = "DURABLE_PLAN_KEYS"  # protect.encryption.KEYS_ENV (not imported: it is slow)
TOOLS_HELP = (
    "the tools module: an importable module or a .py file whose `registry` (a ToolRegistry) "
    "or `tools` (a list) holds the tools; MODULE:NAME picks another attribute "
    f"(default: ${TOOLS_ENV})"
)

DOCS_BASE = "docs/"
"""Where every help text's documentation link points: the pages' paths in the repository.
No site is published yet (mkdocs.yml has no ``site_url``), and a path in the repository is
what a reader of a checkout or of GitHub can open; when the site is published, this becomes
its address (mkdocs.yml ``site_url``) and every link follows."""

COMMAND_DOCS: dict[str | None, str] = {
    None: "reference/cli.md",  # `durable-plan --help`
    "validate": "guides/cli.md#validating-plan-files",
    "graph": "guides/cli.md#pictures-of-plans",
    "run": "guides/cli.md",
    "show": "guides/cli.md#approvals-from-the-command-line",
    "approve": "guides/cli.md#approvals-from-the-command-line",
    "decide": "guides/cli.md#approvals-from-the-command-line",
    "worker": "guides/routing.md",
    "dev": "guides/deployment.md#development-server",
    "keygen": "guides/encryption.md",
    "codec-server": "guides/encryption.md",
    "sweep-store": "guides/large-payloads.md#large-results-by-reference",
    "replay": "guides/upgrading.md",
    "ui": "guides/console.md",
    "continue": "guides/breakpoints.md",
    "skip": "guides/breakpoints.md",
    "abort": "guides/breakpoints.md",
}
"""The page that explains each subcommand (a test holds that every subcommand has one and that
each page and heading exists)."""


def help_epilog(command: str | None) -> str:
    """The exit codes, then the link to the command's page: the last line of its --help."""
    page = COMMAND_DOCS.get(command, COMMAND_DOCS[None])
    return f"{EXIT_CODES_HELP}\n\ndocumentation: {DOCS_BASE}{page}"


class Parser(argparse.ArgumentParser):
    """Usage errors in one line with where to look, like every other error of the command
    line (argparse prints the whole usage first, which can wrap over many lines)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_SETUP, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def port_number(text: str) -> int:
    """A TCP port, 1-65535: a bigger one made the socket calls raise OverflowError."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number (1-65535)") from None
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a port number (1-65535)")
    return port


def port_or_zero(text: str) -> int:
    """A TCP port, or 0 for a free one the system picks."""
    return 0 if text.strip() == "0" else port_number(text)


def command_parser(
    subparsers: SubParsers, name: str, handler: str, *, help: str, description: str | None = None
) -> argparse.ArgumentParser:
    """A subcommand's parser; ``handler`` is "module:function" under durable_plan.cli.commands."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        name,
        help=help,
        description=description or help[0].upper() + help[1:] + ".",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=help_epilog(name),
    )
    p.set_defaults(handler=f"durable_plan.cli.commands.{handler}")
    return p


def add_server_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--address",
        default=os.environ.get("TEMPORAL_ADDRESS", "127.0.0.1:7233"),
        help="Temporal server HOST:PORT (default: $TEMPORAL_ADDRESS or %(default)s)",
    )
    p.add_argument(
        "--namespace",
        default=os.environ.get("TEMPORAL_NAMESPACE", "default"),
        help="namespace (default: $TEMPORAL_NAMESPACE or %(default)s)",
    )
    add_encryption_option(p)


def add_encryption_option(p: argparse.ArgumentParser) -> None:
    from durable_plan.server.connection import add_encryption_argument

    add_encryption_argument(p)


def add_temporal_cli_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--temporal-cli",
        metavar="PATH",
        help="the `temporal` binary (default: $TEMPORAL_CLI, this venv's bin, then PATH)",
    )
