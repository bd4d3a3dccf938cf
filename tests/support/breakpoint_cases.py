"""Tools, plans and model scripts for breakpoints and nested step paths, shared by the
in-process tests (``tests/unit/run/test_breakpoints_local.py``) and the dev-server ones
(``tests/durable/plans/test_breakpoints.py``), so both runners are held to one table."""

from __future__ import annotations

from typing import Any

from durable_plan.testing import ScriptedModel, TurnLike, call, turn
from durable_plan.testing.scripted_model import output
from durable_plan.tools.registry import ToolRegistry

CALLS: list[str] = []
"""Every tool call that ran, in order (a skipped or still paused call never appears)."""


async def fetch(n: int) -> dict[str, Any]:
    """Fetch a number.

    Args:
        n: the number

    Returns:
        {"n": int}
    """
    CALLS.append(f"fetch {n}")
    return {"n": n}


async def charge(cents: int) -> dict[str, Any]:
    """Charge a card.

    Args:
        cents: how much

    Returns:
        {"charged": int}
    """
    CALLS.append(f"charge {cents}")
    return {"charged": cents}


async def refund(cents: int) -> dict[str, Any]:
    """Refund a charge (a person approves it).

    Args:
        cents: how much

    Returns:
        {"refunded": int}
    """
    CALLS.append(f"refund {cents}")
    return {"refunded": cents}


PAY = {
    "description": "Charge a card twice.",
    "inputs": {
        "type": "object",
        "properties": {"cents": {"type": "integer"}},
        "required": ["cents"],
    },
    "steps": [
        {"id": "first", "tool": "charge", "bind": {"cents": "inputs.cents"}},
        {"id": "second", "tool": "charge", "bind": {"cents": "steps.first.charged + 1"}},
    ],
    "returns": ["second"],
}
"""A saved plan (``plan__pay``): its steps' paths are ``<caller's step>/plan.<step>``."""


def registry(*, gated: bool = True) -> ToolRegistry:
    tools = ToolRegistry([fetch, charge])
    if gated:
        tools.add(refund, requires_approval=True)
    tools.add_plan(PAY, name="pay")
    return tools


SAVED = {"steps": [{"id": "s", "tool": "plan__pay", "args": {"cents": 40}}]}


CHAIN = {
    "steps": [
        {"id": "a", "tool": "fetch", "args": {"n": 5}},
        {"id": "b", "tool": "charge", "bind": {"cents": "steps.a.n * 100"}},
        {"id": "c", "tool": "fetch", "bind": {"n": "steps.b.charged"}},
        {"id": "d", "tool": "fetch", "args": {"n": 7}},
    ]
}
"""``b`` reads ``a``; ``c`` depends on ``b`` (pruned when ``b`` is skipped); ``d`` is apart."""

MAP = {
    "steps": [
        {
            "id": "m",
            "tool": "map",
            "args": {
                "over": [1, 2, 3],
                "concurrency": 3,
                "do": {"tool": "charge", "bind": {"cents": "item"}},
            },
        }
    ]
}

ANSWER = {
    "type": "object",
    "required": ["total"],
    "properties": {"total": {"type": "integer"}},
}
AGENT_PROMPT = "charge twice then answer"
AGENT = {
    "steps": [
        {
            "id": "ag",
            "tool": "agent",
            "args": {
                "prompt": AGENT_PROMPT,
                "output_schema": ANSWER,
                "tools": ["fetch", "charge"],
                "max_iterations": 4,
            },
        }
    ]
}
AGENT_SCRIPT: list[TurnLike] = [
    call("fetch", n=1),
    # Two calls to one tool in one round: charge, then charge~2 (the order written).
    turn(call("charge", cents=10), call("charge", cents=20)),
    output({"total": 30}),
]
REFUND_PROMPT = "refund then answer"
REFUND_AGENT = {
    "steps": [
        {
            "id": "back",
            "tool": "agent",
            "args": {"prompt": REFUND_PROMPT, "output_schema": ANSWER, "tools": ["refund"]},
        }
    ]
}
"""An agent step whose tool call needs a person's approval (durable only)."""
SCRIPTS: dict[str, list[TurnLike]] = {
    AGENT_PROMPT: AGENT_SCRIPT,
    REFUND_PROMPT: [call("refund", cents=5), output({"total": 5})],
}


def scripted() -> ScriptedModel:
    return ScriptedModel(scripts=SCRIPTS)


def gated_chain() -> dict[str, Any]:
    """One step that needs a person's approval: paused at a breakpoint first."""
    return {"steps": [{"id": "r", "tool": "refund", "args": {"cents": 300}}]}
