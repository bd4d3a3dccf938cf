"""Nested step paths: built and read by one module, never by the order things finished."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from durable_plan.language.step_path import (
    MAX_DEPTH,
    StepPath,
    StepPathError,
    check_pattern,
    matches,
    parse,
    rooted,
    under,
)


def test_the_grammar_s_examples_build_and_read_back() -> None:
    assert str(StepPath.of("e1")) == "e1"
    inner = StepPath.of("e1").round(2).call("lookup")
    assert str(inner) == "e1/agent.2/lookup"
    assert str(StepPath.of("e1").item(3)) == "e1/do.3"
    assert str(StepPath.of("e1").item(3).round(2).call("lookup")) == "e1/do.3/agent.2/lookup"
    saved = StepPath.of("e4").saved_step("fetch").round(1).call("github__get_issue")
    assert str(saved) == "e4/plan.fetch/agent.1/github__get_issue"
    for path in (inner, saved):
        assert parse(str(path)) == path
    assert saved.step == "e4" and saved.depth == 1 and inner.depth == 0
    assert inner.parent() == StepPath.of("e1").round(2)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "starts with a step id"),
        ("E1", "starts with a step id"),
        ("e1/agent.0/x", "rounds count from 1"),
        ("e1/agent.x", "is not a segment"),
        ("e1/do.-1", "is not a segment"),
        ("e1/plan.Fetch", "is not a segment"),
        ("e1//x", "is not a segment"),
        ("e1/" + "/".join(["x"] * MAX_DEPTH), f"at most {MAX_DEPTH} segments"),
    ],
)
def test_a_wrong_path_says_which_segment_and_why(text: str, says: str) -> None:
    with pytest.raises(StepPathError, match=says):
        parse(text)


def test_patterns_match_within_a_segment_only() -> None:
    assert matches("e1/agent.*/charge*", "e1/agent.2/charge_card")
    assert matches("e1/agent.*/charge*", StepPath.of("e1").round(12).call("charge"))
    assert not matches("e1/agent.*/charge*", "e1/agent.2/refund")
    assert not matches("e1/*", "e1/agent.2/charge")  # * never crosses a /
    assert matches("e1", "e1") and not matches("e1", "e10")
    assert matches("*", "pay") and not matches("*", "e1/do.0")
    assert matches("e1/do.*", "e1/do.17")


@pytest.mark.parametrize("pattern", ["e1", "*", "e1/agent.*/charge*", "e*/do.*", "e1/plan.*/x"])
def test_a_pattern_that_can_match_is_kept(pattern: str) -> None:
    assert check_pattern(pattern) == pattern


@pytest.mark.parametrize("pattern", ["", "E1", "e1/agent.0/x", "e1/a.b", "e1/pl an"])
def test_a_pattern_that_can_never_match_is_refused(pattern: str) -> None:
    with pytest.raises(StepPathError):
        check_pattern(pattern)


segments = st.one_of(
    st.integers(1, 50).map(lambda n: ("round", n)),
    st.integers(0, 500).map(lambda n: ("item", n)),
    st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True).map(lambda s: ("saved", s)),
    st.from_regex(r"[A-Za-z0-9_-]{1,12}", fullmatch=True).map(lambda s: ("call", s)),
)


@given(st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True), st.lists(segments, max_size=10))
def test_every_built_path_reads_back_as_itself(step: str, parts: list[tuple[str, object]]) -> None:
    path = StepPath.of(step)
    for kind, value in parts:
        if kind == "round":
            path = path.round(int(str(value)))
        elif kind == "item":
            path = path.item(int(str(value)))
        elif kind == "saved":
            path = path.saved_step(str(value))
        else:
            path = path.call(str(value))
    assert parse(str(path)) == path
    assert matches(str(path), path)


def test_a_second_call_to_one_tool_in_a_round_has_its_own_path() -> None:
    first = StepPath.of("e1").round(2).call("charge")
    second = StepPath.of("e1").round(2).call("charge", nth=2)
    assert str(second) == "e1/agent.2/charge~2" and parse(str(second)) == second
    assert first != second
    # A pattern without ~ names every call to the tool; with it, only that one.
    assert matches("e1/agent.2/charge", second) and matches("e1/agent.*/charge*", second)
    assert matches("e1/agent.2/charge~2", second) and not matches("e1/agent.2/charge~2", first)
    assert check_pattern("e1/agent.*/charge~*") == "e1/agent.*/charge~*"
    with pytest.raises(StepPathError, match="is not a segment"):
        parse("e1/agent.2/charge~1")  # the first call has no ~


def test_under_and_hops_name_the_workflows_a_call_runs_in() -> None:
    assert str(under("", "e2")) == "e2"
    assert str(under("e4", "fetch")) == "e4/plan.fetch"
    assert parse("e1/do.3").index == 3 and parse("e1").index is None
    assert parse("e1").hops() == [] and parse("e1/do.3").hops() == []
    assert parse("e1/do.3/agent.2/x").hops() == [("agent", "e1/do.3")]
    deep = parse("e4/plan.fetch/agent.1/look")
    assert deep.hops() == [("plan", "e4"), ("agent", "fetch")]
    assert deep.within_run() == "fetch/agent.1/look"
    assert rooted("e4", "fetch/agent.1/look") == str(deep) and rooted("", "e1") == "e1"


def test_the_deepest_nesting_the_check_allows_is_a_path() -> None:
    """Four saved plans deep, each a map whose body is an agent calling the next: every
    level adds its step, an item, a round and a call (the review found 16 segments too few)."""
    path = StepPath.of("e1")
    for level in range(4):  # MAX_PLAN_DEPTH
        path = path.item(0).round(1).call(f"plan__p{level}").saved_step("s")
    path = path.item(0).round(1).call("look_up")  # the deepest plan's own call
    assert parse(str(path)) == path


def test_a_pattern_that_would_backtrack_is_matched_at_once() -> None:
    """A regex of ``[^/]*`` per ``*`` took minutes on this (holding the worker's GIL)."""
    pattern = "e1/" + "*a" * 30 + "*b"
    assert check_pattern(pattern) == pattern
    assert not matches(pattern, "e1/" + "a" * 120)
    assert matches(pattern, "e1/" + "a" * 40 + "b")


def test_a_pattern_longer_than_any_path_is_refused() -> None:
    with pytest.raises(StepPathError, match="at most"):
        check_pattern("e" + "1" * 600)
