"""Shared plan cases: one table, run by the in-process runner and the durable runner.

Every case uses only tools from ``tests.support.case_tools``, is deterministic, and
asserts nothing about timing: where a failure must stop other steps, it is a
binding or condition failure (decided inside the plan, before any tool runs),
not a race between two tools.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from durable_plan.language.plan import StepStatus


@dataclass(frozen=True)
class PlanCase:
    """A plan, and what every runner must make of it."""

    name: str
    plan: dict[str, Any]
    statuses: dict[str, StepStatus]
    returned: dict[str, Any] | None
    final: bool
    errors: dict[str, tuple[str, ...]] = field(default_factory=dict)
    levels: list[list[str]] | None = None


def _step(sid: str, tool: str, **fields: Any) -> dict[str, Any]:
    return {"id": sid, "tool": tool, **fields}


GOBLIN = {"name": "goblin", "hp": 7, "armour": 15}
ATTACK = {"roll": 18, "hits": True, "damage": 6}
DAMAGE = {"hp_after": 1, "defeated": False}

GAME_MASTER_STEPS = [
    _step("lookup", "look_up_monster", args={"name": "goblin"}),
    _step("attack", "roll_attack", bind={"armour": "steps.lookup.armour"}),
    _step(
        "damage",
        "apply_damage",
        bind={"monster": "steps.lookup.name", "damage": "steps.attack.damage"},
    ),
]

DRAGON_PLAN: dict[str, Any] = {
    "steps": [{"id": "lookup", "tool": "look_up_monster", "args": {"name": "dragon"}}],
    "final": True,
}
"""A final plan whose one step fails (no dragon in the bestiary): the turn goes on. Run by
the plain agent (test_plugin_agent.py) and the durable one (test_plugin_temporal.py)."""

TREASURY = 'steps.triage.desk = "treasury"'


def _ticket_branch(threshold: float, **extra: Any) -> dict[str, Any]:
    """The seed's refund-or-escalate branch; ticket 7 scores 0.54 for treasury."""
    cond = f"{TREASURY} and steps.triage.confidence >= {threshold}"
    return {
        "steps": [
            _step("ticket", "read_ticket", args={"ticket_id": 7}),
            _step("triage", "triage_ticket", bind={"text": "steps.ticket.text"}),
            _step("refund", "refund_payment", bind={"ticket_id": "steps.ticket.id"}, when=cond),
            _step(
                "escalate",
                "escalate_to_human",
                bind={"ticket_id": "steps.ticket.id"},
                when=f"$not({cond})",
            ),
        ],
        "returns": ["refund", "escalate"],
        "final": True,
        **extra,
    }


def _notify(**fields: Any) -> dict[str, Any]:
    return _step(
        "notify",
        "notify",
        bind={"ticket_id": "steps.ticket.id", "outcomes": "[steps.refund, steps.escalate]"},
        **fields,
    )


def _with_steps(plan: dict[str, Any], *steps: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {**plan, "steps": [*plan["steps"], *steps], **fields}


def _branch_and_join(join: str | None) -> dict[str, Any]:
    fields = {"join": join} if join else {}
    return _with_steps(
        _ticket_branch(0.8),
        _notify(**fields),
        _step("archive", "echo", bind={"value": "steps.notify.count"}),
        returns=["escalate", "notify", "archive"],
    )


FAILURE_PLAN_STEPS = [
    _step("src", "echo", args={"value": {"n": 1}}),
    _step("bad", "echo", bind={"value": "steps.src.missing"}),
    _step("sibling", "echo", bind={"value": "steps.src.n"}),
    _step("after_sibling", "add", args={"a": 1}, bind={"b": "steps.sibling"}),
    _step("after_bad", "echo", bind={"value": "steps.bad"}),
]

COMBAT_ROUND_STEPS = [
    _step("log", "read_action_log", args={"round": 1}),
    *[
        _step(who, "get_character", bind={"name": f"steps.log.actions[{n}].player"})
        for n, who in enumerate(("aria", "bram", "cass"))
    ],
    *[
        _step(
            f"roll_{who}",
            "roll_check",
            bind={"name": f"steps.{who}.name", "bonus": f"steps.{who}.bonus"},
        )
        for who in ("aria", "bram", "cass")
    ],
    *[
        _step(
            f"hit_{who}",
            "resolve_action",
            args={"armour": 13},
            bind={
                "name": f"steps.roll_{who}.name",
                "total": f"steps.roll_{who}.total",
                "damage_die": f"steps.{who}.damage_die",
            },
        )
        for who in ("aria", "bram", "cass")
    ],
    _step(
        "tally",
        "tally_round",
        bind={"damages": "[steps.hit_aria.damage, steps.hit_bram.damage, steps.hit_cass.damage]"},
    ),
    _step(
        "narrate",
        "narrate_round",
        bind={"round": "steps.log.round", "total": "steps.tally.total", "hits": "steps.tally.hits"},
    ),
]

OK3: dict[str, StepStatus] = {"lookup": "ok", "attack": "ok", "damage": "ok"}

PLAN_CASES: list[PlanCase] = [
    # -- the seed's behaviours ----------------------------------------------------
    PlanCase(
        name="chain_of_3",
        plan={"steps": GAME_MASTER_STEPS, "final": True},
        statuses=OK3,
        returned={"lookup": GOBLIN, "attack": ATTACK, "damage": DAMAGE},
        final=True,
        levels=[["lookup"], ["attack"], ["damage"]],
    ),
    PlanCase(
        name="chain_returns_subset",
        plan={"steps": GAME_MASTER_STEPS, "returns": ["damage"], "final": True},
        statuses=OK3,
        returned={"damage": DAMAGE},
        final=True,
    ),
    PlanCase(
        name="chain_not_final",
        plan={"steps": GAME_MASTER_STEPS, "returns": ["lookup", "damage"]},
        statuses=OK3,
        returned={"lookup": GOBLIN, "damage": DAMAGE},
        final=False,
    ),
    PlanCase(
        name="async_tools_in_a_chain",
        plan={
            "steps": [
                _step("one", "async_echo", args={"value": {"v": "x"}}),
                _step("two", "async_echo", bind={"value": "steps.one.v & 'y'"}),
                _step("three", "concat", bind={"items": "[steps.one.v, steps.two, 'z']"}),
            ],
            "returns": ["three"],
        },
        statuses={"one": "ok", "two": "ok", "three": "ok"},
        returned={"three": "x+xy+z"},
        final=False,
    ),
    PlanCase(
        name="fan_out_fan_in_inline_array",
        plan={
            "steps": [
                _step("src", "echo", args={"value": {"armours": [15, 19, 10]}}),
                _step("a", "roll_attack", bind={"armour": "steps.src.armours[0]"}),
                _step("b", "roll_attack", bind={"armour": "steps.src.armours[1]"}),
                _step("c", "roll_attack", bind={"armour": "steps.src.armours[2]"}),
                _step(
                    "sum",
                    "total",
                    bind={"damages": "[steps.a.damage, steps.b.damage, steps.c.damage]"},
                ),
            ],
            "returns": ["sum"],
            "final": True,
        },
        statuses={"src": "ok", "a": "ok", "b": "ok", "c": "ok", "sum": "ok"},
        returned={"sum": {"total": 12}},
        final=True,
        levels=[["src"], ["a", "b", "c"], ["sum"]],
    ),
    PlanCase(
        name="seed_route_ticket",
        plan={
            "steps": [
                _step("ticket", "read_ticket", args={"ticket_id": 9}),
                _step("triage", "triage_ticket", bind={"text": "steps.ticket.text"}),
                _step(
                    "route",
                    "route_ticket",
                    bind={
                        "ticket_id": "steps.ticket.id",
                        "desk": "steps.triage.desk",
                        "urgent": "steps.triage.urgent",
                    },
                ),
            ],
            "returns": ["route"],
            "final": True,
        },
        statuses={"ticket": "ok", "triage": "ok", "route": "ok"},
        returned={"route": {"ticket_id": 9, "desk": "treasury", "priority": "high"}},
        final=True,
    ),
    PlanCase(
        name="when_threshold_0_5_refunds",
        plan=_ticket_branch(0.5),
        statuses={"ticket": "ok", "triage": "ok", "refund": "ok", "escalate": "not_taken"},
        returned={"refund": {"ticket_id": 7, "refunded": True}},
        final=True,
        errors={"escalate": ("when was false",)},
    ),
    PlanCase(
        name="when_threshold_0_8_escalates",
        plan=_ticket_branch(0.8),
        statuses={"ticket": "ok", "triage": "ok", "refund": "not_taken", "escalate": "ok"},
        returned={"escalate": {"ticket_id": 7, "queue": "humans"}},
        final=True,
    ),
    PlanCase(
        name="when_false_prunes_the_subtree",
        plan={
            "steps": [
                _step("n", "echo", args={"value": 3}),
                _step("big", "echo", args={"value": "big"}, when="steps.n > 10"),
                _step("after_big", "echo", bind={"value": "steps.big"}),
                _step("last", "echo", args={"value": 1}, after=["after_big"]),
            ],
            "final": True,
        },
        statuses={"n": "ok", "big": "not_taken", "after_big": "not_taken", "last": "not_taken"},
        returned={"n": 3},
        final=True,
        errors={"after_big": ("not_taken", "big"), "last": ("not_taken",)},
    ),
    PlanCase(
        name="join_all_default_propagates_not_taken",
        plan=_branch_and_join(None),
        statuses={
            "ticket": "ok",
            "triage": "ok",
            "refund": "not_taken",
            "escalate": "ok",
            "notify": "not_taken",
            "archive": "not_taken",
        },
        returned={"escalate": {"ticket_id": 7, "queue": "humans"}},
        final=True,
        errors={"notify": ("refund",)},
    ),
    PlanCase(
        name="branch_then_join_any",
        plan=_branch_and_join("any"),
        statuses={
            "ticket": "ok",
            "triage": "ok",
            "refund": "not_taken",
            "escalate": "ok",
            "notify": "ok",
            "archive": "ok",
        },
        returned={
            "escalate": {"ticket_id": 7, "queue": "humans"},
            "notify": {"ticket_id": 7, "message": "ticket 7: 1 action(s) taken", "count": 1},
            "archive": 1,
        },
        final=True,
    ),
    PlanCase(
        name="join_any_when_every_input_not_taken",
        plan={
            "steps": [
                _step("n", "echo", args={"value": 1}),
                _step("left", "echo", args={"value": "l"}, when="steps.n > 5"),
                _step("right", "echo", args={"value": "r"}, when="steps.n > 6"),
                _step("merge", "concat", bind={"items": "[steps.left, steps.right]"}, join="any"),
            ],
            "returns": ["merge"],
            "final": True,
        },
        statuses={"n": "ok", "left": "not_taken", "right": "not_taken", "merge": "not_taken"},
        returned={},
        final=True,
    ),
    PlanCase(
        name="join_any_after_a_failure_is_skipped",
        plan={
            "steps": [
                _step("n", "echo", args={"value": 1}),
                _step("left", "echo", args={"value": "l"}, when="steps.n > 5"),
                _step("right", "fail", args={"message": "right broke"}),
                _step("merge", "concat", bind={"items": "[steps.left, steps.right]"}, join="any"),
            ],
            "on_error": "continue",
            "final": True,
        },
        statuses={"n": "ok", "left": "not_taken", "right": "failed", "merge": "skipped"},
        returned={"n": 1},
        final=False,
        errors={"right": ("right broke",), "merge": ("right",)},
    ),
    PlanCase(
        name="fail_fast_tool_failure_skips_dependents",
        plan={
            "steps": [
                _step("boom", "fail", args={"message": "kaput"}),
                _step("next", "echo", bind={"value": "steps.boom"}),
                _step("last", "echo", args={"value": 1}, after=["next"]),
            ],
            "final": True,
        },
        statuses={"boom": "failed", "next": "skipped", "last": "skipped"},
        returned={},
        final=False,
        errors={"boom": ("kaput",)},
    ),
    PlanCase(
        name="fail_fast_skips_every_step_not_started",
        plan={"steps": FAILURE_PLAN_STEPS, "final": True},
        statuses={
            "src": "ok",
            "bad": "failed",
            "sibling": "skipped",
            "after_sibling": "skipped",
            "after_bad": "skipped",
        },
        returned={"src": {"n": 1}},
        final=False,
        errors={
            "bad": ("binding 'value' matched no value", "steps.src has keys n"),
            "sibling": ("plan stopped after 'bad' failed",),
            "after_bad": ("plan stopped after 'bad' failed",),
        },
    ),
    PlanCase(
        name="continue_skips_only_dependents",
        plan={"steps": FAILURE_PLAN_STEPS, "on_error": "continue", "final": True},
        statuses={
            "src": "ok",
            "bad": "failed",
            "sibling": "ok",
            "after_sibling": "ok",
            "after_bad": "skipped",
        },
        returned={"src": {"n": 1}, "sibling": 1, "after_sibling": 2},
        final=False,
        errors={"after_bad": ("bad",)},
    ),
    PlanCase(
        name="continue_tool_failure_returns_subset",
        plan={
            "steps": [
                _step("boom", "fail", args={"message": "kaput"}),
                _step("side", "add", args={"a": 2, "b": 3}),
                _step("side2", "add", args={"b": 10}, bind={"a": "steps.side"}),
                _step("child", "echo", bind={"value": "steps.boom"}),
            ],
            "returns": ["boom", "side2", "child"],
            "on_error": "continue",
        },
        statuses={"boom": "failed", "side": "ok", "side2": "ok", "child": "skipped"},
        returned={"side2": 15},
        final=False,
        errors={"boom": ("kaput",), "child": ("boom",)},
    ),
    # -- bindings and conditions --------------------------------------------------
    PlanCase(
        name="binding_matched_no_value",
        plan={
            "steps": [
                GAME_MASTER_STEPS[0],
                _step("attack", "roll_attack", bind={"armour": "steps.lookup.ac"}),
                GAME_MASTER_STEPS[2],
            ],
            "final": True,
        },
        statuses={"lookup": "ok", "attack": "failed", "damage": "skipped"},
        returned={"lookup": GOBLIN},
        final=False,
        errors={
            "attack": ("binding 'armour' matched no value: steps.lookup has keys name, hp, armour",)
        },
    ),
    PlanCase(
        name="binding_to_missing_step_result_field_of_list",
        plan={
            "steps": [
                _step("log", "read_action_log", args={"round": 1}),
                _step("who", "echo", bind={"value": "steps.log.actions.name"}),
            ]
        },
        statuses={"log": "ok", "who": "failed"},
        returned=None,
        final=False,
        errors={"who": ("matched no value", "player", "action", "target")},
    ),
    PlanCase(
        name="null_result_is_a_value_not_a_miss",
        plan={
            "steps": [
                _step("none", "nothing"),
                _step("copy", "echo", bind={"value": "steps.none"}),
                _step("obj", "echo", args={"value": {"x": None}}),
                _step("field", "echo", bind={"value": "steps.obj.x"}),
            ],
            "returns": ["copy", "field"],
        },
        statuses={"none": "ok", "copy": "ok", "obj": "ok", "field": "ok"},
        returned={"copy": None, "field": None},
        final=False,
    ),
    PlanCase(
        name="when_not_boolean",
        plan={
            "steps": [
                _step("n", "echo", args={"value": {"v": 1}}),
                _step("gated", "echo", args={"value": 2}, when="steps.n.v"),
            ]
        },
        statuses={"n": "ok", "gated": "failed"},
        returned={"n": {"v": 1}},
        final=False,
        errors={"gated": ("when must be true or false, got 1",)},
    ),
    PlanCase(
        name="when_matched_no_value_runs_neither_side",
        plan={
            "steps": [
                _step("ticket", "read_ticket", args={"ticket_id": 7}),
                _step("triage", "triage_ticket", bind={"text": "steps.ticket.text"}),
                _step(
                    "refund",
                    "refund_payment",
                    bind={"ticket_id": "steps.ticket.id"},
                    when="steps.triage.urgency",
                ),
                _step(
                    "escalate",
                    "escalate_to_human",
                    bind={"ticket_id": "steps.ticket.id"},
                    when="$not(steps.triage.urgency)",
                ),
            ],
            "returns": ["refund", "escalate"],
            "final": True,
        },
        statuses={"ticket": "ok", "triage": "ok", "refund": "failed", "escalate": "failed"},
        returned={},
        final=False,
        errors={
            "refund": ("when matched no value", "desk, confidence, urgent"),
            "escalate": ("when matched no value",),
        },
    ),
    PlanCase(
        name="non_json_result_fails_the_step",
        plan={
            "steps": [
                _step("odd", "not_json"),
                _step("after_odd", "echo", bind={"value": "steps.odd"}),
            ],
            "on_error": "continue",
        },
        statuses={"odd": "failed", "after_odd": "skipped"},
        returned={},
        final=False,
        errors={"odd": ("JSON",)},
    ),
    PlanCase(
        name="lookup_and_backquoted_references",
        plan={
            "steps": [
                _step("a", "echo", args={"value": {"x": 2}}),
                _step("b", "add", args={"b": 1}, bind={"a": "$lookup(steps, 'a').x"}),
                _step("c", "add", bind={"a": "steps.`b`", "b": "$$.steps.a.x"}),
                _step("note", "echo", args={"value": 0}, bind={}, when="'see steps.c' != ''"),
            ],
            "returns": ["c", "note"],
        },
        statuses={"a": "ok", "b": "ok", "c": "ok", "note": "ok"},
        returned={"c": 5, "note": 0},
        final=False,
        levels=[["a", "note"], ["b"], ["c"]],
    ),
    PlanCase(
        name="after_only_ordering",
        plan={
            "steps": [
                _step("second", "echo", args={"value": 2}, after=["first"]),
                _step("first", "echo", args={"value": 1}),
                _step("third", "concat", args={"items": ["x"]}, after=["first", "second"]),
            ],
            "final": True,
        },
        statuses={"second": "ok", "first": "ok", "third": "ok"},
        returned={"second": 2, "first": 1, "third": "x"},
        final=True,
        levels=[["first"], ["second"], ["third"]],
    ),
    # -- what the model reads: every object's keys in their own order ---------------
    PlanCase(
        # The tool's object ({"name", "hp", "armour"}) and the plan's literal one come back
        # as they were made; the SDK's default converter sorted both on the way through a
        # durable plan's input and result (the parity suite compares the JSON text).
        name="returned_objects_keep_their_key_order",
        plan={
            "steps": [
                GAME_MASTER_STEPS[0],
                _step("note", "echo", args={"value": {"zone": "north", "aisle": 4, "bin": "b"}}),
            ],
            "returns": ["note", "lookup"],
        },
        statuses={"lookup": "ok", "note": "ok"},
        returned={"note": {"zone": "north", "aisle": 4, "bin": "b"}, "lookup": GOBLIN},
        final=False,
    ),
    PlanCase(
        name="combat_round_three_players",
        plan={"steps": COMBAT_ROUND_STEPS, "returns": ["tally", "narrate"], "final": True},
        statuses={s["id"]: "ok" for s in COMBAT_ROUND_STEPS},
        returned={
            "tally": {"total": 18, "hits": 2},
            "narrate": {"text": "Round 1: 2 of 3 attacks land for 18 damage."},
        },
        final=True,
        levels=[
            ["log"],
            ["aria", "bram", "cass"],
            ["roll_aria", "roll_bram", "roll_cass"],
            ["hit_aria", "hit_bram", "hit_cass"],
            ["tally"],
            ["narrate"],
        ],
    ),
]

CASES_BY_NAME: dict[str, PlanCase] = {case.name: case for case in PLAN_CASES}
assert len(CASES_BY_NAME) == len(PLAN_CASES), "case names must be unique"
