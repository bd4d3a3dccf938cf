"""Recorded plan histories replay in other processes, under other hash seeds.

A worker that takes over a workflow replays its history in *its* process, whose
``PYTHONHASHSEED`` differs from the recording worker's. Anything the workflow
derives from a set's iteration order (``frozenset`` of step ids, say) then
differs between the two, and replay in the same process can never see it: the
seed is the same on both sides. That is how the ``steps`` scope that JSONata
sees was once built from ``CheckedStep.deps`` (a frozenset), so ``$keys(steps)``
and ``steps.*[0]`` answered differently on another worker and a ``when`` that
read them took another branch: a non-determinism error on takeover. The scope
is now built in plan order (``CheckedStep.ordered_deps``).

These tests record plans whose later steps read many dependencies dynamically
(``$keys(steps)``, ``steps.*``) and whose branches and arguments depend on the
scope's key order, then replay each history in subprocesses with several
``PYTHONHASHSEED`` values. Temporal's replay compares commands (which activity,
which id), not activity inputs, so each subprocess also reports the arguments
it recomputed for every step, and they must equal the inputs in the history.

The guard has teeth: the same history replayed in a subprocess whose scope order
is deliberately perturbed (reversed, or iterated from a frozenset as the old
code did) fails with a non-determinism error.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from temporalio.client import Client, WorkflowHistory

import durable_plan
from durable_plan import plan_worker
from durable_plan.language.plan import PlanResult
from durable_plan.tools.registry import ToolRegistry
from tests.durable.replay.test_replay import inc, run_and_fetch, statuses

ROOT = Path(__file__).resolve().parents[3]
SEEDS = ["0", "1", "12345", "random"]
SUBPROCESS_TIMEOUT_S = 60.0

# Plan order; a frozenset of these iterates in another order under seeds 0, 1 and 12345
# (seed 0: alpha, beta, kappa, omega, mid, zeta, gamma, delta).
IDS = ["zeta", "alpha", "mid", "beta", "omega", "kappa", "gamma", "delta"]
WORKERS = [f"w_{name}" for name in IDS]
# JSONata flattens arrays nested in [...]: an object keeps keys and values apart.
SCOPE_PROBE = "{'keys': $keys(steps), 'first': steps.*[0]}"


# -- tools (deterministic) ------------------------------------------------------------------


def tag(name: str, n: int) -> dict[str, Any]:
    """Return {"name": name, "n": n}."""
    return {"name": name, "n": n}


def echo(value: dict[str, Any]) -> dict[str, Any]:
    """Return ``value`` unchanged."""
    return value


def ordered(values: list[int]) -> dict[str, Any]:
    """Return the values with an order-sensitive checksum {"values", "weighted"}."""
    return {"values": values, "weighted": sum(n * v for n, v in enumerate(values, 1))}


def registry() -> ToolRegistry:
    return ToolRegistry([tag, echo, ordered, inc])


# -- plans: later steps read many dependencies, and their order matters ----------------------

SCOPE_ORDER = {
    "steps": [
        *({"id": sid, "tool": "tag", "args": {"name": sid, "n": n}} for n, sid in enumerate(IDS)),
        {"id": "gather", "tool": "echo", "after": IDS, "bind": {"value": SCOPE_PROBE}},
        {
            "id": "zeta_first",
            "tool": "tag",
            "after": IDS,
            "args": {"name": "zeta_first"},
            "bind": {"n": "$count($keys(steps))"},
            "when": "$keys(steps)[0] = 'zeta'",
        },
        {
            "id": "not_zeta",
            "tool": "tag",
            "after": IDS,
            "args": {"name": "not_zeta", "n": 0},
            "when": "$keys(steps)[0] != 'zeta'",
        },
        {
            "id": "report",
            "tool": "echo",
            "join": "any",
            "after": ["gather", "zeta_first", "not_zeta"],
            "bind": {"value": SCOPE_PROBE},
        },
    ],
    "returns": ["gather", "zeta_first", "report"],
}

FAN_OUT_IN = {
    "steps": [
        {"id": "src", "tool": "tag", "args": {"name": "src", "n": 1}},
        *(
            {"id": wid, "tool": "inc", "args": {"by": n}, "bind": {"value": "steps.src.n"}}
            for n, wid in enumerate(WORKERS)
        ),
        {"id": "merge", "tool": "ordered", "after": WORKERS, "bind": {"values": "steps.*.value"}},
        {
            "id": "lead",
            "tool": "inc",
            "after": WORKERS,
            "bind": {"value": "steps.*[0].value"},
            "when": "steps.*[0].value = steps.w_zeta.value",
        },
        {
            "id": "trail",
            "tool": "inc",
            "after": WORKERS,
            "args": {"value": 0},
            "when": "steps.*[0].value != steps.w_zeta.value",
        },
    ],
    "returns": ["merge", "lead"],
}

PLANS = {"scope_order": SCOPE_ORDER, "fan_out_in": FAN_OUT_IN}


def check_scope_order(result: PlanResult) -> None:
    assert statuses(result) == {
        **dict.fromkeys(IDS, "ok"),
        "gather": "ok",
        "zeta_first": "ok",
        "not_zeta": "not_taken",
        "report": "ok",
    }, result.ledger
    gather = {"keys": IDS, "first": {"name": "zeta", "n": 0}}
    assert result.returned == {
        "gather": gather,
        "zeta_first": {"name": "zeta_first", "n": 8},
        "report": {"keys": ["gather", "zeta_first"], "first": gather},
    }


def check_fan_out_in(result: PlanResult) -> None:
    assert statuses(result) == {
        "src": "ok",
        **dict.fromkeys(WORKERS, "ok"),
        "merge": "ok",
        "lead": "ok",
        "trail": "not_taken",
    }, result.ledger
    values = list(range(1, 9))  # src.n + by, in plan order
    weighted = sum(n * v for n, v in enumerate(values, 1))
    assert result.returned == {
        "merge": {"values": values, "weighted": weighted},
        "lead": {"value": 2},
    }


CHECKS = {"scope_order": check_scope_order, "fan_out_in": check_fan_out_in}


# -- replay in a subprocess -------------------------------------------------------------------

# argv: a JSON object {workflow id: history file}, and a perturbation: "none", "reversed"
# (the steps scope in reverse plan order) or "frozenset" (iterated from a frozenset of its
# keys, as the old code did). Prints one JSON line; exits 0 when every history replays,
# 1 when some does not, 2 when a perturbation never changed any scope's order.
REPLAY_SCRIPT = r"""
import asyncio, json, os, sys
from pathlib import Path

import durable_plan
from durable_plan import expressions
from durable_plan.run.engine import PlanRun
from durable_plan import PlanWorkflow
from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer

histories, perturb = json.loads(sys.argv[1]), sys.argv[2]
calls = {}  # workflow id -> step id -> the arguments this replay computed
current = {}
changed = 0

_next_calls = PlanRun.next_calls


def next_calls(self):
    made = _next_calls(self)
    for call in made:
        current[call.step_id] = call.args
    return made


PlanRun.next_calls = next_calls

if perturb != "none":
    _evaluate = expressions.evaluate

    def evaluate(expr, scope, **kwargs):
        global changed
        steps = scope["steps"]
        keys = list(steps)
        order = keys[::-1] if perturb == "reversed" else list(frozenset(keys))
        changed += order != keys
        return _evaluate(expr, {**scope, "steps": {k: steps[k] for k in order}}, **kwargs)

    expressions.evaluate = evaluate


async def main():
    global current
    failures = {}
    replayer = Replayer(workflows=[PlanWorkflow])
    for workflow_id, path in histories.items():
        current = calls[workflow_id] = {}
        history = WorkflowHistory.from_json(workflow_id, Path(path).read_text())
        result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
        if result.replay_failure is not None:
            failures[workflow_id] = repr(result.replay_failure)
    return failures


failures = asyncio.run(main())
print(json.dumps({
    "module": durable_plan.__file__, "failures": failures, "calls": calls, "changed": changed,
}))
sys.stdout.flush()
# os._exit: after a failed replay the SDK's native threads can abort interpreter
# finalization (PyGILState_Release); the report is out, so skip finalization.
os._exit(2 if perturb != "none" and not changed else 1 if failures else 0)
"""


@dataclass
class Replay:
    seed: str
    returncode: int
    failures: dict[str, str]
    calls: dict[str, dict[str, Any]]
    changed: int
    module: str
    output: str


def replay_in_subprocess(histories: dict[str, Path], *, seed: str, perturb: str = "none") -> Replay:
    env = {**os.environ, "PYTHONHASHSEED": seed}
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            REPLAY_SCRIPT,
            json.dumps({wid: str(path) for wid, path in histories.items()}),
            perturb,
        ],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=SUBPROCESS_TIMEOUT_S,
        check=False,
    )
    output = f"seed={seed} perturb={perturb} rc={proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    lines = proc.stdout.strip().splitlines()
    assert lines, output  # the script crashed before reporting
    report = json.loads(lines[-1])
    return Replay(
        seed,
        proc.returncode,
        report["failures"],
        report["calls"],
        report["changed"],
        report["module"],
        output,
    )


async def replay_under(histories: dict[str, Path], runs: list[tuple[str, str]]) -> list[Replay]:
    """Replay in one subprocess per (seed, perturbation), concurrently."""
    return await asyncio.gather(
        *(
            asyncio.to_thread(replay_in_subprocess, histories, seed=seed, perturb=perturb)
            for seed, perturb in runs
        )
    )


def recorded_inputs(history: WorkflowHistory) -> dict[str, Any]:
    """Step id -> the arguments in each ActivityTaskScheduled event (a ``StepRequest``)."""
    inputs: dict[str, Any] = {}
    for event in history.events:
        if event.HasField("activity_task_scheduled_event_attributes"):
            attrs = event.activity_task_scheduled_event_attributes
            request = json.loads(attrs.input.payloads[0].data)
            # The compact form (``"v": 2``) is scheduled with the step id as its id.
            assert request.get("step_id", attrs.activity_id) == attrs.activity_id
            inputs[attrs.activity_id] = request["args"]
    return inputs


async def record(
    client: Client, task_queue: str, workflow_id: str, tmp_path: Path, names: list[str]
) -> tuple[dict[str, Path], dict[str, WorkflowHistory]]:
    """Run each named plan on the dev server; write its history as JSON under tmp_path."""
    tools = registry()
    async with plan_worker(client, task_queue=task_queue, registry=tools):
        runs = await asyncio.gather(
            *(
                run_and_fetch(
                    client,
                    PLANS[name],
                    task_queue=task_queue,
                    workflow_id=f"{workflow_id}-{name}",
                    tools=tools,
                )
                for name in names
            )
        )
    files: dict[str, Path] = {}
    histories: dict[str, WorkflowHistory] = {}
    for name, (result, history) in zip(names, runs, strict=True):
        CHECKS[name](result)
        path = tmp_path / f"{name}.json"
        path.write_text(history.to_json())
        files[history.workflow_id] = path
        histories[name] = history
    return files, histories


# -- tests ------------------------------------------------------------------------------------


async def test_histories_replay_under_other_hash_seeds(
    client: Client, task_queue: str, workflow_id: str, tmp_path: Path
) -> None:
    files, histories = await record(client, task_queue, workflow_id, tmp_path, list(PLANS))
    inputs = {h.workflow_id: recorded_inputs(h) for h in histories.values()}
    assert inputs[histories["scope_order"].workflow_id]["gather"]["value"]["keys"] == IDS
    assert inputs[histories["fan_out_in"].workflow_id]["merge"]["values"] == list(range(1, 9))

    for replay in await replay_under(files, [(seed, "none") for seed in SEEDS]):
        assert replay.returncode == 0, replay.output
        assert replay.failures == {}, replay.output
        assert replay.module == durable_plan.__file__, replay.output  # this checkout's code
        # Replay checks commands, not inputs: every recomputed argument must match too.
        assert replay.calls == inputs, replay.output
        gather = replay.calls[histories["scope_order"].workflow_id]["gather"]
        assert gather["value"]["keys"] == IDS, replay.output


async def test_perturbed_scope_order_fails_replay(
    client: Client, task_queue: str, workflow_id: str, tmp_path: Path
) -> None:
    """The subprocess replay would have caught the frozenset-ordered scope."""
    files, histories = await record(client, task_queue, workflow_id, tmp_path, ["scope_order"])
    wid = histories["scope_order"].workflow_id
    # Seed 0 iterates a frozenset of IDS from 'alpha', so `$keys(steps)[0]` is not 'zeta'.
    control, reversed_, frozen = await replay_under(
        files, [("0", "none"), ("0", "reversed"), ("0", "frozenset")]
    )
    assert control.returncode == 0, control.output
    for replay in (reversed_, frozen):
        assert replay.changed > 0, replay.output
        assert replay.returncode == 1, replay.output
        assert list(replay.failures) == [wid], replay.output
        assert "nondetermin" in replay.failures[wid].lower(), replay.output
        assert replay.calls[wid]["gather"]["value"]["keys"] != IDS, replay.output
