"""The tools of examples/plan_tools.py, with the storyteller on a worker of its own.

durable-plan worker --tools examples.routed_tools                       # plans, the rest
durable-plan worker --tools examples.routed_tools --tools-only --task-queue storyteller
"""

from __future__ import annotations

import os

from durable_plan import ToolRegistry
from examples.plan_tools import registry as every_tool

STORY_QUEUE = os.environ.get("DURABLE_PLAN_STORY_QUEUE", "storyteller")

registry = ToolRegistry()
# A rate-limited service behind its own credentials: its steps run on STORY_QUEUE only, at
# most 2 calls a second across every plan, at most 4 at once per worker of that queue.
registry.route("narrate_*", STORY_QUEUE)  # by pattern; tools added later follow it too
for tool in every_tool:
    if tool.name == "narrate_round":
        registry.add(tool.target, timeout_s=30, retries=2, max_per_second=2, max_concurrent=4)
    else:  # the same rules as in plan_tools
        options = tool.options
        registry.add(
            tool.target,
            timeout_s=options.timeout_s,
            retries=options.retries,
            requires_approval=options.requires_approval,
        )
