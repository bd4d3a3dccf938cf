"""The pure state machine: which steps start, which are pruned or skipped, when it is done."""

from __future__ import annotations

import pytest

from durable_plan.language.plan import Join, OnError, StepStatus
from durable_plan.run.scheduler import Scheduler


def make(
    deps: dict[str, set[str]],
    *,
    join: dict[str, Join] | None = None,
    on_error: OnError = "fail_fast",
    max_parallel: int | None = None,
) -> Scheduler:
    return Scheduler(
        {sid: frozenset(d) for sid, d in deps.items()},
        order=list(deps),
        join=join,
        on_error=on_error,
        max_parallel=max_parallel,
    )


def finish(s: Scheduler, step: str, status: StepStatus = "ok") -> list[str]:
    s.done(step, status)
    return s.get_ready()


CHAIN = {"a": set(), "b": {"a"}, "c": {"b"}}
BRANCH = {
    "src": set(),
    "left": {"src"},
    "right": {"src"},
    "merge": {"left", "right"},
    "after": {"merge"},
}


def test_chain_hands_out_one_step_at_a_time() -> None:
    s = make(CHAIN)
    assert s.is_active()
    assert s.get_ready() == ["a"]
    assert s.get_ready() == []  # handed out once
    assert s.running == {"a"}
    assert finish(s, "a") == ["b"]
    assert finish(s, "b") == ["c"]
    assert finish(s, "c") == []
    assert not s.is_active()
    assert s.statuses == {"a": "ok", "b": "ok", "c": "ok"}
    assert s.running == frozenset()


def test_ready_steps_come_in_plan_order() -> None:
    s = make({"z": set(), "y": set(), "x": set(), "w": {"x", "z"}, "v": {"y"}})
    assert s.get_ready() == ["z", "y", "x"]
    s.done("x", "ok")
    s.done("y", "ok")
    s.done("z", "ok")
    assert s.get_ready() == ["w", "v"]


def test_order_defaults_to_the_deps_mapping() -> None:
    s = Scheduler({"b": frozenset(), "a": frozenset()})
    assert s.get_ready() == ["b", "a"]


def test_same_events_same_answers() -> None:
    def run() -> list[list[str]]:
        s = make(BRANCH)
        seen = [s.get_ready()]
        for step in ("src", "right", "left", "merge", "after"):
            seen.append(finish(s, step))
        return seen

    assert run() == run() == [["src"], ["left", "right"], [], ["merge"], ["after"], []]


@pytest.mark.parametrize("status", ["ok", "failed", "not_taken"])
def test_done_on_a_step_not_running_raises(status: StepStatus) -> None:
    s = make(CHAIN)
    with pytest.raises(ValueError, match="not running"):
        s.done("a", status)
    with pytest.raises(ValueError, match="not running"):
        s.done("b", status)
    s.get_ready()
    s.done("a", "ok")
    with pytest.raises(ValueError, match="not running"):
        s.done("a", "ok")


def test_join_all_not_taken_prunes_the_subtree() -> None:
    s = make(BRANCH)
    s.get_ready()
    assert finish(s, "src") == ["left", "right"]
    s.done("left", "not_taken", "when was false")
    assert finish(s, "right") == []
    assert not s.is_active()
    assert s.statuses["merge"] == "not_taken"
    assert s.statuses["after"] == "not_taken"
    assert s.reason("merge") == "depends on not_taken step 'left'"
    assert s.reason("left") == "when was false"
    assert s.reason("src") is None


def test_join_any_runs_when_one_input_ran() -> None:
    s = make(BRANCH, join={"merge": "any"})
    s.get_ready()
    finish(s, "src")
    s.done("left", "not_taken")
    assert s.get_ready() == []  # waits for every input to end
    assert finish(s, "right") == ["merge"]
    assert finish(s, "merge") == ["after"]
    assert finish(s, "after") == []
    assert s.statuses == {
        "src": "ok",
        "left": "not_taken",
        "right": "ok",
        "merge": "ok",
        "after": "ok",
    }


def test_join_any_all_inputs_not_taken() -> None:
    s = make(BRANCH, join={"merge": "any"})
    s.get_ready()
    finish(s, "src")
    s.done("left", "not_taken")
    assert finish(s, "right", "not_taken") == []
    assert s.statuses["merge"] == "not_taken"
    assert s.statuses["after"] == "not_taken"
    assert not s.is_active()


def test_join_any_with_every_input_ok_runs() -> None:
    s = make(BRANCH, join={"merge": "any"})
    s.get_ready()
    finish(s, "src")
    s.done("left", "ok")
    assert finish(s, "right") == ["merge"]


def test_join_any_failed_input_still_skips() -> None:
    s = make(BRANCH, join={"merge": "any"}, on_error="continue")
    s.get_ready()
    finish(s, "src")
    s.done("left", "ok")
    assert finish(s, "right", "failed") == []
    assert s.statuses["merge"] == "skipped"
    assert s.statuses["after"] == "skipped"
    assert s.reason("merge") == "depends on failed step 'right'"
    assert s.reason("after") == "depends on skipped step 'merge'"


def test_failed_input_wins_over_not_taken() -> None:
    s = make(BRANCH, on_error="continue")
    s.get_ready()
    finish(s, "src")
    s.done("left", "not_taken")
    finish(s, "right", "failed")
    assert s.statuses["merge"] == "skipped"


def test_fail_fast_skips_everything_not_started() -> None:
    s = make({"a": set(), "b": set(), "c": {"a"}, "d": {"b"}, "e": set()}, max_parallel=2)
    assert s.get_ready() == ["a", "b"]
    s.done("a", "failed")
    assert s.get_ready() == []
    assert s.statuses == {"a": "failed", "c": "skipped", "d": "skipped", "e": "skipped"}
    assert "on_error=fail_fast" in (s.reason("e") or "")
    assert s.is_active()  # b is still running and may finish
    assert s.running == {"b"}
    assert finish(s, "b") == []
    assert s.statuses["b"] == "ok"
    assert s.statuses["d"] == "skipped"
    assert not s.is_active()


def test_continue_skips_only_dependents() -> None:
    s = make(
        {"a": set(), "b": set(), "c": {"a"}, "d": {"c"}, "e": {"b"}, "f": {"d", "e"}},
        on_error="continue",
    )
    assert s.get_ready() == ["a", "b"]
    s.done("a", "failed")
    assert finish(s, "b") == ["e"]
    assert finish(s, "e") == []
    assert s.statuses == {
        "a": "failed",
        "b": "ok",
        "c": "skipped",
        "d": "skipped",
        "e": "ok",
        "f": "skipped",
    }
    assert not s.is_active()


def test_max_parallel_caps_running_steps() -> None:
    s = make({f"s{n}": set() for n in range(5)}, max_parallel=2)
    assert s.get_ready() == ["s0", "s1"]
    assert s.get_ready() == []
    assert finish(s, "s1") == ["s2"]
    assert len(s.running) == 2
    s.done("s0", "ok")
    s.done("s2", "ok")
    assert s.get_ready() == ["s3", "s4"]


def test_max_parallel_counts_only_running_steps() -> None:
    s = make({"a": set(), "b": set(), "c": set()}, max_parallel=1)
    assert s.get_ready() == ["a"]
    s.done("a", "not_taken")
    assert s.get_ready() == ["b"]


def test_not_taken_root_prunes_dependents_but_not_siblings() -> None:
    s = make({"a": set(), "b": {"a"}, "c": set()})
    assert s.get_ready() == ["a", "c"]
    s.done("a", "not_taken")
    assert finish(s, "c") == []
    assert s.statuses == {"a": "not_taken", "b": "not_taken", "c": "ok"}


def test_statuses_is_a_copy() -> None:
    s = make(CHAIN)
    s.get_ready()
    snapshot = s.statuses
    s.done("a", "ok")
    assert "a" not in snapshot


def test_empty_plan_is_not_active() -> None:
    s = Scheduler({})
    assert not s.is_active()
    assert s.get_ready() == []
