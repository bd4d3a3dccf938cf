"""The saved-plan walk (``check/saved_plans.py``) visits each reached plan once, not once
per chain of calls reaching it: a registry of plans each calling every plan of the layer
below would otherwise cost fan-out to the power of the depth per calling step."""

from __future__ import annotations

from typing import Any

import pytest

from durable_plan.check import check_plan, saved_plans
from durable_plan.tools.registry import ToolRegistry

FAN_OUT = 6
LAYERS = 4


async def leaf(x: int) -> dict[str, Any]:
    """x back.

    Args:
        x: a number
    """
    return {"x": x}


def layered() -> ToolRegistry:
    """``l<layer>_<n>``: layer 1 calls ``leaf``, each higher layer every plan below."""
    reg = ToolRegistry([leaf])
    below = ["leaf"]
    for layer in range(1, LAYERS + 1):
        names = [f"l{layer}_{n}" for n in range(FAN_OUT)]
        for name in names:
            steps: list[dict[str, Any]] = [
                {"id": f"s{i}", "tool": f"plan__{t}"} for i, t in enumerate(below)
            ]
            if below == ["leaf"]:
                steps = [{"id": "s0", "tool": "leaf", "args": {"x": 1}}]
            reg.add_plan({"steps": steps, "returns": [steps[0]["id"]]}, name=name)
        below = names
    return reg


def test_each_saved_plan_is_walked_once(monkeypatch: pytest.MonkeyPatch) -> None:
    reg = layered()
    catalog = reg.catalog()
    walked: list[Any] = []
    real = saved_plans.calls_of

    def counting(plan: Any, cat: Any) -> list[tuple[str, str]]:
        walked.append(plan)
        return real(plan, cat)

    monkeypatch.setattr(saved_plans, "calls_of", counting)
    top = [f"plan__l{LAYERS}_{n}" for n in range(FAN_OUT)]
    check_plan({"steps": [{"id": f"c{i}", "tool": t} for i, t in enumerate(top)]}, catalog=catalog)
    # The plan itself, then each of the 24 saved plans once (per chain: 6 + 36 + 216 + 1296).
    assert len(walked) <= 1 + FAN_OUT * LAYERS, len(walked)
