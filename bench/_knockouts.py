"""Parts of a durable plan taken out of a replaying process, for ``bench.budget``.

Each patch removes one part's work from ``PlanWorkflow`` and leaves the commands the workflow
sends as they were, so a recorded history still replays (a replay checks commands, not
results, events or handler registrations). Only for a bench's own process: the package never
imports this, and a worker so patched would run plans unchecked, unwatched and unguarded.

- ``check``: the check of a plan is made once per distinct plan and input options in the
  process (the warm-up replays make it), then reused.
- ``events``: no step event is made or published.
- ``stream``: the Workflow Stream is not constructed (its five handler registrations); the
  stream's last wait at the end of the run is kept, so the workflow ends as it did. Implies
  ``events`` (there is no stream to publish to).
- ``admission``: every call may go at once (the histories the bench records never wait).
- ``result``: the first plan's bounded result is returned for every later one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from temporalio import workflow

from durable_plan.language.json_text import sorted_json

PARTS: tuple[str, ...] = ("check", "events", "stream", "admission", "result")


def take_out(parts: Iterable[str]) -> None:
    """Patch this process so replays skip ``parts``' work (``PARTS``)."""
    chosen = set(parts)
    unknown = chosen - set(PARTS)
    if unknown:
        raise ValueError(f"no part {sorted(unknown)[0]!r} to take out; parts: {', '.join(PARTS)}")
    if "stream" in chosen:
        chosen.add("events")
    for part in PARTS:
        if part in chosen:
            _PATCHES[part]()


def _replace(owner: object, name: str, new: object) -> None:
    """``owner.name = new``, refusing a name ``owner`` does not have: a part renamed in the
    package must fail the bench, not leave it counting a removal that removed nothing."""
    if name not in vars(owner):
        raise AttributeError(f"{owner!r} has no {name!r} to replace: update bench/_knockouts.py")
    setattr(owner, name, new)


def _check() -> None:
    # The plan workflow checks its input through ``plan_request.recorded_check``.
    import durable_plan.temporal.workflows.plan_request as plan_request

    made: dict[str, Any] = {}
    check_plan = getattr(plan_request, "check_plan")  # noqa: B009 (the name the workflow calls)

    def checked_once(plan: Any, **options: Any) -> Any:
        key = sorted_json([plan, {k: v for k, v in options.items() if k != "catalog"}])
        if key not in made:
            made[key] = check_plan(plan, **options)
        return made[key]

    _replace(plan_request, "check_plan", checked_once)


def _events() -> None:
    from durable_plan.run.events import Emitter

    def silent(self: Emitter, kind: str, **values: Any) -> None:
        return None

    _replace(Emitter, "emit", silent)


def _stream() -> None:
    from durable_plan.temporal.workflows.event_stream import PlanEventStream

    def no_stream(self: PlanEventStream) -> None:
        self.published = 0

    async def last_wait(self: PlanEventStream) -> None:
        await workflow.wait_condition(workflow.all_handlers_finished)

    _replace(PlanEventStream, "__init__", no_stream)
    _replace(PlanEventStream, "close", last_wait)


def _admission() -> None:
    from durable_plan.temporal.workflows.admission import Admission

    async def go(self: Admission, size: int, *, starts: bool = True, wanted: Any = None) -> str:
        if starts:
            self.running += 1
        return "go"

    _replace(Admission, "enter", go)


def _result() -> None:
    import durable_plan.temporal.workflows.plan_workflow as plan_workflow

    first: list[dict[str, Any]] = []
    bounded_payload = getattr(plan_workflow, "bounded_payload")  # noqa: B009

    def same_result(run: Any, request: Any, resolved: Any = None) -> dict[str, Any]:
        if not first:
            first.append(bounded_payload(run, request, resolved))
        return first[0]

    _replace(plan_workflow, "bounded_payload", same_result)


_PATCHES: dict[str, Callable[[], None]] = {
    "check": _check,
    "events": _events,
    "stream": _stream,
    "admission": _admission,
    "result": _result,
}
