"""The ``durable-plan`` command line: plan files, the commands, the live view.

``main`` builds the parsers without importing the package's heavy parts; a command's
module is imported only when it runs (``durable-plan --version`` answers at once).
"""

from durable_plan.cli.main import main

__all__ = ["main"]
