"""The parity suite: one table of plans, both runners, the same ledger step by step.

(The shared cases of ``tests/support/plan_cases.py`` were compared here before in
``test_durable.py::test_shared_cases_match_in_process``; they are the first rows of the
table, now compared in full, attempts and errors included.)

Every case runs in-process (``execute_plan``) and durably (``start_plan`` on the dev
server, one worker for the whole table) with the same tools and the same scripted model;
status, order, attempts, errors, levels, ``returned`` and the exit must be equal, as the
JSON text the model reads: every object's keys in the tool's (or the plan's, or the
model's) own order. Durably the cases run twice: on a worker of the Strands client
(pydantic's converter) and on one of a plain client, whose converter (the SDK's default)
sorts every object's keys when it encodes a value: what a plan carries in its input and
its result, and an agent step's, travels as JSON text in its own order
(``messages.json_payload``). A difference is a bug, or one of the documented differences
below, each with a test of its own:

- durations differ (wall clock), so they are not compared;
- a durable tool's failure spends its retries as activity attempts, in-process a tool runs
  once (``attempts`` is compared for the cases here, where no tool is retried);
- approvals: durably a gated step waits for a decision (signal or update); in-process there
  is nobody to ask, so a plain ``execute_plan`` refuses a gated tool before the plan runs
  (``test_a_gated_tool_is_refused_in_process_and_waits_durably``); the plugin asks the
  Strands interrupt instead (``test_plugin_agent.py``);
- the in-process runner does not bound a tool's result (a plain agent holds it in memory);
  durably a result over ``max_result_bytes`` fails the step or goes to the result store
  (``test_durable.py::test_oversized_result_fails_the_step_with_its_size``).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
from temporalio.client import Client
from temporalio.strands_agents import StrandsPlugin

from durable_plan import model_worker, plan_worker, start_plan
from durable_plan.check import check_plan
from durable_plan.language.errors import PlanRejected
from durable_plan.language.plan import PlanResult
from durable_plan.local.runner import execute_plan, run_checked
from durable_plan.run.reuse import Recall, Remembered, args_key, reusable_tools
from durable_plan.testing import ScriptedModel, call
from durable_plan.testing.scripted_model import output
from durable_plan.tools.registry import ToolRegistry
from tests.support.case_tools import CASE_TOOLS
from tests.support.helpers import until_phase
from tests.support.plan_cases import PLAN_CASES

LATER_FAILURE_S = 1.0


async def numbers(n: int) -> dict[str, Any]:
    """The numbers 0..n-1.

    Args:
        n: how many
    """
    return {"values": list(range(n))}


async def square(x: int, fail_on: list[int] | None = None, after_s: float = 0.0) -> dict[str, Any]:
    """Square a number; fail on the listed ones.

    Args:
        x: the number
        fail_on: numbers that fail (all but the smallest after LATER_FAILURE_S)
        after_s: seconds to wait first
    """
    if after_s:
        await asyncio.sleep(after_s)
    if x in (fail_on or []):
        if x != min(fail_on or [x]):
            # Which of several concurrent failures stops a map is the first in time (ties:
            # item order). Durably, twelve activities finish in whatever order the worker
            # reports them, so the later failures come later for sure: the ledgers of the
            # two runners then compare by what the plan means, not by scheduling luck.
            await asyncio.sleep(LATER_FAILURE_S)
        raise ValueError(f"{x} is unlucky")
    return {"x": x, "sq": x * x}


async def delete_files(path: str) -> dict[str, Any]:
    """Delete files (needs approval).

    Args:
        path: what to delete
    """
    return {"deleted": path}


async def price(sku: str) -> dict[str, Any]:
    """A product's price, its keys not in alphabetical order: {"sku", "cents", "currency"}.

    Args:
        sku: the product
    """
    return {"sku": sku, "cents": 100 * len(sku), "currency": "EUR"}


def _registry() -> ToolRegistry:
    registry = ToolRegistry()
    for name, fn in CASE_TOOLS.items():
        registry.add(fn, name=name, retries=0)
    registry.add(numbers, retries=0)
    registry.add(square, retries=0)
    registry.add(price, retries=0)
    # A saved plan with a map of its own: called per item, it nests control steps.
    registry.add_plan(SQUARES_OF, name="squares_of")
    return registry


SQUARES_OF = {
    "inputs": {
        "type": "object",
        "properties": {"n": {"type": "integer"}, "bad": {"type": "integer", "default": -1}},
        "required": ["n"],
    },
    "steps": [
        {"id": "nums", "tool": "numbers", "bind": {"n": "inputs.n"}},
        {
            "id": "sq",
            "tool": "map",
            "bind": {"over": "steps.nums.values"},
            "args": {"do": {"tool": "square", "bind": {"x": "item", "fail_on": "[inputs.bad]"}}},
        },
    ],
    "returns": ["sq"],
}


REGISTRY = _registry()
SCRIPTS = {
    "Judge 2": [output({"even": True})],
    "Judge 3": [call("square", x=3), output({"even": False})],
    "Count to 3": [call("numbers", n=3), output({"count": 3})],
    "Make it up": [output({"count": "three"}), output({"count": "three"})],
    "Price the basket": [call("price", sku="tea"), output({"total": 300, "currency": "EUR"})],
    "Square through a plan": [call("plan__squares_of", n=2), output({"count": 2})],
}


def _map(n: int, fail_on: list[int], on_error: str, concurrency: int = 4) -> dict[str, Any]:
    return {
        "steps": [
            {"id": "nums", "tool": "numbers", "args": {"n": n}},
            {
                "id": "squares",
                "tool": "map",
                "bind": {"over": "steps.nums.values"},
                "args": {
                    "concurrency": concurrency,
                    "do": {"tool": "square", "args": {"fail_on": fail_on}, "bind": {"x": "item"}},
                },
            },
            {"id": "after", "tool": "echo", "bind": {"value": "steps.squares.count"}},
        ],
        "on_error": on_error,
    }


def _agent(prompt: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": "judge",
        "tool": "agent",
        "args": {"prompt": prompt, "output_schema": schema, "tools": ["numbers", "square"]},
    }


@dataclass(frozen=True)
class ParityCase:
    name: str
    plan: dict[str, Any]


COUNT_SCHEMA = {
    "type": "object",
    "properties": {"count": {"type": "integer"}},
    "required": ["count"],
}

PARITY_CASES = [ParityCase(c.name, c.plan) for c in PLAN_CASES] + [
    # More than ten items: "squares/do.10" sorts before "squares/do.2" as text; both runners
    # record a batch of finished items in item order (ItemRun.rank).
    ParityCase("map_12_items_fail_fast", _map(12, [2, 10], "fail_fast", concurrency=12)),
    ParityCase("map_12_items_continue", _map(12, [2, 10], "continue", concurrency=12)),
    ParityCase("map_12_items_one_at_a_time", _map(12, [10], "fail_fast", concurrency=1)),
    ParityCase(
        "reduce_over_12_items",
        {
            "steps": [
                {"id": "nums", "tool": "numbers", "args": {"n": 12}},
                {
                    "id": "total",
                    "tool": "reduce",
                    "bind": {"over": "steps.nums.values"},
                    "args": {
                        "initial": 0,
                        "do": {"tool": "add", "bind": {"a": "accumulator", "b": "item"}},
                    },
                },
            ]
        },
    ),
    ParityCase(
        "returns_out_of_plan_order",
        {
            "steps": [
                {"id": "a", "tool": "echo", "args": {"value": 1}},
                {"id": "b", "tool": "echo", "args": {"value": 2}},
                {"id": "c", "tool": "echo", "args": {"value": 3}},
            ],
            "returns": ["c", "a", "b"],
        },
    ),
    ParityCase(
        "steps_failing_together_stop_at_the_first_in_plan_order",
        {
            # The first in plan order (s11) fails at once, the others LATER_FAILURE_S later:
            # durably, failures in flight land in whichever workflow tasks the worker
            # reports them in (under load, not one), and the first recorded stops the plan.
            "steps": [
                {
                    "id": f"s{i}",
                    "tool": "square",
                    "args": {"x": n, "fail_on": [0, 1, 2, 3]},
                }
                for n, i in enumerate((11, 2, 10, 1))
            ]
            + [{"id": "late", "tool": "echo", "after": ["s11"], "args": {"value": 0}}],
        },
    ),
    ParityCase(
        "exit_success_skips_the_rest",
        {
            "steps": [
                {"id": "nums", "tool": "numbers", "args": {"n": 2}},
                {
                    "id": "stop",
                    "tool": "exit",
                    "when": "$count(steps.nums.values) < 3",
                    "args": {"status": "success", "message": "too few"},
                    "bind": {"output": "steps.nums.values"},
                },
                {"id": "later", "tool": "echo", "after": ["stop"], "args": {"value": 1}},
            ]
        },
    ),
    ParityCase(
        "exit_error",
        {
            "steps": [
                {"id": "stop", "tool": "exit", "args": {"status": "error", "message": "no"}},
                {"id": "later", "tool": "echo", "after": ["stop"], "args": {"value": 1}},
            ]
        },
    ),
    ParityCase(
        "agent_step_with_tool_calls",
        {"steps": [_agent("Count to 3", COUNT_SCHEMA)], "final": True},
    ),
    ParityCase(
        "agent_step_that_cannot_conform_says_so",
        {
            "steps": [
                {
                    **_agent("Make it up", COUNT_SCHEMA),
                    "args": {**_agent("Make it up", COUNT_SCHEMA)["args"], "max_iterations": 2},
                },
                {"id": "use", "tool": "echo", "bind": {"value": "steps.judge.output.count"}},
            ],
            "final": True,
        },
    ),
    ParityCase(
        # In-process a map's result is {"count", "results", "failed", "not_taken"} and each
        # price {"sku", "cents", "currency"}; the SDK's default converter sorted both, and
        # the literal object in the plan's own args, on the way through the workflow.
        "map_keeps_each_objects_key_order",
        {
            "steps": [
                {"id": "skus", "tool": "echo", "args": {"value": ["tea", "rice", "bean"]}},
                {
                    "id": "prices",
                    "tool": "map",
                    "bind": {"over": "steps.skus"},
                    "args": {"do": {"tool": "price", "bind": {"sku": "item"}}},
                },
                {
                    "id": "order",
                    "tool": "echo",
                    "args": {"value": {"sku": "tea", "qty": 2, "note": {"zone": "b", "aisle": 4}}},
                },
            ]
        },
    ),
    ParityCase(
        "agent_output_keeps_its_key_order",
        {
            "steps": [
                _agent(
                    "Price the basket",
                    {
                        "type": "object",
                        "properties": {
                            "total": {"type": "integer"},
                            "currency": {"type": "string"},
                        },
                    },
                )
            ],
            "final": True,
        },
    ),
    ParityCase(
        "saved_plan_from_a_step_and_per_map_item",
        {
            "steps": [
                {"id": "one", "tool": "plan__squares_of", "args": {"n": 3}},
                {"id": "use", "tool": "echo", "bind": {"value": "steps.one.sq.count"}},
                {"id": "nums", "tool": "numbers", "args": {"n": 3}},
                {
                    "id": "each",
                    "tool": "map",
                    "bind": {"over": "steps.nums.values"},
                    "args": {"do": {"tool": "plan__squares_of", "bind": {"n": "item"}}},
                },
            ]
        },
    ),
    ParityCase(
        "saved_plan_failure_names_the_inner_path",
        {
            "steps": [
                {"id": "one", "tool": "plan__squares_of", "args": {"n": 3, "bad": 1}},
                {"id": "use", "tool": "echo", "bind": {"value": "steps.one.sq.count"}},
            ]
        },
    ),
    ParityCase(
        "saved_plan_from_an_agent_step",
        {
            "steps": [
                {
                    "id": "judge",
                    "tool": "agent",
                    "args": {
                        "prompt": "Square through a plan",
                        "output_schema": COUNT_SCHEMA,
                        "tools": ["plan__*"],
                    },
                }
            ]
        },
    ),
    ParityCase(
        "map_over_agent_steps",
        {
            "steps": [
                {"id": "nums", "tool": "numbers", "args": {"n": 4}},
                {
                    "id": "judge",
                    "tool": "map",
                    "bind": {"over": "steps.nums.values[$ > 1]"},
                    "args": {
                        "do": {
                            "tool": "agent",
                            "args": {
                                "prompt": "Judge {{ item }}",
                                "output_schema": {"type": "object"},
                                "tools": ["square"],
                            },
                        }
                    },
                },
            ]
        },
    ),
]


def ledger_view(result: PlanResult) -> dict[str, Any]:
    """Everything both runners must agree on, in order (durations left out)."""
    return {
        "ledger": [
            (o.id, o.tool, o.status, o.level, o.attempts, o.error, o.reused_from)
            for o in result.ledger
        ],
        "returned": list(result.returned.items()),
        # What the model reads: the same bytes, every object's keys in the tool's own order.
        "returned_text": json.dumps(result.returned),
        "levels": result.levels,
        "final": result.final,
        "exited": result.exited,
        "exited_text": json.dumps(result.exited),
        "saved": result.inference_passes_saved,
    }


def _model() -> ScriptedModel:
    return ScriptedModel(scripts=SCRIPTS)


@pytest.fixture(scope="module")
async def parity_worker(temporal_target: str) -> AsyncIterator[tuple[Client, str]]:
    """One client and worker for the whole table: the cases share nothing but tools."""
    client = await Client.connect(
        temporal_target, plugins=[StrandsPlugin(models={"scripted": _model})]
    )
    task_queue = "parity-suite"
    async with plan_worker(client, task_queue=task_queue, registry=REGISTRY):
        yield client, task_queue


MODEL_QUEUE = "parity-models"


@pytest.fixture(scope="module")
async def sorting_worker(temporal_target: str) -> AsyncIterator[tuple[Client, str]]:
    """A plan worker on a plain client: the SDK's default converter, which sorts every
    object's keys when it encodes (``JSONPlainPayloadConverter``, ``sort_keys=True``). The
    agent steps' model calls go to a model worker of the Strands client."""
    plain = await Client.connect(temporal_target)
    models = await Client.connect(
        temporal_target, plugins=[StrandsPlugin(models={"scripted": _model})]
    )
    task_queue = "parity-default-converter"
    async with (
        plan_worker(plain, task_queue=task_queue, registry=REGISTRY),
        model_worker(models, task_queue=MODEL_QUEUE),
    ):
        yield plain, task_queue


async def run_durably(worker: tuple[Client, str], plan: dict[str, Any], **extra: Any) -> PlanResult:
    client, task_queue = worker
    handle = await start_plan(
        client, plan, task_queue=task_queue, registry=REGISTRY, model="scripted", **extra
    )
    return await asyncio.wait_for(handle.result(), 120)


@pytest.mark.parametrize("case", PARITY_CASES, ids=[c.name for c in PARITY_CASES])
async def test_both_runners_give_the_same_ledger(
    parity_worker: tuple[Client, str], case: ParityCase
) -> None:
    local = await execute_plan(case.plan, REGISTRY, model=_model())
    durable = await run_durably(parity_worker, case.plan)
    assert ledger_view(durable) == ledger_view(local)


@pytest.mark.parametrize("case", PARITY_CASES, ids=[c.name for c in PARITY_CASES])
async def test_both_runners_give_the_same_bytes_on_the_sdks_default_converter(
    sorting_worker: tuple[Client, str], case: ParityCase
) -> None:
    """The same table on a worker whose converter sorts keys: before the fix 14 of its
    cases came back with every object's keys sorted (the map's result, the tools' own
    objects, the plan's literal args, the exit's output)."""
    local = await execute_plan(case.plan, REGISTRY, model=_model())
    durable = await run_durably(sorting_worker, case.plan, model_task_queue=MODEL_QUEUE)
    assert ledger_view(durable) == ledger_view(local)


async def test_the_table_covers_what_the_suite_promises() -> None:
    """Each case above ends the way its name says (so a table of plans that all do
    nothing cannot pass): checked on the in-process run, which the test above equates
    with the durable one."""
    by_name = {c.name: c.plan for c in PARITY_CASES}

    async def local(name: str) -> PlanResult:
        return await execute_plan(by_name[name], REGISTRY, model=_model())

    fast = await local("map_12_items_fail_fast")
    assert (fast.outcome("squares").error or "").startswith("item 2 failed: ValueError")
    assert fast.outcome("after").status == "skipped"
    kept = (await local("map_12_items_continue")).returned["squares"]
    assert kept["failed"] == 2 and len(kept["results"]) == 12
    assert kept["results"][10] == {"error": "ValueError: 10 is unlucky"}
    one = await local("map_12_items_one_at_a_time")
    assert (one.outcome("squares").error or "").startswith("item 10 failed")
    assert (await local("reduce_over_12_items")).returned["total"]["result"] == 66
    assert list((await local("returns_out_of_plan_order")).returned) == ["a", "b", "c"]
    together = await local("steps_failing_together_stop_at_the_first_in_plan_order")
    assert [o.status for o in together.ledger] == ["failed"] * 4 + ["skipped"]
    assert (await local("exit_success_skips_the_rest")).exited == {
        "step": "stop",
        "status": "success",
        "message": "too few",
        "output": [0, 1],
    }
    agent = await local("agent_step_with_tool_calls")
    assert agent.returned["judge"]["output"] == {"count": 3} and agent.final
    made_up = await local("agent_step_that_cannot_conform_says_so")
    # "Conforming output, or final: false": the step is ok, its output {} (never made up),
    # and a later step reaching into the output fails as a bad path.
    assert made_up.returned["judge"]["final"] is False
    assert made_up.returned["judge"]["output"] == {}
    assert "matched no value" in (made_up.outcome("use").error or "") and not made_up.final
    prices = (await local("map_keeps_each_objects_key_order")).returned
    assert list(prices["prices"]) == ["count", "results", "failed", "not_taken"]
    assert list(prices["prices"]["results"][0]) == ["sku", "cents", "currency"]
    assert list(prices["order"]) == ["sku", "qty", "note"]
    priced = (await local("agent_output_keeps_its_key_order")).returned["judge"]["output"]
    assert list(priced) == ["total", "currency"]
    judged = (await local("map_over_agent_steps")).returned["judge"]["results"]
    assert [r["output"] for r in judged] == [{"even": True}, {"even": False}]
    nested = (await local("saved_plan_from_a_step_and_per_map_item")).returned
    assert nested["use"] == 3
    assert [r["sq"]["count"] for r in nested["each"]["results"]] == [0, 1, 2]
    failed = await local("saved_plan_failure_names_the_inner_path")
    assert failed.outcome("one").error == (
        "saved plan plan__squares_of failed at one/plan.sq: item 1 failed: ValueError: 1 is unlucky"
    )
    assert failed.outcome("use").status == "skipped"
    via_agent = (await local("saved_plan_from_an_agent_step")).returned["judge"]
    assert via_agent["output"] == {"count": 2}
    assert [c["tool"] for c in via_agent["tools_called"]] == ["plan__squares_of"]


async def test_reuse_across_plans_is_the_same_in_both_runners(
    parity_worker: tuple[Client, str],
) -> None:
    """A plan given a conversation's memory reuses an earlier plan's identical step: the
    same ledger (``reused_from``) in both runners; durably the memory travels in
    ``PlanInput.memory`` as the plugin sends it."""
    plan = {
        "steps": [
            {"id": "a", "tool": "echo", "args": {"value": 1}},
            {"id": "b", "tool": "echo", "bind": {"value": "steps.a"}},
            {"id": "c", "tool": "echo", "args": {"value": 2}},
        ]
    }

    def recall() -> Recall:
        remembered = [
            Remembered("a", "echo", args_key({"value": 1}), "1", 1),
            Remembered("c", "echo", args_key({"value": 3}), "3", 1),  # other arguments
        ]
        return Recall(remembered, plan=2, reusable=reusable_tools(REGISTRY.options()))

    local = await run_checked(
        check_plan(plan, catalog=REGISTRY.catalog()), REGISTRY.invoke, recall=recall()
    )
    assert [o.reused_from for o in local.ledger] == [1, None, None]
    durable = await run_durably(parity_worker, plan, memory=recall().to_wire())
    assert ledger_view(durable) == ledger_view(local)


async def test_a_gated_tool_is_refused_in_process_and_waits_durably(
    temporal_target: str,
) -> None:
    """The documented difference for approvals (see the module docstring)."""
    registry = ToolRegistry()
    registry.add(delete_files, requires_approval=True)
    plan = {"steps": [{"id": "rm", "tool": "delete_files", "args": {"path": "/tmp/x"}}]}
    with pytest.raises(PlanRejected, match="requires human approval"):
        await execute_plan(plan, registry)
    client = await Client.connect(temporal_target)
    async with plan_worker(client, task_queue="parity-approval", registry=registry):
        handle = await start_plan(client, plan, task_queue="parity-approval", registry=registry)
        await until_phase(handle, "rm", "awaiting_approval")
        await handle.decide("rm", True)
        durable = await asyncio.wait_for(handle.result(), 60)
    assert durable.outcome("rm").status == "ok"
