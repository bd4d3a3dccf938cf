"""Control steps: ``map`` and ``reduce`` over lists known only at run time, and ``exit``.

A plan has a fixed shape; acting on each of N items would make the model read
the N items first, the round trip plans exist to save. ``map`` runs a step
template (``do``) once per item of a list that ``over`` yields at run time;
``reduce`` folds the items one after another into an accumulator; ``exit``
ends the plan early with a status and a message. Their syntax is the plan
language's own: ``over`` and ``initial`` come from ``bind`` (or literal
``args``), the template's ``bind`` and ``when`` also see ``item``, ``index``
and (in ``reduce``) ``accumulator``.

This module holds the contract and the checked body; ``items.py`` runs the
items (written once, driven by both runners); the scheduler owns ``exit``.
"""

from __future__ import annotations

MAP = "map"
REDUCE = "reduce"
EXIT = "exit"
LOOPS = frozenset({MAP, REDUCE})
CONTROL = frozenset({MAP, REDUCE, EXIT})

DEFAULT_CONCURRENCY = 4
MAX_CONCURRENCY = 16
"""Items of one map running at once: each is an activity (or an agent loop). Their
arguments are paced like steps' (at most ``max_task_bytes`` per workflow task)."""

MAX_ITEMS = 1_000
"""Items one map or reduce may run. Each item costs about six history events in the
plan's workflow, so 1,000 items stay well inside Temporal's 51,200-event limit (and the
plan's own 40,000-event guard); a longer list fails the step and says to split it."""

MAP_ARGS = ("over", "do", "concurrency")
REDUCE_ARGS = ("over", "initial", "do")
EXIT_ARGS = ("status", "message", "output")
BODY_FIELDS = ("tool", "args", "bind", "when", "timeout_s", "retries")
BODY_NAMES = {MAP: ("item", "index"), REDUCE: ("item", "index", "accumulator")}
ALL_BODY_NAMES = frozenset({"item", "index", "accumulator"})


_BODY = (
    "do is a step template: tool, args, bind, when, timeout_s, retries (its tool may be agent, "
    "not map, reduce or exit)"
)
MAP_RULES = (
    'How to write a map step: {"id": "<id>", "tool": "map", "bind": {"over": '
    '"steps.<id>.<list>"}, "args": {"do": {"tool": "<tool>", "bind": {"<arg>": '
    '"item.<field>"}}}}; a literal list may be args.over. '
    f"{_BODY}; its expressions also read item and index (as $item and $index inside a "
    "filter, e.g. steps.<id>.results[$index]). At most concurrency items run at once "
    f"(args.concurrency, default {DEFAULT_CONCURRENCY}, at most {MAX_CONCURRENCY}). The result "
    'is {"count", "results": [...], "failed", "not_taken"}, in input order; a false when in '
    'do leaves {"not_taken": ...} in its slot; under on_error continue a failed item\'s slot '
    'is {"error": ...}, under fail_fast the first failed item fails the step.'
)
REDUCE_RULES = (
    'How to write a reduce step: {"id": "<id>", "tool": "reduce", "bind": {"over": '
    '"steps.<id>.<list>"}, "args": {"initial": <first accumulator>, "do": {"tool": "<tool>", '
    '"bind": {"<arg>": "accumulator.<field>", "<arg2>": "item.<field>"}}}}. '
    f"{_BODY}; its expressions read item, index and accumulator, which starts at initial, "
    "and each item's result becomes the next accumulator (items run one after another). "
    'The result is {"count", "result"}; a failed item fails the reduce, whatever on_error says.'
)
EXIT_RULES = (
    'How to write an exit step: {"id": "<id>", "tool": "exit", "when": "<condition>", '
    '"args": {"status": "success" or "error", "message": "why the plan ends"}}; optional '
    '"bind": {"output": "<expression>"} (message may be bound too). When it runs, steps not '
    'started yet are skipped and the report says why; status "error" makes the plan failed '
    '(and not final), "success" keeps it clean. Its result is {"step", "status", "message", '
    '"output"}.'
)
KIND_RULES = {MAP: MAP_RULES, REDUCE: REDUCE_RULES, EXIT: EXIT_RULES}
"""Sent with a rejection that found a problem in such a step (``check.py``): the plan
tool's spec teaches only the kinds' minimal form, the model reads the rest here."""
