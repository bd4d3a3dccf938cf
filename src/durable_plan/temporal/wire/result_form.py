"""The plan workflow's result on the wire: defaults left off for a client that reads them.

A plan's result is in its history once more, as the completion event: about 800 bytes for
an 8-step plan, of which a third repeated what every reader knows (``status: "ok"`` and
``attempts: 1`` on each line, each line's level beside the ``levels`` it comes from,
``final: false``, the model rounds saved that the ledger already says). The workflow
leaves those off; ``plan_result_of`` puts them back (and reads the full form unchanged), so
whoever reads a result (``PlanHandle.result``, a conversation's plan tool, the command
line) reads it through here.
"""

from __future__ import annotations

from typing import Any

from durable_plan.language.plan import PlanResult, rounds_saved

__all__ = ["compact_result", "expand_result", "plan_result_of"]

_LINE_DEFAULTS: dict[str, Any] = {"status": "ok", "attempts": 1}
"""What a compact ledger line leaves off when it holds. Fixed here, not read from
``StepOutcome``'s defaults: a result in flight must read back the same in a later version."""


def compact_result(payload: dict[str, Any]) -> dict[str, Any]:
    """``payload`` (the full form, as ``bounded_payload`` builds it) without what
    ``expand_result`` puts back exactly."""
    level_of = _levels_by_id(payload.get("levels"))
    ledger = []
    for line in payload["ledger"]:
        kept = {
            k: v
            for k, v in line.items()
            if not (k in _LINE_DEFAULTS and _LINE_DEFAULTS[k] == v)
            and not (k == "level" and level_of.get(line.get("id")) == v)
        }
        ledger.append(kept)
    out = {**payload, "ledger": ledger}
    if out.get("final") is False:
        del out["final"]
    saved = _rounds_saved(payload["ledger"], bool(payload.get("final")))
    if out.get("inference_passes_saved") == saved:
        del out["inference_passes_saved"]
    return out


def expand_result(raw: dict[str, Any]) -> dict[str, Any]:
    """The full form of a result in either form (the full form comes back unchanged)."""
    level_of = _levels_by_id(raw.get("levels"))
    ledger = []
    for line in raw.get("ledger") or []:
        if not isinstance(line, dict):
            ledger.append(line)  # not ours: the model's validation names it
            continue
        full = {**_LINE_DEFAULTS, **line}
        if "level" not in full and full.get("id") in level_of:
            full["level"] = level_of[full["id"]]
        ledger.append(full)
    out = {**raw, "ledger": ledger}
    final = bool(out.setdefault("final", False))
    if "inference_passes_saved" not in out:
        out["inference_passes_saved"] = _rounds_saved(ledger, final)
    return out


def plan_result_of(raw: Any) -> PlanResult:
    """A ``PlanResult`` from the plan workflow's result, in either form."""
    return PlanResult.model_validate(expand_result(raw) if isinstance(raw, dict) else raw)


def _levels_by_id(levels: Any) -> dict[Any, int]:
    if not isinstance(levels, list):
        return {}
    return {
        sid: index
        for index, level in enumerate(levels)
        if isinstance(level, list)
        for sid in level
        if isinstance(sid, str)
    }


def _rounds_saved(ledger: list[Any], final: bool) -> int:
    """The engine's count (``rounds_saved``) of full-form ledger lines."""
    ran = {
        line["level"]
        for line in ledger
        if isinstance(line, dict)
        and line.get("status") == "ok"
        and isinstance(line.get("level"), int)
    }
    return rounds_saved(ran, final)
