"""The tool table the rolling-upgrade test starts plans with (the workers' own, in
``tests/support/versioned_worker.py``, have the same names and options)."""

from __future__ import annotations

from durable_plan.language.options import ToolOptions

registry = {
    "which_build": ToolOptions(timeout_s=10, retries=0),
    "hold": ToolOptions(timeout_s=10, retries=0, requires_approval=True),
}
