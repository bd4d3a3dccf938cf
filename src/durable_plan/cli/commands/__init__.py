"""The ``durable-plan`` subcommands, one module each, imported only when run.

``cli.parser`` builds the parsers (cheap) and ``cli.main`` imports a command's module
only when that command runs, so ``durable-plan --version`` and ``validate`` never pay for
Strands or the Temporal client. Commands report a failure the user can fix by
raising ``CommandError`` with one line and an exit code from below.
"""

from __future__ import annotations

DEFAULT_TASK_QUEUE = "durable-plan-cli"
"""The task queue of `durable-plan worker` and of `durable-plan run --no-worker`: not
``worker.py``'s ``durable-plan``, whose worker holds other tools. Two workers with different
tools on one queue take each other's steps and fail them ("Activity function ... is not
registered on this worker") until the right one happens to poll."""

TOOLS_ENV = "DURABLE_PLAN_TOOLS"
"""The default tools module of `validate`, `run` and `worker` (``--tools``)."""

EXIT_OK = 0
EXIT_FAILED = 1
"""The plan ran and failed; validate found problems; a decision was refused; a history does
not replay on this version."""
EXIT_BAD_INPUT = 2
"""Fix the command: usage, a plan file, --input values, the tools module, a workflow id
(also argparse's own code for a usage error)."""
EXIT_NO_SERVER = 3
"""No Temporal server: nothing answers at the address, or the dev server cannot start."""
EXIT_INTERRUPTED = 130

EXIT_CODES_HELP = """exit codes:
  0    success
  1    the plan failed (a step failed or it exited with an error); validate found problems;
       an approval was refused; a history does not replay
  2    bad input: usage, a missing or invalid plan file, bad --input values, a tools module
       that does not load, an unknown workflow id
  3    no Temporal server: nothing answers at --address, or the embedded dev server
       cannot start
  130  interrupted (Ctrl-C)"""


class CommandError(Exception):
    """A failure the user can fix: one line, printed without a traceback, and its exit code."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
