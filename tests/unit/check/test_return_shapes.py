"""Return shapes: where they come from, and the check that walks a plan's paths through them.

Each source of a shape (a return annotation, a docstring's ``Returns:`` line, an explicit
option, an MCP server's ``outputSchema``, an existing activity, an agent step's
``output_schema``, a map's body) is tested with a plan that reads a field the shape rules
out: rejected, naming the step, the field and the fix, before any tool runs. What no
declared shape rules out passes, as before (``tests/unit/check/test_shape_properties.py`` generates
such plans). The durable side: ``tests/durable/plans/test_shapes_durable.py``.
"""

from __future__ import annotations

import difflib
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

import mcp.types
import pytest
from pydantic import BaseModel, ConfigDict
from strands import tool
from strands.types.tools import ToolContext
from temporalio import activity

from durable_plan.check import ToolCatalog, ToolSpec, check_plan
from durable_plan.check.shapes.checks import MAX_SUGGESTION_COMPARISONS
from durable_plan.check.shapes.compact import MAX_SHAPE_BYTES, compact_shape
from durable_plan.check.shapes.declared import annotation_shape
from durable_plan.check.shapes.docstrings import docstring_shape
from durable_plan.check.shapes.text import describe_shape
from durable_plan.check.shapes.walk import MAX_WALK_STEPS, Reached, Rooted, RuledOut, ShapeWalker
from durable_plan.language.errors import PlanRejected, Problem
from durable_plan.language.options import ToolOptions
from durable_plan.language.schema import plan_tool_description
from durable_plan.local.runner import execute_plan
from durable_plan.temporal.wire.tool_table import options_to_wire
from durable_plan.temporal.wire.workflow_inputs import PlanInput
from durable_plan.tools.mcp import mcp_tool_table
from durable_plan.tools.registry import ToolRegistry
from tests.support import shape_sources

REPO = Path(__file__).resolve().parents[3]


# -- tools with shapes from each source ------------------------------------------------------


class Stats(TypedDict):
    hp: int
    armour: int


class Monster(TypedDict):
    """A plain ``typing.TypedDict``, as the seed writes it (pydantic refuses these before
    Python 3.12: our own converter reads them)."""

    name: str
    stats: Stats
    tags: list[str]


class Customer(BaseModel):
    name: str
    email: str


class Order(BaseModel):
    id: str
    customer: Customer
    total: float


class Loose(BaseModel):
    model_config = ConfigDict(extra="allow")
    name: str


@dataclass
class Receipt:
    receipt: str
    amount: int


CALLS: list[str] = []


async def look_up_monster(name: str) -> Monster:
    """Look a monster up (its shape: the return annotation).

    Args:
        name: The monster.
    """
    CALLS.append("look_up_monster")
    return {"name": name, "stats": {"hp": 7, "armour": 15}, "tags": ["small"]}


async def look_up_goblin(name: str) -> dict[str, Any]:
    """Look a monster up (its shape: the seed's docstring convention).

    Args:
        name: Monster name, e.g. "goblin".

    Returns:
        An object shaped {"name": str, "hp": int, "armour": int}.
    """
    CALLS.append("look_up_goblin")
    return {"name": name, "hp": 7, "armour": 15}


async def roll_attack(armour: int) -> dict[str, Any]:
    """Roll against an armour value.

    Args:
        armour: The target's armour.
    """
    CALLS.append("roll_attack")
    return {"roll": 18, "hits": armour <= 18, "damage": 6}


async def fetch_order(order_id: str) -> Order:
    """Fetch an order (a pydantic model: closed).

    Args:
        order_id: The order.
    """
    CALLS.append("fetch_order")
    return Order(id=order_id, customer=Customer(name="Ada", email="ada@x"), total=12.5)


async def fetch_loose(order_id: str) -> Loose:
    """A model that allows extra fields: open.

    Args:
        order_id: The order.
    """
    CALLS.append("fetch_loose")
    return Loose(name=order_id)


async def send_email(to: str, subject: str) -> dict[str, Any]:
    """Send an email (a side effect).

    Args:
        to: The address.
        subject: The subject.
    """
    CALLS.append("send_email")
    return {"sent": to}


async def charge(card: str, amount: int) -> Receipt:
    """Charge a card (a dataclass: closed).

    Args:
        card: The card.
        amount: The amount.
    """
    CALLS.append("charge")
    return Receipt(f"r-{card}", amount)


async def untyped(name: str) -> dict[str, Any]:
    """No shape at all: dict[str, Any] says nothing.

    Args:
        name: Anything.
    """
    CALLS.append("untyped")
    return {"name": name, "anything": 1}


def registry() -> ToolRegistry:
    tools = ToolRegistry()
    for fn in (look_up_monster, look_up_goblin, roll_attack, fetch_order, fetch_loose):
        tools.add(fn)
    for fn in (send_email, charge, untyped):
        tools.add(fn)
    return tools


@pytest.fixture(autouse=True)
def _no_calls() -> None:
    CALLS.clear()


def rejected(plan: dict[str, Any], catalog: ToolCatalog | None = None) -> PlanRejected:
    with pytest.raises(PlanRejected) as caught:
        check_plan(plan, catalog=catalog or registry().catalog())
    return caught.value


def only(rejection: PlanRejected, code: str = "no_field") -> Problem:
    assert rejection.codes == [code], rejection.render()
    return rejection.problems[0]


def accepted(plan: dict[str, Any], catalog: ToolCatalog | None = None) -> None:
    check_plan(plan, catalog=catalog or registry().catalog())


def lookup(tool_name: str = "look_up_goblin", sid: str = "lookup") -> dict[str, Any]:
    return {"id": sid, "tool": tool_name, "args": {"name": "goblin"}}


# -- the issue's example ---------------------------------------------------------------------


async def test_the_readme_monster_plan_binding_ac_is_rejected_before_anything_runs() -> None:
    """``examples/monster_tools.py``: look_up_monster's docstring says it returns name,
    hp, armour. Before: ``lookup`` ran, then ``attack`` failed at run time."""
    sys.path.insert(0, str(REPO / "examples"))
    try:
        from monster_tools import TOOLS
    finally:
        sys.path.remove(str(REPO / "examples"))
    ran: list[str] = []

    async def invoke(name: str, args: dict[str, Any]) -> Any:
        ran.append(name)
        return await TOOLS.invoke(name, args)

    plan = {
        "steps": [
            {"id": "lookup", "tool": "look_up_monster", "args": {"name": "goblin"}},
            {"id": "attack", "tool": "roll_attack", "bind": {"armour": "steps.lookup.ac"}},
        ]
    }
    with pytest.raises(PlanRejected) as caught:
        await execute_plan(plan, invoke, catalog=TOOLS.catalog())
    assert ran == []  # nothing ran: not the lookup either
    problem = only(caught.value)
    assert (problem.step, problem.field) == ("attack", "bind.armour")
    assert str(problem) == (
        "step 'attack', field 'bind.armour': steps.lookup has no field 'ac': look_up_monster "
        "returns name, hp, armour. Fix: did you mean 'armour'? (steps.lookup.armour)"
    )
    # The registry as the invoker: the same check, the same refusal.
    with pytest.raises(PlanRejected):
        await execute_plan(plan, TOOLS)


# -- each source ----------------------------------------------------------------------------


def test_a_typeddict_annotation_is_a_closed_shape() -> None:
    problem = only(
        rejected(
            {
                "steps": [
                    lookup("look_up_monster"),
                    {"id": "hit", "tool": "roll_attack", "bind": {"armour": "steps.lookup.armour"}},
                ]
            }
        )
    )
    assert problem.message == (
        "steps.lookup has no field 'armour': look_up_monster returns name, stats, tags"
    )
    assert problem.fix == "it is at steps.lookup.stats.armour"
    accepted(
        {
            "steps": [
                lookup("look_up_monster"),
                {
                    "id": "hit",
                    "tool": "roll_attack",
                    "bind": {"armour": "steps.lookup.stats.armour"},
                },
            ]
        }
    )


def test_a_pydantic_model_is_closed_and_extra_allow_is_open() -> None:
    problem = only(
        rejected(
            {
                "steps": [
                    {"id": "order", "tool": "fetch_order", "args": {"order_id": "A1"}},
                    {
                        "id": "mail",
                        "tool": "send_email",
                        "args": {"subject": "hi"},
                        "bind": {"to": "steps.order.customer.mail"},
                    },
                ]
            }
        )
    )
    assert problem.message == "steps.order.customer has no field 'mail': it has name, email"
    assert problem.fix == "did you mean 'email'? (steps.order.customer.email)"
    accepted(
        {
            "steps": [
                {"id": "order", "tool": "fetch_loose", "args": {"order_id": "A1"}},
                {
                    "id": "mail",
                    "tool": "send_email",
                    "args": {"subject": "hi"},
                    "bind": {"to": "steps.order.anything"},
                },
            ]
        }
    )


def test_a_dataclass_annotation_is_a_closed_shape() -> None:
    problem = only(
        rejected(
            {
                "steps": [
                    {"id": "pay", "tool": "charge", "args": {"card": "c", "amount": 3}},
                    {"id": "note", "tool": "untyped", "bind": {"name": "steps.pay.receipt_id"}},
                ]
            }
        )
    )
    assert "steps.pay has no field 'receipt_id': charge returns receipt, amount" in problem.message
    assert problem.fix == "did you mean 'receipt'? (steps.pay.receipt)"


def test_what_says_nothing_gives_no_shape() -> None:
    assert annotation_shape(dict[str, Any]) is None
    assert annotation_shape(dict) is None
    assert annotation_shape(Any) is None
    assert annotation_shape(Loose) is not None  # a listed field, and open
    assert registry().get("untyped").options.output_schema is None
    accepted(
        {
            "steps": [
                lookup("untyped"),
                {"id": "b", "tool": "untyped", "bind": {"name": "steps.lookup.zzz"}},
            ]
        }
    )


def test_the_seed_docstring_convention() -> None:
    def returns(text: str) -> Any:
        return docstring_shape(f"Do it.\n\nArgs:\n    x: y\n\nReturns:\n    {text}\n")

    closed = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "hp": {"type": "integer"}},
        "required": ["name", "hp"],
        "additionalProperties": False,
    }
    assert returns('An object shaped {"name": str, "hp": int}.') == closed
    assert returns('{"name": str, "hp": int}') == closed
    assert returns('An object shaped {"name": str, "hp": int}. The hp is positive.') == closed
    assert returns('A list of objects shaped {"name": str, "hp": int}.') == {
        "type": "array",
        "items": closed,
    }
    assert returns('{"roll", "hits"}') == {
        "type": "object",
        "properties": {"roll": {}, "hits": {}},
        "additionalProperties": False,
    }
    nested = returns(
        'An object shaped {"a": {"b": int | None}, "c": list[str], "d": Optional[bool]}.'
    )
    assert nested is not None and nested["properties"]["a"]["properties"]["b"] == {
        "anyOf": [{"type": "integer"}, {"type": "null"}]
    }
    # Not sure, not a shape: no shape (every path passes).
    assert returns('An object shaped {"desk": "treasury" | "engineering"}.') == {
        "type": "object",
        "properties": {"desk": {"anyOf": [{"const": "treasury"}, {"const": "engineering"}]}},
        "required": ["desk"],
        "additionalProperties": False,
    }
    assert returns('{"pair": tuple[int, str], "ids": tuple[int, ...]}') == {
        "type": "object",
        "properties": {
            "pair": {"type": "array"},  # items of two types: not the first one's
            "ids": {"type": "array", "items": {"type": "integer"}},
        },
        "required": ["pair", "ids"],
        "additionalProperties": False,
    }
    # Not sure, not a shape: no shape (every path passes).
    for unsure in (
        'An object shaped {"name": str}, or None when there is no such monster.',
        'An object shaped {"name": str} plus other keys.',
        'Either {"name": str} or a list.',
        "The monster's stat block.",
        "{**other}",
        'An object shaped {"name": str',
        # Issue 45: a type, Google style, whose first bracket is not a shape.
        "dict[str, Any]: the user record.",
        "List[dict]: the users.",
        "Dict[str, List[int]]: lines by sku.",
        # Example values are not types.
        'An object like {"name": "Bob", "manager": null}',
        '{"count": 2, "items": [{"id": 1}], "next": true}',
        '{"name": "Bob"}',
        '{"manager": None}',
        "[1, 2]",
        # A second shape, or a condition on the first.
        '{"purrs": bool} for cats, {"barks": bool} for dogs.',
    ):
        assert returns(unsure) is None, unsure
    assert docstring_shape('No returns section {"a": int}.') is None


def test_an_explicit_option_wins_and_an_empty_one_declares_none() -> None:
    tools = ToolRegistry()
    tools.add(
        look_up_goblin,
        output_schema={"type": "object", "properties": {"x": {}}, "additionalProperties": False},
    )
    tools.add(look_up_monster, output_schema={})  # the annotation is not read
    tools.declare(
        "remote_lookup",
        task_queue="gpu",
        input_schema={"type": "object", "properties": {"name": {"type": "string"}}},
        output_schema={
            "type": "object",
            "properties": {"name": {"type": "string"}},
            "additionalProperties": False,
        },
    )
    assert tools.get("look_up_goblin").options.output_schema == {
        "type": "object",
        "properties": {"x": {}},
        "additionalProperties": False,
    }
    assert tools.get("look_up_monster").options.output_schema is None
    catalog = tools.catalog(durable=True)
    problem = only(
        rejected(
            {
                "steps": [
                    {"id": "r", "tool": "remote_lookup", "args": {"name": "goblin"}},
                    {"id": "g", "tool": "look_up_goblin", "bind": {"name": "steps.r.nmae"}},
                ]
            },
            catalog,
        )
    )
    assert problem.fix == "did you mean 'name'? (steps.r.name)"
    accepted(
        {
            "steps": [
                lookup("look_up_monster"),
                {"id": "g", "tool": "look_up_goblin", "bind": {"name": "steps.lookup.whatever"}},
            ]
        },
        catalog,
    )


@activity.defn(name="legacy_lookup")
async def legacy_lookup(name: str) -> Monster:
    """An existing activity: its return annotation is its shape."""
    return {"name": name, "stats": {"hp": 1, "armour": 2}, "tags": []}


def test_an_existing_activitys_return_annotation() -> None:
    """Temporal serializes an activity's result as it is (an instance of a subclass brings
    its own fields): the annotation's shape is open, so a field it does not name passes,
    and a path through a value of another kind (a field of a list) is refused."""
    tools = ToolRegistry([legacy_lookup, look_up_goblin])
    assert tools.get("legacy_lookup").options.kind == "activity"

    def plan(expr: str) -> dict[str, Any]:
        return {
            "steps": [
                {"id": "a", "tool": "legacy_lookup", "args": {"name": "x"}},
                {"id": "b", "tool": "look_up_goblin", "bind": {"name": expr}},
            ]
        }

    accepted(plan("steps.a.stats.name"), tools.catalog())
    problem = only(rejected(plan("steps.a.stats.hp.value"), tools.catalog()))
    assert problem.code == "no_field"
    assert "steps.a.stats.hp" in problem.message


@tool(context=True)
async def with_context(name: str, tool_context: ToolContext) -> Monster:
    """A Strands tool that takes a ToolContext (registered as an AgentTool).

    Args:
        name: The monster.
    """
    return {"name": name, "stats": {"hp": 1, "armour": 2}, "tags": []}


def test_a_strands_tool_with_a_context_keeps_its_annotation() -> None:
    tools = ToolRegistry([with_context])
    assert tools.get("with_context").options.kind == "agent_tool"
    # Strands gives the plan its result as text read back as JSON, as it was (open).
    assert tools.get("with_context").options.output_schema == annotation_shape(
        Monster, closed=False
    )


MCP_MONSTER = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "pattern": "^(a|a)+$"},
        "hp": {"type": "integer"},
    },
    "required": ["name", "hp"],
    "additionalProperties": False,
    "x-vendor": {"anything": True},
}


def test_an_mcp_tools_output_schema_is_its_shape() -> None:
    listed = [
        mcp.types.Tool(
            name="get_monster",
            description="A monster.",
            inputSchema={"type": "object", "properties": {"name": {"type": "string"}}},
            outputSchema=MCP_MONSTER,
        ),
        mcp.types.Tool(name="no_schema", inputSchema={"type": "object", "properties": {}}),
    ]
    table = mcp_tool_table("bestiary", listed)
    # Kept: the structure; dropped: the regex (never compiled), the vendor's keywords.
    assert table["bestiary__get_monster"].output_schema == {
        "type": "object",
        "properties": {"name": {"type": "string"}, "hp": {"type": "integer"}},
        "additionalProperties": False,
        "required": ["name", "hp"],
    }
    assert table["bestiary__no_schema"].output_schema is None
    catalog = ToolCatalog.from_options({**table, **registry().options()})
    problem = only(
        rejected(
            {
                "steps": [
                    {"id": "m", "tool": "bestiary__get_monster", "args": {"name": "goblin"}},
                    {"id": "hit", "tool": "roll_attack", "bind": {"armour": "steps.m.armour"}},
                ]
            },
            catalog,
        )
    )
    assert (
        problem.message == "steps.m has no field 'armour': bestiary__get_monster returns name, hp"
    )


# -- issue 45: a source gives a shape only where the tool's JSON is known to conform ----------


def test_a_docstring_never_contradicts_the_annotation() -> None:
    """``-> dict[str, Any]`` with a list in the docstring: the code returns an object, so
    the docstring is not believed; with an object in it, it narrows the annotation."""

    def listed(variant: int) -> dict[str, Any]:
        """Args:
            variant: x.

        Returns:
            A list of objects shaped {"sku": str}.
        """
        return {"sku": "s"}

    def shaped(variant: int) -> dict[str, Any]:
        """Args:
            variant: x.

        Returns:
            An object shaped {"sku": str}.
        """
        return {"sku": "s"}

    tools = ToolRegistry([listed, shaped])
    assert tools.get("listed").options.output_schema is None
    assert tools.get("shaped").options.output_schema == {
        "type": "object",
        "properties": {"sku": {"type": "string"}},
        "required": ["sku"],
        "additionalProperties": False,
    }


async def test_the_issues_refused_plans_run() -> None:
    """The four plans issue 45 saw refused, and the suspected fifth: each is accepted and
    runs, binding what the real tool returned."""
    tools = shape_sources.registry()
    tools.add(_takes, name="takes")

    def plan(src: str, bind: dict[str, str]) -> dict[str, Any]:
        return {
            "steps": [
                {"id": "s", "tool": src, "args": {"variant": 3}},
                {"id": "t", "tool": "takes", "bind": bind},
            ]
        }

    cases = [
        plan("doc_google_typed", {"record": "steps.s"}),  # "steps.u, which is a list"
        plan("typeddict_mongo", {"text": "steps.s._id"}),  # no_field '_id'
        plan("pydantic_event", {"text": "steps.s.kind"}),  # no_field 'kind'
        plan("pydantic_stamp", {"epoch": "steps.s.at"}),  # wrong_type: epoch seconds
        plan("doc_example_values", {"record": "steps.s.manager"}),  # "null only"
    ]
    for case in cases:
        check_plan(case, catalog=tools.catalog())
        result = await execute_plan(case, tools)
        assert result.ok, result.failures
    assert tools.get("typeddict_mongo").options.output_schema is not None  # a shape, with _id
    assert "_id" in tools.get("typeddict_mongo").options.output_schema["properties"]


def _takes(record: dict[str, Any] | None = None, text: str = "", epoch: int = 0) -> str:
    """Takes what the issue's plans bound.

    Args:
        record: An object.
        text: A string.
        epoch: Seconds.
    """
    return "ok"


def test_pydantic_says_only_what_its_serializer_emits() -> None:
    """Pydantic's own serialization schema trusts what the owner wrote about the schema;
    the shape is what ``dump_python(mode="json")`` really emits, or unknown there."""
    assert annotation_shape(shape_sources.Event) is None  # a wrap serializer: any value
    assert annotation_shape(shape_sources.Plain) is None
    stamp = annotation_shape(shape_sources.Stamp)
    assert stamp is not None and stamp["properties"]["at"] == {}
    lambdas = annotation_shape(shape_sources.Lambdas)
    assert lambdas is not None
    assert lambdas["properties"] == {"f": {}, "g": {"type": "string"}}
    lies = annotation_shape(shape_sources.Lies)
    assert lies is not None and lies["properties"] == {
        "x": {"type": "integer"},
        "y": {"type": "integer"},
        "z": {"type": "integer"},
        "w": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
    }
    validation = annotation_shape(shape_sources.Validation)
    assert validation is not None and list(validation["properties"]) == ["user_id"]
    computed = annotation_shape(shape_sources.Computed)
    assert computed is not None and "full" in computed["properties"]
    assert annotation_shape(shape_sources.ByAlias) is None  # aliases: keys depend on the call
    extra = annotation_shape(shape_sources.Extra)
    assert extra is not None and "additionalProperties" not in extra  # open


def test_every_typeddict_key_is_kept() -> None:
    shape = annotation_shape(shape_sources.Odd)
    assert shape is not None
    assert list(shape["properties"]) == ["$ref", "class", "a-b", "a b", "_", "__dunder__"]
    mongo = annotation_shape(shape_sources.MongoDoc)
    assert mongo is not None
    assert mongo["required"] == ["_id", "_MongoDoc__v", "name", "stats", "tags", "seen"]
    assert mongo["properties"]["seen"] == {"type": "string"}  # a datetime, as JSON


# -- what the check says ---------------------------------------------------------------------


def test_every_problem_at_once_with_the_others() -> None:
    rejection = rejected(
        {
            "steps": [
                lookup(),
                {"id": "hit", "tool": "roll_attack", "bind": {"armour": "steps.lookup.ac"}},
                {"id": "order", "tool": "fetch_order", "args": {"order_id": "A1"}},
                {
                    "id": "mail",
                    "tool": "send_email",
                    "bind": {"to": "steps.order.email", "subject": "steps.lokup.name"},
                },
                {
                    "id": "again",
                    "tool": "roll_attack",
                    "when": "steps.hit.hits",
                    "bind": {"armour": "steps.lookup.hp"},
                },
            ]
        }
    )
    assert [(p.code, p.step, p.field) for p in rejection.problems] == [
        ("dangling_reference", "mail", "bind.subject"),
        ("no_field", "hit", "bind.armour"),
        ("no_field", "mail", "bind.to"),
    ]
    assert rejection.problems[2].fix == "it is at steps.order.customer.email"


def test_one_level_too_deep_says_to_drop_the_name() -> None:
    problem = only(
        rejected(
            {
                "steps": [
                    lookup(),
                    {
                        "id": "hit",
                        "tool": "roll_attack",
                        "bind": {"armour": "steps.lookup.stats.armour"},
                    },
                ]
            }
        )
    )
    assert problem.fix == "read steps.lookup.armour (without 'stats')"


def test_a_field_of_a_scalar() -> None:
    problem = only(
        rejected(
            {
                "steps": [
                    lookup(),
                    {"id": "hit", "tool": "untyped", "bind": {"name": "steps.lookup.name.first"}},
                ]
            }
        )
    )
    assert problem.message == "steps.lookup.name is a string, which has no field 'first'"
    assert problem.fix == "read steps.lookup.name itself"


def test_a_string_field_into_an_integer_argument() -> None:
    problem = only(
        rejected(
            {
                "steps": [
                    lookup(),
                    {"id": "hit", "tool": "roll_attack", "bind": {"armour": "steps.lookup.name"}},
                ]
            }
        ),
        "wrong_type",
    )
    assert (problem.step, problem.field) == ("hit", "bind.armour")
    assert problem.message == (
        "binding 'armour' reads steps.lookup.name, which is a string, but tool 'roll_attack' "
        "takes 'armour' as an integer"
    )
    assert problem.fix == "bind a field that is an integer: steps.lookup.hp, steps.lookup.armour"


def test_a_whole_result_into_an_integer_argument() -> None:
    problem = only(
        rejected(
            {
                "steps": [
                    lookup(),
                    {"id": "hit", "tool": "roll_attack", "bind": {"armour": "steps.lookup"}},
                ]
            }
        ),
        "wrong_type",
    )
    assert "reads steps.lookup, which is an object" in problem.message
    assert problem.fix == "bind a field that is an integer: steps.lookup.hp, steps.lookup.armour"


def test_a_literal_of_the_wrong_type_in_bind() -> None:
    problem = only(
        rejected({"steps": [{"id": "hit", "tool": "roll_attack", "bind": {"armour": "'15'"}}]}),
        "wrong_type",
    )
    assert "binding 'armour' is the literal \"15\", which tool 'roll_attack' cannot take" in (
        problem.message
    )
    accepted({"steps": [{"id": "hit", "tool": "roll_attack", "bind": {"armour": "15"}}]})


def test_compatible_types_pass() -> None:
    """An integer where a number is wanted, a number where an integer is (it may be
    integral), a nullable field: each could be right, so each passes."""
    catalog = ToolCatalog(
        {
            "src": ToolSpec(
                "src",
                output_schema={
                    "type": "object",
                    "properties": {
                        "i": {"type": "integer"},
                        "f": {"type": "number"},
                        "maybe": {"type": ["string", "null"]},
                        "any": {},
                    },
                    "additionalProperties": False,
                },
            ),
            "dst": ToolSpec(
                "dst",
                {
                    "type": "object",
                    "properties": {
                        "n": {"type": "number"},
                        "i": {"type": "integer"},
                        "s": {"type": "string"},
                        "o": {"anyOf": [{"type": "integer"}, {"type": "boolean"}]},
                    },
                },
            ),
        }
    )
    bind = {"n": "steps.a.i", "i": "steps.a.f", "s": "steps.a.maybe", "o": "steps.a.any"}
    check_plan(
        {"steps": [{"id": "a", "tool": "src"}, {"id": "b", "tool": "dst", "bind": bind}]},
        catalog=catalog,
    )
    with pytest.raises(PlanRejected) as caught:
        bad = {"o": "steps.a.maybe"}
        check_plan(
            {"steps": [{"id": "a", "tool": "src"}, {"id": "b", "tool": "dst", "bind": bad}]},
            catalog=catalog,
        )
    assert "which is a string or null, but tool 'dst' takes 'o' as an integer or a boolean" in (
        caught.value.problems[0].message
    )


UNION = {
    "anyOf": [
        {
            "type": "object",
            "properties": {"kind": {"const": "hit"}, "damage": {"type": "integer"}},
            "additionalProperties": False,
        },
        {
            "type": "object",
            "properties": {"kind": {"const": "miss"}, "reason": {"type": "string"}},
            "additionalProperties": False,
        },
        {"type": "null"},
    ]
}


def test_a_union_rules_a_field_out_only_if_every_branch_does() -> None:
    catalog = ToolCatalog({"roll": ToolSpec("roll", output_schema=UNION), "use": ToolSpec("use")})
    for fine in ("steps.r.damage", "steps.r.reason", "steps.r.kind"):
        check_plan(
            {
                "steps": [
                    {"id": "r", "tool": "roll"},
                    {"id": "u", "tool": "use", "bind": {"x": fine}},
                ]
            },
            catalog=catalog,
        )
    with pytest.raises(PlanRejected) as caught:
        check_plan(
            {
                "steps": [
                    {"id": "r", "tool": "roll"},
                    {"id": "u", "tool": "use", "bind": {"x": "steps.r.dmg"}},
                ]
            },
            catalog=catalog,
        )
    problem = caught.value.problems[0]
    assert (
        problem.message
        == "steps.r has no field 'dmg': it is null, or an object with kind, damage, reason"
    )
    assert problem.fix == "did you mean 'damage'? (steps.r.damage)"


def test_lists_are_read_item_by_item() -> None:
    shape = {
        "type": "object",
        "properties": {
            "items": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"sku": {"type": "string"}},
                    "additionalProperties": False,
                },
            }
        },
        "additionalProperties": False,
    }
    catalog = ToolCatalog({"order": ToolSpec("order", output_schema=shape), "use": ToolSpec("use")})

    def plan(expr: str) -> dict[str, Any]:
        return {
            "steps": [{"id": "o", "tool": "order"}, {"id": "u", "tool": "use", "bind": {"x": expr}}]
        }

    for fine in (
        "steps.o.items.sku",
        "steps.o.items[0].sku",
        "steps.o.items[sku='tea'].sku",
        "$count(steps.o.items)",
    ):
        check_plan(plan(fine), catalog=catalog)
    with pytest.raises(PlanRejected) as caught:
        check_plan(plan("steps.o.items[0].name"), catalog=catalog)
    assert (
        caught.value.problems[0].message == "steps.o.items has no field 'name': its items have sku"
    )


def test_paths_the_analysis_cannot_follow_pass() -> None:
    """Filters' insides, functions, wildcards, a focus, a parent, a computed lookup: the
    check does not guess (the run decides, as before)."""
    for expr in (
        "$lookup(steps.lookup, 'ac')",
        "$map([steps.lookup], function($v) { $v.ac })",
        "steps.lookup@$m.ac",
        "steps.lookup.%.ac",
        "steps.lookup.(ac)",
        "steps.lookup.*",
        "$string(steps.lookup)",
        "$keys(steps.lookup)[0]",
    ):
        accepted({"steps": [lookup(), {"id": "x", "tool": "untyped", "bind": {"name": expr}}]})
    accepted(
        {
            "steps": [
                lookup(),
                {"id": "x", "tool": "untyped", "after": ["lookup"], "bind": {"name": "steps.*.ac"}},
            ]
        }
    )


def test_conditions_and_templates_are_walked_too() -> None:
    rejection = rejected(
        {
            "steps": [
                lookup(),
                {
                    "id": "x",
                    "tool": "untyped",
                    "when": "steps.lookup.hitpoints > 3",
                    "bind": {"name": "steps.lookup.name"},
                },
                {
                    "id": "judge",
                    "tool": "agent",
                    "args": {
                        "prompt": "Is {{ steps.lookup.nmae }} scary?",
                        "output_schema": {
                            "type": "object",
                            "properties": {"scary": {"type": "boolean"}},
                        },
                    },
                },
            ]
        },
        ToolCatalog({**registry().catalog().tools}, default_model="m"),
    )
    assert [(p.step, p.field) for p in rejection.problems] == [
        ("x", "when"),
        ("judge", "args.prompt"),
    ]


# -- step kinds --------------------------------------------------------------------------------

JUDGE = {
    "id": "judge",
    "tool": "agent",
    "args": {
        "prompt": "Which desk?",
        "output_schema": {
            "type": "object",
            "properties": {"desk": {"type": "string"}, "confidence": {"type": "number"}},
            "required": ["desk"],
            "additionalProperties": False,
        },
    },
}


def test_an_agent_steps_output_follows_its_output_schema() -> None:
    catalog = ToolCatalog({**registry().catalog().tools}, default_model="m")

    def plan(expr: str) -> dict[str, Any]:
        return {"steps": [JUDGE, {"id": "x", "tool": "untyped", "bind": {"name": expr}}]}

    check_plan(plan("steps.judge.final ? steps.judge.output.desk : 'none'"), catalog=catalog)
    with pytest.raises(PlanRejected) as caught:
        check_plan(plan("steps.judge.final ? steps.judge.output.dept : 'none'"), catalog=catalog)
    problem = caught.value.problems[0]
    assert problem.message == "steps.judge.output has no field 'dept': it has desk, confidence"
    assert problem.fix == "did you mean 'desk'? (steps.judge.output.desk)"
    with pytest.raises(PlanRejected) as caught:
        check_plan(plan("steps.judge.outptu.desk"), catalog=catalog)
    assert caught.value.problems[0].message == (
        "steps.judge has no field 'outptu': an agent step returns output, iterations, "
        "tools_called, final, usage"
    )
    open_judge = {
        **JUDGE,
        "args": {**JUDGE["args"], "output_schema": {"type": "object", "properties": {"desk": {}}}},
    }
    check_plan(
        {
            "steps": [
                open_judge,
                {"id": "x", "tool": "untyped", "bind": {"name": "steps.judge.output.anything"}},
            ]
        },
        catalog=catalog,
    )


def test_a_maps_results_follow_its_body() -> None:
    each = {
        "id": "each",
        "tool": "map",
        "args": {
            "over": ["goblin", "ogre"],
            "do": {"tool": "look_up_goblin", "bind": {"name": "item"}},
        },
    }

    def plan(expr: str) -> dict[str, Any]:
        return {"steps": [each, {"id": "x", "tool": "untyped", "bind": {"name": expr}}]}

    for fine in (
        "steps.each.results.name",
        "steps.each.results[0].armour",
        "$string(steps.each.count)",
        "steps.each.results.error",
    ):
        accepted(plan(fine))
    rejection = rejected(plan("steps.each.result.name"))
    assert rejection.problems[0].message == (
        "steps.each has no field 'result': a map step returns count, results, failed, not_taken"
    )
    assert rejection.problems[0].fix == "did you mean 'results'? (steps.each.results.name)"
    rejection = rejected(plan("steps.each.results.ac"))
    assert rejection.problems[0].message.startswith(
        "steps.each.results has no field 'ac': its items have name, hp, armour"
    )


def test_a_reduces_result_is_its_body_or_its_initial_value() -> None:
    fold = {
        "id": "fold",
        "tool": "reduce",
        "args": {
            "over": [1, 2],
            "initial": {"name": "none", "hp": 0, "armour": 0},
            "do": {"tool": "look_up_goblin", "bind": {"name": "$string(item)"}},
        },
    }
    accepted(
        {
            "steps": [
                fold,
                {"id": "x", "tool": "roll_attack", "bind": {"armour": "steps.fold.result.armour"}},
            ]
        }
    )
    problem = rejected(
        {
            "steps": [
                fold,
                {"id": "x", "tool": "roll_attack", "bind": {"armour": "steps.fold.result.ac"}},
            ]
        }
    ).problems[0]
    assert problem.message == "steps.fold.result has no field 'ac': it has name, hp, armour"


def test_without_a_catalog_the_kinds_results_are_still_known() -> None:
    plan = {
        "steps": [
            {
                "id": "each",
                "tool": "map",
                "args": {"over": [1], "do": {"tool": "t", "bind": {"x": "item"}}},
            },
            {"id": "x", "tool": "t", "bind": {"v": "steps.each.reslts"}},
        ]
    }
    with pytest.raises(PlanRejected) as caught:
        check_plan(plan)
    assert caught.value.codes == ["no_field"]
    check_plan(
        {
            **plan,
            "steps": [
                plan["steps"][0],
                {"id": "x", "tool": "t", "bind": {"v": "steps.each.results.anything"}},
            ],
        }
    )


# -- hostile shapes: bounded ----------------------------------------------------------------


def test_a_ref_cycle_and_a_self_containing_shape_end() -> None:
    walker = ShapeWalker()
    loop = {"$ref": "#"}
    assert isinstance(walker.walk(Rooted(loop, loop), ["a", "b"]), Reached)
    ping = {"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}
    assert isinstance(walker.walk(Rooted(ping, ping), ["x"]), Reached)
    nested = compact_shape(
        {
            "type": "object",
            "properties": {"next": {"$ref": "#"}, "v": {"type": "integer"}},
            "additionalProperties": False,
        }
    )
    assert nested is not None
    deep = ["next"] * 200 + ["nope"]
    outcome = ShapeWalker().walk(Rooted(nested, nested), deep)
    assert isinstance(outcome, RuledOut) and outcome.fields == ("next", "v")


def test_an_untrusted_schema_is_bounded_before_it_travels() -> None:
    deep: dict[str, Any] = {"type": "integer"}
    for _ in range(5_000):
        deep = {"type": "object", "properties": {"a": deep}, "additionalProperties": False}
    shape = compact_shape(deep)
    assert shape is not None and len(json.dumps(shape)) < MAX_SHAPE_BYTES
    assert compact_shape(shape) == shape  # compacting again changes nothing (tool tables)
    assert compact_shape(MCP_MONSTER) == compact_shape(compact_shape(MCP_MONSTER))
    wide = {
        "type": "object",
        "properties": {f"f{i}": {"type": "string", "description": "x" * 100} for i in range(3_000)},
    }
    assert compact_shape(wide) is None  # over the byte bound: no shape, nothing refused
    many = {
        "anyOf": [{"type": "object", "properties": {"a": {}}, "additionalProperties": False}] * 500
    }
    assert compact_shape(many) is None  # a union too wide to follow is dropped: says nothing
    patterned = compact_shape(
        {
            "type": "object",
            "properties": {"a": {}},
            "patternProperties": {"^(a|a)+$": {}},
            "additionalProperties": False,
        }
    )
    assert patterned == {"type": "object", "properties": {"a": {}}}  # open: a pattern may match
    assert compact_shape({"type": "object", "properties": {"a": {}}, "nullable": True}) == {
        "type": ["object", "null"],
        "properties": {"a": {}},
    }
    assert compact_shape("not a schema") is None
    # A reference that is not local is dropped: it could be anything.
    assert compact_shape({"$ref": "https://example.com/schema.json"}) is None


def test_a_schema_that_was_not_compacted_is_walked_soundly() -> None:
    """A ``ToolSpec`` (or a durable tool table) built by hand: a pattern may name a field, a
    ``oneOf`` is a union, OpenAPI's ``nullable`` adds null."""
    raw = {
        "oneOf": [
            {
                "type": "object",
                "properties": {"a": {"type": "string", "nullable": True}},
                "patternProperties": {"^x_": {"type": "integer"}},
                "additionalProperties": False,
            },
            {"type": "object", "properties": {"b": {}}, "additionalProperties": False},
        ]
    }
    catalog = ToolCatalog(
        {
            "t": ToolSpec("t", output_schema=raw),
            "u": ToolSpec("u", {"type": "object", "properties": {"n": {"type": "null"}}}),
        }
    )

    def plan(expr: str) -> dict[str, Any]:
        return {"steps": [{"id": "s", "tool": "t"}, {"id": "v", "tool": "u", "bind": {"n": expr}}]}

    for fine in ("steps.s.x_count", "steps.s.b", "steps.s.a"):
        check_plan(plan(fine), catalog=catalog)
    closed = {
        "oneOf": [
            raw["oneOf"][1],
            {"type": "object", "properties": {"c": {}}, "additionalProperties": False},
        ]
    }
    catalog = ToolCatalog({**catalog.tools, "t": ToolSpec("t", output_schema=closed)})
    check_plan(plan("$string(steps.s.c)"), catalog=catalog)
    with pytest.raises(PlanRejected) as caught:
        check_plan(plan("$string(steps.s.x_count)"), catalog=catalog)
    assert caught.value.problems[0].message == "steps.s has no field 'x_count': t returns b, c"


def test_an_exponential_shape_costs_a_bounded_walk() -> None:
    """Nested unions through $defs double at each level: the walk's budget ends it, and a
    path it could not finish is accepted."""
    defs = {
        f"d{i}": {"anyOf": [{"$ref": f"#/$defs/d{i + 1}"}, {"$ref": f"#/$defs/d{i + 1}"}]}
        for i in range(30)
    }
    defs["d30"] = {
        "type": "object",
        "properties": {"a": {"$ref": "#/$defs/d0"}},
        "additionalProperties": False,
    }
    shape = {"$defs": defs, "$ref": "#/$defs/d0"}
    catalog = ToolCatalog({"t": ToolSpec("t", output_schema=shape), "u": ToolSpec("u")})
    exprs = [f"steps.a.{'.'.join(['a'] * 30)}.zz{i}" for i in range(100)]
    plan = {
        "steps": [
            {"id": "a", "tool": "t"},
            {"id": "b", "tool": "u", "bind": {f"x{i}": e for i, e in enumerate(exprs)}},
        ]
    }
    spent: list[int] = []
    walk = ShapeWalker.walk

    def counted(self: ShapeWalker, shape: Any, path: Any) -> Any:
        found = walk(self, shape, path)
        spent.append(MAX_WALK_STEPS - self.budget)
        return found

    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(ShapeWalker, "walk", counted)
        check_plan(plan, catalog=catalog, durable=True)  # accepted: the walk gave up, sound
    assert spent and max(spent) <= MAX_WALK_STEPS + 1  # one plan's budget, never more


def test_many_wrong_paths_into_a_wide_shape_are_refused_quickly() -> None:
    """Every "did you mean" compares names: past the plan's budget of comparisons, and past
    the hundredth problem, the check stops looking (workflow code has 2 s per task)."""
    props = {f"field_number_{i}": {"type": "string"} for i in range(150)}
    shape = {"type": "object", "properties": props, "additionalProperties": False}
    catalog = ToolCatalog({"t": ToolSpec("t", output_schema=shape), "u": ToolSpec("u")})
    steps: list[dict[str, Any]] = [{"id": "s", "tool": "t"}]
    for k in range(31):
        bind = {f"a{i}": f"steps.s.field_numbr_{i}" for i in range(12)}
        steps.append({"id": f"u{k}", "tool": "u", "bind": bind})
    compared: list[int] = []
    close_matches = difflib.get_close_matches

    def counted(word: str, possibilities: Any, *args: Any, **kwargs: Any) -> Any:
        compared.append(len(list(possibilities)))
        return close_matches(word, possibilities, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(difflib, "get_close_matches", counted)
        with pytest.raises(PlanRejected) as caught:
            check_plan({"steps": steps}, catalog=catalog, durable=True)
    assert sum(compared) <= MAX_SUGGESTION_COMPARISONS  # the plan's budget of comparisons
    problems = caught.value.problems
    assert len(problems) == 100 and {p.code for p in problems} == {"no_field"}
    assert problems[0].fix == "did you mean 'field_number_0'? (steps.s.field_number_0)"
    assert problems[-1].fix.startswith("read one of its fields: field_number_0, ")


def test_the_rejection_is_the_same_in_every_process() -> None:
    """Workflow code re-checks plans: the verdict and its words must not depend on the
    hash seed (no set iteration in what the check says)."""
    script = (
        "import json, sys\n"
        "from durable_plan.check import check_plan, ToolCatalog, ToolSpec\n"
        "from durable_plan.language.errors import PlanRejected\n"
        f"shape = {UNION!r}\n"
        "cat = ToolCatalog({'r': ToolSpec('r', output_schema=shape), 'u': ToolSpec('u')})\n"
        "plan = {'steps': [{'id': 'r', 'tool': 'r'}, {'id': 'u', 'tool': 'u', 'bind': "
        "{'x': 'steps.r.dmg', 'y': 'steps.r.kind.x', 'z': 'steps.r.rason'}}]}\n"
        "try:\n    check_plan(plan, catalog=cat, durable=True)\n"
        "except PlanRejected as exc:\n    print(exc)\n"
    )
    outputs = {
        subprocess.run(
            [sys.executable, "-c", script],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
        ).stdout
        for seed in ("1", "2", "3")
    }
    assert len(outputs) == 1 and "steps.r has no field 'dmg'" in outputs.pop()


# -- where shapes travel ---------------------------------------------------------------------


def test_the_tool_table_sends_a_shape_only_when_set() -> None:
    plain = options_to_wire(ToolOptions())
    assert "output_schema" not in plain  # a table without shapes is byte-identical to before
    shape = {"type": "object", "properties": {"a": {}}, "additionalProperties": False}
    wire = PlanInput(plan={"steps": []}, tools={"t": ToolOptions(output_schema=shape)}).to_wire()
    assert wire["tools"]["t"]["output_schema"] == shape
    assert PlanInput.from_wire(wire).tools["t"].output_schema == shape
    catalog = ToolCatalog.from_options({"t": ToolOptions(output_schema=shape)})
    assert catalog.has_shapes and not catalog.without_shapes().has_shapes


def test_the_plan_tool_describes_the_shapes_the_model_cannot_read_elsewhere() -> None:
    from strands import Agent

    from durable_plan.strands.plugin import WorkflowPlanPlugin
    from durable_plan.testing import ScriptedModel

    def description(plugin: WorkflowPlanPlugin, tools: list[Any]) -> str:
        agent = Agent(model=ScriptedModel([]), tools=tools, plugins=[plugin], callback_handler=None)
        specs = agent.tool_registry.get_all_tool_specs()
        [spec] = [s for s in specs if s["name"] == "submit_workflow_plan"]
        return str(spec["description"])

    # With a registry the plannable tools are listed: each shape beside its tool's name
    # (signatures=False: as for an agent sent the tools' own specs, ``test_signatures.py``).
    text = description(WorkflowPlanPlugin(registry=registry(), signatures=False), [])
    line = next(x for x in text.splitlines() if x.startswith("Tools you can plan: "))
    assert "look_up_monster {name: str, stats: {hp: int, armour: int}, tags: [str]}; " in line
    assert "fetch_order {id: str, customer: {name: str, email: str}, total: float}; " in line
    assert "fetch_loose {name: str, ...}; " in line
    assert "charge {receipt: str, amount: int}; " in line
    # The docstring's shape is in look_up_goblin's own description already.
    assert "; look_up_goblin; " in line and "; untyped." in line
    # A plain agent: no list of tools, a line of the shapes alone.
    text = description(WorkflowPlanPlugin(), [tool(look_up_monster), tool(look_up_goblin)])
    assert "\nTools return: look_up_monster {name: str, stats: {hp: int, armour: int}, " in text
    assert "look_up_goblin {" not in text and "Tools you can plan" not in text
    assert "Tools return" not in plan_tool_description(["a"])
    assert plan_tool_description(["a", "b"]).endswith("Tools you can plan: a, b.")


def test_describe_shape_stays_short() -> None:
    big = {
        "type": "object",
        "properties": {f"field_{i}": {"type": "string"} for i in range(40)},
        "additionalProperties": False,
    }
    assert len(describe_shape(big)) <= 160
    assert describe_shape({"type": "array", "items": {"type": "integer"}}) == "[int]"
    assert describe_shape({"enum": ["a", "b"]}) == '"a"|"b"'


async def test_a_model_or_dataclass_result_runs_as_the_json_its_shape_describes() -> None:
    """A tool annotated with a pydantic model or a dataclass may return one: the plan binds
    the JSON it serializes to (before, such a result failed its step as not JSON)."""
    plan = {
        "steps": [
            {"id": "order", "tool": "fetch_order", "args": {"order_id": "A1"}},
            {"id": "pay", "tool": "charge", "args": {"card": "c", "amount": 3}},
            {
                "id": "mail",
                "tool": "send_email",
                "bind": {"to": "steps.order.customer.email", "subject": "steps.pay.receipt"},
            },
        ]
    }
    result = await execute_plan(plan, registry())
    assert result.ok, result.failures
    assert result.returned["order"]["customer"] == {"name": "Ada", "email": "ada@x"}
    assert result.returned["pay"] == {"receipt": "r-c", "amount": 3}
    assert sorted(CALLS[:2]) == ["charge", "fetch_order"] and CALLS[2:] == ["send_email"]


class _Base(TypedDict):
    name: str


class _Full(_Base):
    hp: int


def _returns_a_subclass() -> _Base:
    """A result whose runtime class declares more than the annotation."""
    return _Full(name="x", hp=3)


class _Animal(BaseModel):
    name: str


class _Dog(_Animal):
    breed: str


def _returns_a_model_subclass() -> _Animal:
    """A model subclass."""
    return _Dog(name="d", breed="lab")


@tool(context=True)
def _json_text(tool_context: ToolContext) -> str:
    """Returns JSON as text: the plan reads the object it holds."""
    return json.dumps({"name": "x", "hp": 7})


@pytest.mark.parametrize(
    ("func", "declared"),
    [(_returns_a_subclass, {"name": "x"}), (_returns_a_model_subclass, {"name": "d"})],
)
async def test_a_function_tools_result_is_what_its_annotation_declares(
    func: Any, declared: dict[str, Any]
) -> None:
    """The shape is closed, so the result must be too: a subclass's extra fields do not
    reach the plan, in-process and in the activity alike (both call ``Tool.invoke``); the
    check refusing them is then what the run would find."""
    tools = ToolRegistry([func])
    assert await tools.invoke(func.__name__, {}) == declared


def test_a_strands_tool_annotated_text_has_no_shape_from_it() -> None:
    tools = ToolRegistry([_json_text])
    assert tools.get("_json_text").options.output_schema is None


def test_an_unresolvable_forward_reference_gives_no_shape_not_a_crash() -> None:
    """Registering the tool raised NameError (the shadow of a typing.TypedDict resolved its
    hints); it registered with an open shape before: it must register, saying nothing."""
    from durable_plan.tools.registry import ToolRegistry
    from tests.support.shape_forward_refs import get_row

    registry = ToolRegistry()
    registry.add(get_row)
    assert "get_row" in registry.catalog().plannable
