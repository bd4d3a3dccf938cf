"""Which of the plan workflows' patches a plan's input already says are in effect.

``workflow.patched(id)`` answers True on a fresh run and records a marker with a
search-attribute update in its history: about 260 bytes per patch, 770 for the three every
plan asked (a third of what a plan's history carried beyond bare Temporal's, issue 31).
A client of this version knows the answer before the run starts: ``checked_input`` writes
``PlanInput.patch_level`` (``CURRENT_PATCH_LEVEL``), and workflow code takes every patch
numbered up to it as in effect without asking, so a new plan records no marker at all.

An input without the field (a history recorded before it, or a client from before) asks
each patch as it always did, so every recorded history replays as it ran (the release
corpora in ``tests/histories`` hold that). The level is part of the recorded input, so a
replay reads the same answer. A patch added later gets the next number and raises
``CURRENT_PATCH_LEVEL``; inputs written before it carry a lower level and ask it.

Workers of the release before this one may run such an input (they ignore the level, ask
each patch and record its marker): a replay here takes those markers where they were
recorded (``in_effect`` asks the patch while replaying), so a mixed fleet is safe in that
direction. The other direction is what this gives up: code of the release before this one,
replaying a plan this one started (a rollback), asks the patches, finds no marker and takes
the old path. Drain a queue, or pin plans to their build (Worker Deployments), before going
back. Workflow code.
"""

from __future__ import annotations

import weakref
from types import MappingProxyType
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from durable_plan.check.catalog import RETURN_SHAPES_PATCH
    from durable_plan.language.agent_step import ROUNDS_PATCH
    from durable_plan.temporal.messages import COMPACT_FORMS_LEVEL, SENDER_CHECKED_LEVEL

__all__ = [
    "CONVERSATION_PATCH",
    "CURRENT_PATCH_LEVEL",
    "MODEL_INPUT_PATCH",
    "OWNER_RULES_PATCH",
    "PATCH_NUMBERS",
    "STORAGE_RECORDED",
    "STORE_PER_RUN_PATCH",
    "conversation_patched",
    "in_effect",
    "recorded_fact",
]

OWNER_RULES_PATCH = "owner-rules"
"""Marks plans whose steps may only tighten the tool owner's rules (issue 9)."""
STORE_PER_RUN_PATCH = "store-per-run"
"""Marks plans whose stored results are keyed by their run's chain, not the workflow id."""
MODEL_INPUT_PATCH = "model-input-guard"
"""Marks agent steps that stop before a model call too large to send."""

PATCH_NUMBERS = MappingProxyType(
    {
        OWNER_RULES_PATCH: 1,
        ROUNDS_PATCH: 2,
        STORE_PER_RUN_PATCH: 3,
        RETURN_SHAPES_PATCH: 4,
        MODEL_INPUT_PATCH: 5,
    }
)
"""Each patch the plan and agent-step workflows ask, numbered in the order they were added;
never renumbered (recorded inputs carry the level)."""
CURRENT_PATCH_LEVEL = max(*PATCH_NUMBERS.values(), COMPACT_FORMS_LEVEL, SENDER_CHECKED_LEVEL)
"""What a client of this version writes: every patch above, the compact wire forms
(``COMPACT_FORMS_LEVEL``) and a plan checked by its sender (``SENDER_CHECKED_LEVEL``),
levels of their own: no patch is asked for them."""


def in_effect(patch_id: str, level: int) -> bool:
    """``workflow.patched(patch_id)``, unless the run's input says it is in effect (its
    client knew the patch, so the run started after it): then True, and nothing recorded."""
    number = PATCH_NUMBERS.get(patch_id)
    if number is not None and number <= level:
        if workflow.unsafe.is_replaying():
            # A worker of the release before this one may have run this input (it ignores
            # the level) and recorded the marker: a replay must take it where it was
            # asked, or the marker left over fails the replay. A history without it: False,
            # nothing recorded, and the level decides alike.
            workflow.patched(patch_id)
        return True
    return workflow.patched(patch_id)


CONVERSATION_PATCH = "conversation-after-0.1.0"
"""One marker for everything a conversation (the workflow a ``TemporalAgent`` with the plan
tool runs in, which is the user's own: no input of ours says what its client knew) does
differently from 0.1.0: plans one at a time (``plans-one-at-a-time``), the raised cap on an
agent step's rounds (``agent-rounds-32``), the hook relay v2 (``hook-relay-v2``), reading
back an ended plan's ledger (``recover-ledger``) and the demo's stream close. Each was a
``workflow.patched`` of its own: three to five ``core_patch`` rows per conversation in the
web UI, and ~260 bytes of history each. No release was published between them, so a
history either predates them all (0.1.0's: no marker, every old path, as the corpus in
``tests/histories`` replays) or has them all. (``return-shapes`` stays a marker of its own,
asked only when a tool's shape refuses a plan: shapes come from the tools' code, which may
declare one after a conversation ran.)"""


def conversation_patched() -> bool:
    """Does this conversation run past 0.1.0's ways (one marker, recorded at the first ask)?
    A 0.1.0 conversation replayed or resumed here keeps every old way: the first ask in its
    replay answers False, and the SDK keeps that answer for the run."""
    return workflow.patched(CONVERSATION_PATCH)


STORAGE_RECORDED = "payloads-stored"
"""Recorded when a conversation first needed to know that its workers store payloads
(External Storage) and they did: a model call over 2 MB then goes as a reference."""


def recorded_fact(marker_id: str, fact: bool) -> bool:
    """A fact about this process's workers, as the run that first asked it found it.

    Workflow code must not decide a command from process state (another worker, or
    `durable-plan replay`, may see another answer): the first ask of a run records a marker
    when ``fact`` is true, and every replay reads the marker, never the process. Asked only
    where the answer matters (so a run that never needs it records nothing)."""
    answers = _FIRST_ANSWERS.setdefault(workflow.instance(), {})
    if marker_id not in answers:
        # The first answer holds for the run: a first False records nothing, and a later
        # True would record a marker that a replay, whose first ask (replaying) already
        # answered False, never takes (the SDK keeps a patch's first answer per run).
        if workflow.unsafe.is_replaying() or fact:
            answers[marker_id] = workflow.patched(marker_id)
        else:
            answers[marker_id] = False
    return answers[marker_id]


_FIRST_ANSWERS: weakref.WeakKeyDictionary[Any, dict[str, bool]] = weakref.WeakKeyDictionary()
"""Per workflow instance (one per run; a replay makes its own): each fact's first answer."""
