"""The tools of ``examples/plan_tools.py``, with the storyteller on a worker of its own.

``narrate_round`` stands for a tool that lives elsewhere (a GPU machine, a private
network, its own credentials) and calls a rate-limited service: its owner routes it to
the task queue ``storyteller`` (``$DURABLE_PLAN_STORY_QUEUE``) and holds it to 2 calls a
second across every plan. Two workers serve the plans, each its part of the tools::

    durable-plan worker --tools examples.routed_tools                       # plans, the rest
    durable-plan worker --tools examples.routed_tools --tools-only --task-queue storyteller
    durable-plan run examples/plans/party_round.yaml --tools examples.routed_tools \\
        --no-worker --input target=ogre

The plan is the same: the route is the owner's, and each step of ``narrate_round`` is
scheduled on ``storyteller`` whatever queue the plan runs on.
"""

from __future__ import annotations

import os

from durable_plan import ToolRegistry
from examples.plan_tools import (
    apply_damage,
    escalate_to_human,
    look_up_monster,
    narrate_round,
    notify,
    read_ticket,
    refund_payment,
    roll_attack,
    strike,
    tally_round,
    triage_ticket,
)

STORY_QUEUE = os.environ.get("DURABLE_PLAN_STORY_QUEUE", "storyteller")

registry = ToolRegistry()
registry.route("narrate_*", STORY_QUEUE)  # tools registered after a route follow it too
registry.add(narrate_round, timeout_s=30, retries=2, max_per_second=2, max_concurrent=4)
for _tool in (look_up_monster, roll_attack, apply_damage, tally_round, strike):
    registry.add(_tool, timeout_s=30, retries=2)
for _tool in (read_ticket, triage_ticket, escalate_to_human, notify):
    registry.add(_tool, timeout_s=30, retries=2)
registry.add(refund_payment, timeout_s=30, retries=0, requires_approval=True)

__all__ = ["registry"]
