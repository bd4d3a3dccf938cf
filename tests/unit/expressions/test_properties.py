"""Property-based tests: random plans, valid and invalid, never surprise the caller.

* ``check_plan`` returns a ``CheckedPlan`` or raises ``PlanRejected``, nothing else.
* ``execute_plan`` returns a ``PlanResult`` or raises ``PlanRejected``; when it
  raises, no tool was invoked.
* For valid plans every step ends ok, failed, skipped or not_taken, and every
  step that ran saw its dependencies land first.
* The scheduler, driven with random outcomes, never hands out a step twice,
  never exceeds max_parallel and always finishes.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from durable_plan.check import CheckedPlan, ToolCatalog, ToolSpec, check_plan
from durable_plan.language.errors import PlanRejected
from durable_plan.language.plan import PlanResult, StepStatus
from durable_plan.local.runner import execute_plan
from durable_plan.run.scheduler import Scheduler
from tests.support.helpers import examples

SETTINGS = settings(
    max_examples=examples(200),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    database=None,
)


@functools.cache
def one_in(odds: int) -> st.SearchStrategy[bool]:
    """True about once in ``odds`` draws (the rare value last: Hypothesis favours the first)."""
    return st.sampled_from([False] * (odds - 1) + [True])


@st.composite
def mostly(
    draw: st.DrawFn, common: st.SearchStrategy[Any], rare: st.SearchStrategy[Any], odds: int = 12
) -> Any:
    """``common``, except about one draw in ``odds`` from ``rare``."""
    return draw(rare) if draw(one_in(odds)) else draw(common)


VALID_IDS = ["a", "b", "c", "d", "e", "f"]
valid_ref = st.sampled_from(VALID_IDS)
ids = mostly(valid_ref, st.sampled_from(["A", "1x", "", "a-b", "x" * 33, "ok_2"]))
TOOLS = ["echo", "add", "fail", "not_json", "nothing", "slow"]
tools = mostly(st.sampled_from(TOOLS), st.sampled_from(["ehco", "delete_files", ""]))
CATALOG = ToolCatalog.of([*TOOLS, ToolSpec("delete_files", refused="needs approval")])

STATUSES = {"ok", "failed", "skipped", "not_taken"}

# {r} and {s} stand for step ids; an invalid template is refused by the checker.
VALID_TEMPLATES = [
    "steps.{r}",
    "steps.{r}.x",
    "steps.{r}.missing",
    "$lookup(steps, '{r}')",
    "steps.`{r}`.v",
    "[steps.{r}.x, steps.{s}.v]",
    "steps.{r}.x + steps.{s}.x",
    "'see steps.{r}'",
    "$$.steps.{r}.args",
    "$not(steps.{r}.v > 1)",
    "steps.{r}.v > 1",
    "steps.{r}.x = 1",
    "true",
    "false",
    "1",
    "null",
    "function($x) {{ $x }}",
    "[1..3]",
    "$now()",
]
INVALID_TEMPLATES = [
    "steps.*",
    "$lookup(steps, $x)",
    "$eval('1')",
    "$random()",
    "steps.{r}.x == 1",
    "!steps.{r}.x",
]
templates = mostly(
    st.sampled_from(VALID_TEMPLATES),
    st.one_of(st.sampled_from(INVALID_TEMPLATES), st.text(max_size=12)),
    odds=8,
)


@st.composite
def expressions(draw: st.DrawFn) -> str:
    template = draw(templates)
    r, s = draw(valid_ref), draw(valid_ref)
    try:
        return str(template.format(r=r, s=s))
    except (KeyError, IndexError, ValueError):  # random text with braces: use it as is
        return str(template)


literal_args = st.dictionaries(
    st.sampled_from(["value", "a", "b", "message"]),
    st.one_of(st.integers(-3, 3), st.text(max_size=3), st.none()),
    max_size=2,
)
binds = st.dictionaries(st.sampled_from(["value", "x", "y"]), expressions(), max_size=2)
joins = mostly(st.sampled_from(["all", "any"]), st.just("some"))
typos = st.sampled_from(["bnid", "whne", "afer", "extra"])
junk = st.one_of(st.integers(), st.text(max_size=3), st.none())


@st.composite
def raw_steps(draw: st.DrawFn) -> Any:
    if draw(one_in(41)):
        return draw(junk)
    step: dict[str, Any] = {"id": draw(ids), "tool": draw(tools)}
    if draw(st.booleans()):
        step["args"] = draw(literal_args)
    if draw(st.booleans()):
        step["bind"] = draw(binds)
    if draw(one_in(4)):
        step["when"] = draw(expressions())
    if draw(one_in(3)):
        step["after"] = draw(st.lists(ids, max_size=3))
    if draw(one_in(4)):
        step["join"] = draw(joins)
    if draw(one_in(16)):
        step[draw(typos)] = draw(st.integers())
    return step


step_lists = st.lists(raw_steps(), min_size=1, max_size=6)
on_errors = mostly(st.sampled_from(["fail_fast", "continue"]), st.just("stop"))
parallel = mostly(st.integers(1, 3), st.just(0))
not_a_plan: st.SearchStrategy[Any] = st.one_of(
    st.none(), st.integers(), st.text(max_size=5), st.just([])
)


@st.composite
def raw_plans(draw: st.DrawFn) -> Any:
    if draw(one_in(41)):
        return draw(not_a_plan)
    plan: dict[str, Any] = {"steps": [] if draw(one_in(20)) else draw(step_lists)}
    if draw(st.booleans()):
        plan["returns"] = draw(st.lists(ids, max_size=3))
    if draw(st.booleans()):
        plan["final"] = draw(st.booleans())
    if draw(st.booleans()):
        plan["on_error"] = draw(on_errors)
    if draw(one_in(4)):
        plan["max_parallel"] = draw(parallel)
    if draw(one_in(21)):
        plan["retrns"] = []
    return plan


@st.composite
def valid_plans(draw: st.DrawFn) -> dict[str, Any]:
    """Plans that pass the checks: acyclic by construction (deps on earlier steps only)."""
    n = draw(st.integers(1, 7))
    names = draw(st.permutations(VALID_IDS))[:n]
    steps = []
    for i, sid in enumerate(names):
        earlier = names[:i]
        has_earlier = bool(earlier)
        step: dict[str, Any] = {"id": sid, "tool": draw(st.sampled_from(TOOLS))}
        step["args"] = {"sid": sid}
        if has_earlier and draw(st.booleans()):
            refs = draw(st.lists(st.sampled_from(earlier), min_size=1, max_size=2))
            form = draw(st.sampled_from(["steps.{}", "steps.{}.x", "$lookup(steps, '{}')"]))
            step["bind"] = {f"v{k}": form.format(r) for k, r in enumerate(refs)}
        if has_earlier and draw(one_in(3)):
            step["after"] = draw(st.lists(st.sampled_from(earlier), max_size=2))
        if has_earlier and draw(one_in(3)):
            r = draw(st.sampled_from(earlier))
            step["when"] = draw(
                st.sampled_from([f"steps.{r}.x = 1", f"steps.{r}.x > 1", f"steps.{r}.x", "true"])
            )
        if draw(one_in(3)):
            step["join"] = "any"
        steps.append(step)
    plan: dict[str, Any] = {"steps": steps}
    plan["on_error"] = draw(st.sampled_from(["fail_fast", "continue"]))
    plan["final"] = draw(st.booleans())
    if draw(st.booleans()):
        plan["returns"] = draw(st.lists(st.sampled_from(names), max_size=3, unique=True))
    if draw(st.booleans()):
        plan["max_parallel"] = draw(st.integers(1, 3))
    return plan


class Tools:
    """Records every call; ends instantly (or after one loop turn for 'slow')."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.started: dict[str, int] = {}
        self.landed: dict[str, int] = {}
        self.clock = 0

    def tick(self) -> int:
        self.clock += 1
        return self.clock

    async def __call__(self, name: str, args: dict[str, Any]) -> Any:
        self.calls.append((name, args))
        sid = args.get("sid")
        if isinstance(sid, str):
            self.started[sid] = self.tick()
        try:
            if name == "fail":
                raise RuntimeError("planned failure")
            if name == "slow":
                await asyncio.sleep(0)
            if name == "not_json":
                return object()
            if name == "nothing":
                return None
            return {"x": 1, "v": 2, "args": args}
        finally:
            if isinstance(sid, str):
                self.landed[sid] = self.tick()


def _run(plan: Any, tools_: Tools, **kwargs: Any) -> PlanResult:
    return asyncio.run(execute_plan(plan, tools_, **kwargs))


@SETTINGS
@given(raw_plans(), st.booleans(), st.booleans())
def test_check_plan_returns_or_rejects(raw: Any, with_catalog: bool, durable: bool) -> None:
    try:
        checked = check_plan(raw, catalog=CATALOG if with_catalog else None, durable=durable)
    except PlanRejected as rejection:
        assert rejection.problems
        for problem in rejection.problems:
            assert problem.message and problem.fix
        return
    assert isinstance(checked, CheckedPlan)
    assert sorted(s for level in checked.levels for s in level) == sorted(checked.steps)


@SETTINGS
@given(raw_plans(), st.booleans())
def test_execute_plan_returns_or_rejects_without_invoking(raw: Any, with_catalog: bool) -> None:
    tools_ = Tools()
    try:
        result = _run(raw, tools_, catalog=CATALOG if with_catalog else None)
    except PlanRejected:
        assert tools_.calls == []
        return
    assert isinstance(result, PlanResult)
    assert {o.status for o in result.ledger} <= STATUSES
    assert [o.id for o in result.ledger] == [s["id"] for s in raw["steps"]]


@SETTINGS
@given(valid_plans())
def test_valid_plans_run_to_a_consistent_ledger(plan: dict[str, Any]) -> None:
    checked = check_plan(plan, catalog=CATALOG, durable=True)
    tools_ = Tools()
    result = _run(plan, tools_, catalog=CATALOG)
    status: dict[str, StepStatus] = {o.id: o.status for o in result.ledger}
    assert list(status) == [s["id"] for s in plan["steps"]]
    assert set(status.values()) <= STATUSES
    invoked = [args["sid"] for _, args in tools_.calls]
    assert len(invoked) == len(set(invoked)), "a step ran twice"
    for sid, cs in checked.steps.items():
        deps = cs.deps
        if status[sid] in ("skipped", "not_taken"):
            assert sid not in invoked
        if status[sid] == "ok":
            assert sid in invoked
            started = tools_.started[sid]
            ok_deps = [d for d in deps if status[d] == "ok"]
            if cs.step.join == "all":
                assert all(status[d] == "ok" for d in deps)
            else:
                assert all(status[d] in ("ok", "not_taken") for d in deps)
                assert ok_deps or not deps
            for d in ok_deps:
                assert tools_.landed[d] < started, f"{sid} started before {d} landed"
        if status[sid] == "not_taken":
            assert cs.when is not None or any(status[d] == "not_taken" for d in deps)
        if status[sid] == "skipped":
            assert plan["on_error"] == "fail_fast" or any(
                status[d] in ("failed", "skipped") for d in deps
            )
            assert "failed" in status.values()
    returns = plan.get("returns", list(status))
    assert set(result.returned) == {r for r in returns if status[r] == "ok"}
    clean = all(s in ("ok", "not_taken") for s in status.values())
    assert result.final == (plan["final"] and clean)
    assert result.ok == clean
    if plan.get("max_parallel") == 1:
        intervals = sorted((tools_.started[s], tools_.landed[s]) for s in invoked)
        for (_, end), (start, _) in itertools.pairwise(intervals):
            assert end < start


@st.composite
def dags(draw: st.DrawFn) -> tuple[dict[str, frozenset[str]], dict[str, Any]]:
    n = draw(st.integers(1, 10))
    names = [f"s{i}" for i in range(n)]
    deps = {
        name: frozenset(draw(st.lists(st.sampled_from(names[:i]), max_size=3)) if i else [])
        for i, name in enumerate(names)
    }
    join = {name: draw(st.sampled_from(["all", "any"])) for name in names}
    options = {
        "join": join,
        "on_error": draw(st.sampled_from(["fail_fast", "continue"])),
        "max_parallel": draw(st.one_of(st.none(), st.integers(1, 3))),
    }
    return deps, options


@SETTINGS
@given(dags(), st.randoms(use_true_random=False))
def test_scheduler_always_finishes_and_respects_its_rules(
    dag: tuple[dict[str, frozenset[str]], dict[str, Any]], rnd: Any
) -> None:
    deps, options = dag
    s = Scheduler(deps, **options)
    handed: list[str] = []
    running: list[str] = []
    for _ in range(10 * len(deps) + 10):
        ready = s.get_ready()
        handed += ready
        running += ready
        cap = options["max_parallel"]
        assert cap is None or len(running) <= cap
        for sid in ready:
            for d in deps[sid]:
                assert s.statuses[d] in ("ok", "not_taken")
            if options["join"][sid] == "all":
                assert all(s.statuses[d] == "ok" for d in deps[sid])
            else:
                assert not deps[sid] or any(s.statuses[d] == "ok" for d in deps[sid])
        if not running:
            break
        sid = running.pop(rnd.randrange(len(running)))
        s.done(sid, rnd.choice(["ok", "ok", "ok", "failed", "not_taken"]))
    assert not s.is_active()
    assert len(handed) == len(set(handed))
    assert set(s.statuses) == set(deps)
    assert set(s.statuses.values()) <= STATUSES
