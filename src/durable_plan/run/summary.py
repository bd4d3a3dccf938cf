"""Two views of a finished plan: a table for people and a compact dict for the model.

The model needs the returned results and, when something went wrong, each
failure with its step and reason; it does not need durations of steps that
worked. People want the whole ledger at a glance.
"""

from __future__ import annotations

from typing import Any

from durable_plan.language.plan import PlanResult


def summarize(result: PlanResult) -> str:
    """A human-readable report: one line per step, by level, then what was returned."""
    counts: dict[str, int] = {}
    for outcome in result.ledger:
        counts[outcome.status] = counts.get(outcome.status, 0) + 1
    tally = ", ".join(f"{n} {status}" for status, n in counts.items())
    head = "ok" if result.ok else "FAILED"
    lines = [
        f"plan {head}: {len(result.ledger)} steps ({tally}), {len(result.levels)} levels, "
        f"{result.inference_passes_saved} model round trips saved"
        + (", final" if result.final else "")
    ]
    width = max(len(o.id) for o in result.ledger)
    tool_width = max(len(o.tool) for o in result.ledger)
    for outcome in sorted(result.ledger, key=lambda o: o.level):
        line = (
            f"  L{outcome.level} {outcome.id:<{width}}  {outcome.tool:<{tool_width}}  "
            f"{outcome.status:<9} {outcome.duration_ms:8.1f} ms"
        )
        if outcome.attempts > 1:
            line += f"  ({outcome.attempts} attempts)"
        if outcome.reused_from is not None:
            line += f"  (reused from plan {outcome.reused_from}, not run)"
        if outcome.error:
            line += f"  {outcome.error}"
        lines.append(line)
    if result.exited is not None:
        lines.append(f"exited: {result.exited['status']}: {result.exited['message']}")
    lines.append(f"returned: {', '.join(result.returned) or 'nothing'}")
    return "\n".join(lines)


def result_for_model(result: PlanResult) -> dict[str, Any]:
    """What the model reads back: results it asked for, and every step that did not run ok."""
    report: dict[str, Any] = {"status": "ok" if result.ok else "failed"}
    if result.exited is not None:
        report["exited"] = result.exited  # why the plan ended early
    report["returned"] = result.returned
    problems = [
        {"step": o.id, "tool": o.tool, "status": o.status, "error": o.error}
        for o in result.ledger
        if o.status != "ok"
    ]
    if problems:
        report["not_ok"] = problems
    reused = {o.id: o.reused_from for o in result.ledger if o.reused_from is not None}
    if reused:
        report["reused"] = reused  # step -> the earlier plan whose result it kept
    report["inference_passes_saved"] = result.inference_passes_saved
    return report


def failure_text(result: PlanResult, repair: str | None = None) -> str:
    """The message a model gets for a plan that ran but failed: each failure, the ledger,
    then ``repair``: what a corrected plan can keep (``reuse.repair_hint``)."""
    failed = [o for o in result.ledger if o.status == "failed"]
    lines = ["Plan ran but did not complete:"]
    if result.exited is not None:
        exited = result.exited
        lines.append(
            f"- the plan exited at step '{exited['step']}' ({exited['status']}): "
            f"{exited['message']}"
        )
    lines += [f"- step '{o.id}' ({o.tool}) failed: {o.error}" for o in failed]
    lines.append("Ledger:")
    lines += [
        f"- {o.id}: {o.status}"
        + (f" ({o.error})" if o.error and o.status != "failed" else "")
        + (f" (reused from plan {o.reused_from})" if o.reused_from is not None else "")
        for o in result.ledger
    ]
    if result.returned:
        lines.append(f"Results of steps that ran: {sorted(result.returned)}")
    if repair:
        lines.append(repair)
    return "\n".join(lines)
