"""What the Temporal web UI shows of a plan that is not simply running: its status and details.

A plan workflow whose step failed returns its ``PlanResult`` normally, so Temporal shows
it COMPLETED, green, whatever the result says; a plan waiting for a person shows "No
Current Details" and looks idle. Two things fix that, both where operators look:

- the ``PlanStatus`` search attribute (Keyword): ``running``, ``awaiting_approval`` (a
  call awaits a person's decision), ``paused`` (a call is paused at a breakpoint, and none
  awaits a decision: an approvals queue filtering ``awaiting_approval`` keeps every plan
  it must answer), then
  one of ``ok``, ``failed`` (a step failed, or an ``exit`` step with status error),
  ``exited`` (an ``exit`` step with status success ended it early), ``rejected`` (the
  workflow refused the plan) or ``cancelled``. The workflow list shows it as a column and
  filters on it (``PlanStatus="failed"``). The plan keeps returning its ``PlanResult``
  (callers and the in-process runner's parity are unchanged): the status says what the
  result says, in the list.
- the workflow's current details (``workflow.set_current_details``, Markdown, read back by
  the built-in ``__temporal_workflow_metadata`` query): every call awaiting a person, with
  its tool, arguments' digest and the command that answers it (``approvals``) and every
  call paused at a breakpoint with the commands that answer it (``pauses``), drawn
  together by one ``PersonWaits`` from both desks' open calls, then the plan's outcome
  (the failed steps and their errors) once it ends. Nothing of it is in the history: it
  is asked of the worker, so it costs nothing per plan.

Upserting a search attribute the namespace has not registered fails the workflow task, and
Temporal retries it forever (``BadSearchAttributes``): a plan stuck, not ended. So a plan
upserts it only when its input says so (``Visibility.plan_status_attribute``), decided by
whoever starts it from what the namespace has registered (``status_attribute``): the
decision is recorded in the input, and a replay reads the same. Our dev servers always
register it (``server.devserver``); on another server, register it once with
``REGISTER_COMMAND``.

The summary (``static_summary``) is fixed when the workflow starts, so it keeps saying what
the plan is (its steps by level); what it is doing now is in the details. Workflow code.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, Final, Literal

from temporalio import workflow
from temporalio.common import SearchAttributeKey, SearchAttributePair, TypedSearchAttributes

from durable_plan.temporal.wire.ids import bounded_key

__all__ = [
    "PLAN_STATUS",
    "PLAN_STATUS_ATTRIBUTE",
    "REGISTER_COMMAND",
    "PersonWaits",
    "PlanStatus",
    "StatusBoard",
    "awaiting_details",
    "note_rejection",
    "outcome_details",
    "outcome_status",
    "set_details",
    "start_attributes",
    "workers_see_plan_status",
]

PLAN_STATUS_ATTRIBUTE: Final = "PlanStatus"
PLAN_STATUS = SearchAttributeKey.for_keyword(PLAN_STATUS_ATTRIBUTE)
REGISTER_COMMAND: Final = (
    "temporal operator search-attribute create --name PlanStatus --type Keyword"
)
"""Registers the attribute on a server of your own (our dev servers do it at start)."""

PlanStatus = Literal[
    "running", "awaiting_approval", "paused", "ok", "failed", "exited", "rejected", "cancelled"
]

MAX_CALLS_SHOWN = 10
"""Calls awaiting a person listed in the details (the rest are counted)."""
MAX_FAILURES_SHOWN = 5
MAX_ERROR_CHARS = 300
MAX_REJECTION_PROBLEMS = 8
MAX_REJECTION_BYTES = 2048
"""A rejection's record in the conversation's history: what a person needs to see why,
not the whole text the model got (that is in the next model call's input)."""
REJECTED_MEMO_KEY: Final = "rejected_plan"
MAX_DETAILS_CHARS = 4000
"""Details are answered by the worker, not kept in history: bounded all the same (an
outcome lists failures, a wait lists calls whose ids the model chose). Every text goes
through ``set_details``."""


def start_attributes() -> TypedSearchAttributes:
    """``search_attributes=`` of a plan started with the attribute on: ``running`` from its
    start event on, at no cost of an event of its own."""
    return TypedSearchAttributes([SearchAttributePair(PLAN_STATUS, "running")])


def set_details(text: str) -> None:
    """The workflow's current details, at most ``MAX_DETAILS_CHARS``: the one way this
    package sets them (a wait for a person, an outcome, what a wait gave way to), so the
    bound holds for every text, whoever wrote its parts."""
    if len(text) > MAX_DETAILS_CHARS:
        text = text[: MAX_DETAILS_CHARS - 1] + "…"
    workflow.set_current_details(text)


def _cut(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _code(text: str) -> str:
    """Inline code in Markdown: backticks inside would end it early."""
    return "`" + text.replace("`", "'") + "`"


def awaiting_details(
    calls: Sequence[tuple[str, str | None, str]],
    workflow_id: str,
    namespace: str,
    limit: int = MAX_DETAILS_CHARS,
) -> str:
    """Markdown naming every call awaiting a person: its id, tool, arguments' digest and
    the command that approves it (``calls``: id, tool, digest).

    Whole calls only, as many as fit in ``limit`` characters (at most ``MAX_CALLS_SHOWN``;
    the rest are counted): a command cut in the middle could not be pasted, and the ids
    (a model's ``toolUseId`` for a direct call) and the workflow id may be long."""
    head = f"**Awaiting approval**: {len(calls)} call{'s' * (len(calls) != 1)}"
    tail = [
        "",
        "Reject with `--reject --reason TEXT`; add `--address HOST:PORT` for a server other "
        "than 127.0.0.1:7233. `durable-plan show` lists the arguments.",
    ]
    namespace_flag = f" --namespace {namespace}" if namespace != "default" else ""
    room = limit - len(head) - sum(len(t) + 1 for t in tail) - 80  # "… more"
    shown: list[str] = []
    for call_id, tool, digest in calls[:MAX_CALLS_SHOWN]:
        tool_text = f" · tool {_code(tool)}" if tool else ""
        command = f"durable-plan approve {workflow_id} {call_id} --digest {digest}{namespace_flag}"
        entry = [
            f"- step {_code(call_id)}{tool_text} · digest {_code(digest)}  ",
            f"  approve: {_code(command)}",
        ]
        room -= sum(len(line) + 1 for line in entry)
        if room < 0:
            break
        shown.append(entry[0])
        shown.append(entry[1])
    lines = [head, "", *shown]
    left = len(calls) - len(shown) // 2
    if left:
        lines.append(f"- … and {left} more (`durable-plan show`)")
    return "\n".join(lines + tail)


def outcome_status(result: Any) -> PlanStatus:
    """The status of a plan that ran to its ``PlanResult``."""
    exited = result.exited
    if exited is not None and exited.get("status") == "success" and not result.failures:
        return "exited"
    return "ok" if result.ok else "failed"


def outcome_details(result: Any) -> str:
    """Markdown: how the plan ended (``PlanResult``), the failed steps first."""
    status = outcome_status(result)
    counts: dict[str, int] = {}
    for line in result.ledger:
        counts[line.status] = counts.get(line.status, 0) + 1
    tally = ", ".join(f"{n} {s}" for s, n in counts.items()) or "no steps"
    lines = [f"**Plan {status}**: {tally}", ""]  # a blank line: Markdown's list follows
    exited = result.exited
    if exited is not None:
        message = _cut(str(exited.get("message") or ""))
        lines.append(
            f"- exit step {_code(str(exited.get('step')))} "
            f"(status {exited.get('status')}){': ' + message if message else ''}"
        )
    failures = result.failures
    for line in failures[:MAX_FAILURES_SHOWN]:
        lines.append(
            f"- step {_code(line.id)} · tool {_code(line.tool)} failed: "
            f"{_cut(line.error or 'no error text')}"
        )
    if len(failures) > MAX_FAILURES_SHOWN:
        lines.append(f"- … and {len(failures) - MAX_FAILURES_SHOWN} more failed steps")
    if status == "ok" and result.returned:
        lines.append(f"- returned {_cut(', '.join(result.returned), 200)}")
    return "\n".join(lines).rstrip()


_WAITS: tuple[PlanStatus, ...] = ("running", "awaiting_approval", "paused")
"""The statuses of a plan still running, which a wait for a person may change."""


class PersonWaits:
    """One workflow's calls that wait for a person, of every kind (approvals, pauses): its
    current details are drawn from all of them at once, whichever desk changed.

    Each desk used to keep the details it found when its own first call opened and put
    them back when its last closed, so two desks open at once overwrote each other (a
    continue wiped a pending approval; a decision brought back a stale "Paused at"). Now
    one drawing: the desks' sections, each given an equal share of ``MAX_DETAILS_CHARS``.
    What the details were before any call waited is kept once, when the first call of
    either kind opens, and shown again when the last of both closes: a conversation is the
    user's own workflow, and its details are theirs."""

    def __init__(self) -> None:
        self._sections: list[tuple[Callable[[], bool], Callable[[int], str]]] = []
        self._before: str | None = None

    def add(self, has_open: Callable[[], bool], section: Callable[[int], str]) -> None:
        """A desk: whether it has calls open now, and its Markdown in at most N chars."""
        self._sections.append((has_open, section))

    def redraw(self) -> None:
        """The details after a call opened or closed, at any desk."""
        shown = [section for has_open, section in self._sections if has_open()]
        if not shown:
            if self._before is not None:
                set_details(self._before)
                self._before = None
            return
        if self._before is None:
            self._before = workflow.get_current_details()
        room = (MAX_DETAILS_CHARS - 2 * (len(shown) - 1)) // len(shown)
        set_details("\n\n".join(section(room) for section in shown))


class StatusBoard:
    """One plan workflow's status attribute and current details, changed only when they
    change (an upsert is an event in the plan's history)."""

    def __init__(self, upsert: bool) -> None:
        self.upsert = upsert
        self._status: str | None = None
        self._approvals = False
        self._pauses = False
        if upsert:
            self._status = workflow.info().typed_search_attributes.get(PLAN_STATUS)
            if self._status is None:  # an input that asked for it, started without it
                self.show("running")

    def show(self, status: PlanStatus) -> None:
        if self.upsert and status != self._status:
            self._status = status
            workflow.upsert_search_attributes([PLAN_STATUS.value_set(status)])

    def waiting(self, waiting: bool) -> None:
        """The approval desk's calls awaiting a person: some (True) or none (False)."""
        self._approvals = waiting
        self._person()

    def paused(self, paused: bool) -> None:
        """The pause desk's calls paused at a breakpoint: some (True) or none (False)."""
        self._pauses = paused
        self._person()

    def _person(self) -> None:
        """A wait for a person shows in the list, whichever desk holds it; a decision
        first (``awaiting_approval``), as an approvals queue filters on it."""
        if self._status in (None, *_WAITS):
            if self._approvals:
                self.show("awaiting_approval")
            else:
                self.show("paused" if self._pauses else "running")

    def ended(self, status: PlanStatus, details: str) -> None:
        self.show(status)
        set_details(details)


def note_rejection(call_id: str, problems: Sequence[str]) -> None:
    """A plan the conversation refused before it ran (no child workflow, one more model
    call) leaves a row in the conversation's history: a memo upsert (one event, no
    activity, no worker round trip) naming the tool call and its first problems, bounded
    (``MAX_REJECTION_BYTES``). The memo keeps the latest; the history keeps each."""
    kept = [_cut(p, MAX_ERROR_CHARS) for p in problems[:MAX_REJECTION_PROBLEMS]]
    # The toolUseId is the model's: cut (``bounded_key``), or the record outgrows its bound.
    record: dict[str, Any] = {"tool_call": bounded_key(call_id), "problems": kept}
    if len(problems) > len(kept):
        record["more_problems"] = len(problems) - len(kept)
    while kept and len(json.dumps(record)) > MAX_REJECTION_BYTES:
        kept.pop()
        record["more_problems"] = len(problems) - len(kept)
    workflow.upsert_memo({REJECTED_MEMO_KEY: record})


_by_queue: dict[tuple[str, str], bool] = {}
"""(namespace, task queue) -> every plan worker of this process there found ``PlanStatus``
registered when it started (``status_attribute.PlanStatusCheck`` notes each). Process
state read by workflow code: kept here, on the workflow's side, so the plan tool's body
reads it without loading the client that asked."""


def workers_see_plan_status(namespace: str, task_queue: str) -> bool:
    """Did every plan worker of this process polling ``task_queue`` of ``namespace`` find
    ``PlanStatus`` registered when it started? (None started there: no.) Workflow code
    knows both of its own; a queue's workers all talk to one server."""
    return _by_queue.get((namespace, task_queue), False)


def note_workers_see(namespace: str, task_queue: str, registered: bool) -> None:
    """A plan worker's finding as it starts (``status_attribute.PlanStatusCheck``)."""
    # One worker on a server without it is enough to say no: a conversation's workflow
    # task may run on any of them.
    key = (namespace, task_queue)
    _by_queue[key] = _by_queue.get(key, True) and registered
