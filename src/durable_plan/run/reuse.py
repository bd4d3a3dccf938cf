"""A conversation's memory of steps that ended ok, so a repair plan need not repeat them.

When a plan fails halfway the model submits a corrected one. Running that plan
from scratch would repeat side effects, pay slow tools twice, and tempt the
model to copy large results into ``args``. So the plugin remembers, per agent,
every step that ended ok (``StepMemory``): its id, tool, a digest of the exact
arguments it ran with (canonical JSON after bindings) and its result. A later
plan's step with the same id, tool and digest is not run: ``PlanRun`` records it
``ok`` with the remembered result and marks it reused (``StepOutcome.reused_from``,
the number of the plan that ran it). A later plan may also read a remembered
result directly, as ``prior.<step id>``.

What may be reused (``reusable_tools``): registered tools whose owner left
``reuse=True`` (the default) and that need no person's approval. The default is
on because the danger reuse removes (a side effect done twice: a second charge,
a second email) is worse than the one it brings (an answer that is minutes old),
and the exact-arguments rule plus a fresh step id ("give it a new id to run it
again") keep the model in control. Tools whose answer changes over time opt out
with ``ToolRegistry.add(..., reuse=False)``; gated tools are never reused, so a
person's approval is never skipped; ``agent``, ``map`` and ``reduce`` steps
always run (a model's or many tools' work, each with its own rules). Their
results can still be read as ``prior.<id>``.

Bounds: ``StepMemory`` keeps at most ``max_steps`` entries and ``max_bytes`` of
result JSON. Past either bound the least recently used entries (ran or reused
longest ago) are forgotten: such a step simply runs again, and ``prior.<id>`` of
it is a check error naming what is still remembered. A single result larger
than ``max_bytes`` is not remembered at all.

Durably the memory lives in the plugin, which lives in the agent's workflow: it
is rebuilt on replay from the plan results in history, so it is deterministic
and survives a worker's death. Each plan's ``PlanInput.memory`` carries only the
entries that plan can use (``Recall``); the plan returns the entries it learned
under ``"remembered"`` in its result. Nothing here does I/O or reads a clock.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from durable_plan.check import CheckedPlan
from durable_plan.check.saved_plans import PLAN_TOOL_PREFIX as SAVED_PLAN_PREFIX
from durable_plan.language.digest import args_key as args_key
from durable_plan.language.digest import canonical_json as canonical_json
from durable_plan.language.options import ToolOptions
from durable_plan.language.plan import PlanResult
from durable_plan.language.step_path import SEPARATOR, StepPathError, parse

PRIOR = "prior"
"""The scope root of remembered results: ``prior.<step id>.<field>``."""
DEFAULT_MAX_STEPS = 64
DEFAULT_MAX_BYTES = 256 * 1024
"""Result JSON a conversation remembers. It travels (the part a plan can use) in each
plan's input and comes back in its result, so it stays well inside Temporal's 2 MiB
payload limit next to the plan itself."""
REMEMBERED_KEY = "remembered"
"""The key of a durable plan's result that carries the entries it learned."""


def reusable_tools(options: Mapping[str, ToolOptions]) -> frozenset[str]:
    """Tools whose steps may be reused: opted in (default) and needing no approval.

    ``options`` is the table with approval gates applied (``ApprovalPolicy.options``,
    or a durable plan's ``PlanInput.tools``), so every way a tool gets gated counts.
    """
    return frozenset(
        name for name, opts in options.items() if opts.reuse and not opts.requires_approval
    )


@dataclass(frozen=True)
class Remembered:
    """One step that ended ok in an earlier plan of the conversation.

    ``result_json`` keeps the tool's own key order (a data converter may sort
    object keys, and the model reads the order back). ``args_key`` is empty for
    a step that may never be reused (its result can still be read as ``prior``).
    """

    step: str
    tool: str
    args_key: str
    result_json: str
    plan: int
    """The plan that ran it: 1 for the conversation's first plan that ran."""

    @property
    def reusable(self) -> bool:
        return bool(self.args_key)

    @property
    def result(self) -> Any:
        return json.loads(self.result_json)

    @cached_property
    def size(self) -> int:
        """Bytes it counts against the memory's bound: its wire form as JSON (the result's
        text escaped inside it), an upper bound of what it adds to a payload."""
        return len(json.dumps(self.to_wire(), separators=(",", ":")))

    def to_wire(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "tool": self.tool,
            "args_key": self.args_key,
            "result_json": self.result_json,
            "plan": self.plan,
        }

    @classmethod
    def from_wire(cls, data: Any) -> Remembered:
        """Read one entry; anything malformed is a clear error, never a half-read entry."""
        if not isinstance(data, Mapping):
            raise TypeError(f"not a remembered step: {str(data)[:200]}")
        fields = ("step", "tool", "args_key", "result_json")
        if not all(isinstance(data.get(f), str) for f in fields) or not isinstance(
            data.get("plan"), int
        ):
            raise TypeError(f"not a remembered step: {str(data)[:200]}")
        return cls(data["step"], data["tool"], data["args_key"], data["result_json"], data["plan"])


class Recall:
    """What one plan run may reuse and read, and the number it runs under.

    Built by the plugin from its memory (``StepMemory.recall``) and, durably,
    sent in ``PlanInput.memory``; ``PlanRun`` consults it right after a step's
    arguments are resolved and before the step is invoked.
    """

    def __init__(
        self,
        entries: Iterable[Remembered],
        *,
        plan: int,
        reusable: Collection[str] = frozenset(),
        max_bytes: int = DEFAULT_MAX_BYTES,
    ) -> None:
        self.entries = {e.step: e for e in entries}
        self.plan = plan
        self.reusable = frozenset(reusable)
        self.max_bytes = max_bytes
        self.learned: list[Remembered] = []
        """Set by the in-process runner once the plan ends: the steps it ran ok."""
        self.nested: list[Remembered] = []
        """Steps of the saved plans this plan called that ended ok, named by their paths
        in this run (``e4/plan.fetch``): remembered with its own (``run/nested.py``), so a
        repair does not run them again even when the saved plan failed after them."""

    @property
    def prior_ids(self) -> frozenset[str]:
        """Step ids a plan may read as ``prior.<id>``."""
        return frozenset(self.entries)

    def key(self, tool: str, args: Mapping[str, Any]) -> str:
        """The digest to remember a step by, or "" if its tool may never be reused."""
        return args_key(args) if tool in self.reusable else ""

    def reuse(self, step_id: str, tool: str, key: str) -> Remembered | None:
        """The remembered step this one repeats exactly, if it may be reused."""
        if not key:
            return None
        entry = self.entries.get(step_id)
        if entry is None or entry.tool != tool or entry.args_key != key:
            return None
        return entry

    def prior_scope(self, ids: Iterable[str]) -> dict[str, Any]:
        """``{id: result}`` for the remembered steps a step reads as ``prior``."""
        return {sid: self.entries[sid].result for sid in ids if sid in self.entries}

    def learn(self, step_id: str, tool: str, key: str, result: Any) -> Remembered | None:
        """A step of this plan ended ok: its entry, or None if the result is too large."""
        text = json.dumps(result, separators=(",", ":"), ensure_ascii=False)
        entry = Remembered(step_id, tool, key, text, self.plan)
        return entry if entry.size <= self.max_bytes else None

    def to_wire(self) -> dict[str, Any]:
        """``PlanInput.memory``: the plan's number, the bound and the entries it can use."""
        return {
            "plan": self.plan,
            "max_bytes": self.max_bytes,
            "steps": [e.to_wire() for e in self.entries.values()],
        }

    @classmethod
    def from_wire(cls, data: Any, reusable: Collection[str]) -> Recall:
        """Read ``PlanInput.memory``; ``reusable`` comes from the plan's own tool table."""
        if not isinstance(data, Mapping) or not isinstance(data.get("plan"), int):
            raise TypeError(f"not a plan memory: {str(data)[:200]}")
        steps = data.get("steps")
        max_bytes = data.get("max_bytes")
        return cls(
            [Remembered.from_wire(s) for s in (steps if isinstance(steps, list) else [])],
            plan=data["plan"],
            reusable=reusable,
            max_bytes=max_bytes if isinstance(max_bytes, int) else DEFAULT_MAX_BYTES,
        )


def bounded(entries: Sequence[Remembered], max_bytes: int) -> list[Remembered]:
    """The entries, in order, that fit in ``max_bytes`` together (a plan's result stays
    under its limit: what does not fit is simply not remembered)."""
    kept: list[Remembered] = []
    total = 0
    for entry in entries:
        if total + entry.size <= max_bytes:
            kept.append(entry)
            total += entry.size
    return kept


class StepMemory:
    """A conversation's remembered steps, bounded by count and bytes (least recent go first).

    Owned by the plugin (one per agent). Deterministic: its content depends only
    on the plan results it was given, in order, so a workflow replaying its
    history rebuilds the very same memory.
    """

    def __init__(self, max_steps: int = DEFAULT_MAX_STEPS, max_bytes: int = DEFAULT_MAX_BYTES):
        if max_steps < 0 or max_bytes < 0:
            raise ValueError("max_steps and max_bytes must be 0 (off) or more")
        self.max_steps = max_steps
        self.max_bytes = max_bytes
        self._entries: dict[str, Remembered] = {}  # insertion order: least recent first
        self._bytes = 0
        self.forgotten = 0
        """Entries dropped so far to stay within the bounds."""

    @property
    def enabled(self) -> bool:
        return self.max_steps > 0 and self.max_bytes > 0

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, step_id: object) -> bool:
        return step_id in self._entries

    def get(self, step_id: str) -> Remembered | None:
        return self._entries.get(step_id)

    @property
    def ids(self) -> list[str]:
        return list(self._entries)

    @property
    def size(self) -> int:
        return self._bytes

    def recall(self, checked: CheckedPlan, *, plan: int, reusable: Collection[str]) -> Recall:
        """The part of the memory ``checked`` can use: entries it could reuse (same step
        id and tool, a reusable tool) and entries it reads as ``prior``."""
        wanted: dict[str, Remembered] = {}
        for sid, cs in checked.steps.items():
            entry = self._entries.get(sid)
            if entry is not None and entry.reusable and entry.tool == cs.step.tool:
                wanted[sid] = entry
            for read in cs.prior_reads:
                if read in self._entries:
                    wanted[read] = self._entries[read]
        for entry in self._entries.values():  # inside the saved plans its steps call
            top = saved_plan_caller(entry.step, checked)
            if top is not None and entry.reusable:
                wanted[entry.step] = entry
        return Recall(wanted.values(), plan=plan, reusable=reusable, max_bytes=self.max_bytes)

    def remember(self, learned: Iterable[Remembered], result: PlanResult) -> None:
        """Take in a finished plan: the steps it ran ok, and the ones it reused (which
        become the most recent again). Then forget the least recent past the bounds."""
        if not self.enabled:
            return
        for outcome in result.ledger:
            if outcome.reused_from is not None and outcome.id in self._entries:
                self._put(self._entries[outcome.id])
        self._take(learned)

    def entries(self) -> list[Remembered]:
        """Least recent first: what `restore` takes back in a conversation's next run."""
        return list(self._entries.values())

    def restore(self, entries: Iterable[Remembered], forgotten: int = 0) -> None:
        """Take back what `entries` gave, within this memory's own bounds (a new run may be
        given smaller ones: the least recent go first, as always)."""
        self.clear()
        self.forgotten = forgotten
        if self.enabled:
            self._take(entries)

    def _take(self, entries: Iterable[Remembered]) -> None:
        """Put each entry that fits, then forget the least recent past the bounds."""
        for entry in entries:
            if entry.size <= self.max_bytes:
                self._put(entry)
        while self._entries and (
            len(self._entries) > self.max_steps or self._bytes > self.max_bytes
        ):
            oldest = next(iter(self._entries))
            self._bytes -= self._entries.pop(oldest).size
            self.forgotten += 1

    def clear(self) -> None:
        """Forget everything (a new request to the agent: its plans run afresh)."""
        self._entries.clear()
        self._bytes = 0

    def _put(self, entry: Remembered) -> None:
        old = self._entries.pop(entry.step, None)
        if old is not None:
            self._bytes -= old.size
        self._entries[entry.step] = entry
        self._bytes += entry.size


def repair_hint(memory: StepMemory, result: PlanResult) -> str | None:
    """What a repair plan can keep from ``result``, in the words the model acts on."""
    ran = [o for o in result.ledger if o.status == "ok" and o.id in memory]
    if not ran:
        return None
    reusable = {o.id for o in ran if _is_reusable(memory.get(o.id))}
    reused = [o for o in ran if o.id in reusable]
    rerun = [o for o in ran if o.id not in reusable]
    lines = ["Repair: submit a corrected plan; the steps that ended ok are remembered."]
    if reused:
        names = ", ".join(f"{o.id} ({o.tool})" for o in reused)
        lines.append(
            f"- Not run again if the corrected plan keeps its id, tool and arguments (its "
            f"result is reused): {names}. Give a step a new id to run it again."
        )
    if rerun:
        names = ", ".join(f"{o.id} ({o.tool})" for o in rerun)
        lines.append(
            f"- Run again even then (the tool opted out of reuse or needs approval, or the "
            f"step is an agent, map or reduce): {names}."
        )
    example = ran[0].id
    lines.append(
        f'- Or read a remembered result directly, without a step: prior.<id>, e.g. "bind": '
        f'{{"x": "prior.{example}"}} (remembered: {", ".join(memory.ids)}).'
    )
    return "\n".join(lines)


def _is_reusable(entry: Remembered | None) -> bool:
    return entry is not None and entry.reusable


def saved_plan_caller(path: str, checked: CheckedPlan) -> str | None:
    """The step of ``checked`` whose saved-plan call ran the remembered step at ``path``
    (``e4/plan.fetch``, ``e1/do.3/plan.fetch``), or None: a step of the plan itself, or a
    step that calls no saved plan now (its tool or its body's is not a ``plan__*``)."""
    if SEPARATOR not in path:
        return None
    try:
        steps = parse(path)
    except StepPathError:
        return None
    cs = checked.steps.get(steps.step)
    if cs is None or steps.depth == 0:
        return None
    tools = (cs.step.tool, cs.body.tool if cs.body is not None else "")
    return steps.step if any(t.startswith(SAVED_PLAN_PREFIX) for t in tools) else None


def in_plan_order(entries: Iterable[Remembered], rank: Mapping[str, int]) -> list[Remembered]:
    """``entries`` in the order of the plan steps they belong to (a saved plan's steps by
    the step that called it, after the step itself): the memory's order for both runners."""
    return sorted(entries, key=lambda e: rank.get(parse(e.step).step, len(rank)))
