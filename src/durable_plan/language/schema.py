"""The plan tool as the model sees it: an input schema and a description.

Both are sent on every model call of an agent that has the plan tool, whether or not
it plans, so together they stay no larger than the seed plan tool's
(``tests/unit/language/test_spec_size.py`` pins the size; ``python -m bench.spec_size`` measures
it), and a plan-only agent's one spec no larger than Code Mode's ``run_code`` on the
same tools (issue 53). They teach what a correct first plan needs and say each rule once:
the description the language (expressions, the step kinds by name, reuse), the schema a
step in one line (``step_form``) and what each plan field means. Everything else reaches
the model where it meets it: the check's rejection carries the whole form of a step kind
the model wrote wrong (``check/kinds.py``), states the step id rule, names an unknown
field with a did-you-mean, and says what a rare field is (``RARE_FIELDS``, left out of
the schema); a failed plan's text says how to repair it (``reuse.py``).

The schema is generated from the pydantic contract (so the two cannot drift),
with ``$ref``s inlined because several providers reject references in tool
schemas, then stripped of what tells a model nothing: titles, ``null`` branches of
optional fields, an empty ``additionalProperties`` and the class docstrings.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from durable_plan.language.plan import DEFAULT_MAX_STEPS, RARE_FIELDS, Plan, Step

PLAN_TOOL_NAME = "submit_workflow_plan"


_LEFT_TO_THE_CHECK = frozenset(
    {
        "default",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "minLength",
        "minItems",
        "pattern",
    }
)
"""Schema keywords left out of what the model is sent (``_shorten``)."""


def plan_input_schema() -> dict[str, Any]:
    """JSON schema of a plan with every ``$ref`` inlined, as short as it can say the same.

    A relaxed view of the ``Plan`` model: every plan the model accepts validates against
    it, and what it no longer refuses the check does, with a message that says the rule
    (``tests/unit/language/test_summary.py``). It leaves out the rare fields (``RARE_FIELDS``:
    accepted,
    and a wrong value's rejection says what the field is), the step id's pattern (the
    rejection states it) and ``additionalProperties: false`` (an unknown field's rejection
    names it with a did-you-mean)."""
    schema = Plan.model_json_schema()
    defs = schema.pop("$defs", {})
    for name in RARE_FIELDS["plan"]:
        schema["properties"].pop(name)
    inlined: dict[str, Any] = _shorten(_inline(schema, defs))
    steps = inlined["properties"]["steps"]
    steps["items"] = {"type": "object", "required": steps["items"]["required"]}
    steps["description"] = step_form()
    return inlined


def step_form() -> str:
    """A step in one line, from the ``Step`` model: ``{id, tool, args?: {arg: literal},
    ...}``, the rare fields left out. As the items' JSON schema it cost the model half again
    as many tokens (per-field ``type``, ``properties`` and quotes), on every call."""
    fields = [
        name
        + ("" if info.is_required() else "?")
        + (f": {info.description}" if info.description else "")
        for name, info in Step.model_fields.items()
        if name not in RARE_FIELDS["step"]
    ]
    return "Each {" + ", ".join(fields) + "}"


def _inline(node: Any, defs: dict[str, Any]) -> Any:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            merged = {**defs[ref.split("/")[-1]], **{k: v for k, v in node.items() if k != "$ref"}}
            return _inline(merged, defs)
        return {k: _inline(v, defs) for k, v in node.items()}
    if isinstance(node, list):
        return [_inline(v, defs) for v in node]
    return node


def _shorten(node: Any) -> Any:
    """One schema node without what a model cannot use; the same plans stay valid for it
    except a literal ``null`` for an optional field, which means "left out" anyway.

    ``title`` repeats the property name; ``anyOf [X, null]`` with ``default: null`` is
    ``X`` left out; ``additionalProperties: {}`` allows what is allowed anyway; a
    model's docstring (``description`` beside ``properties``) is for Python readers.
    The rest is the check's to enforce, and its rejection states the rule where the model
    broke it, so a model that keeps it need not read it on every call: a number's bounds,
    a string's least length and a field's default (``step 'a', field 'retries': Input
    should be less than or equal to 10``), the step id's ``pattern`` (``'A' is not a valid
    step id. Fix: start with a lowercase letter; ...``) and ``additionalProperties:
    false`` (``unknown field 'bnid'. Fix: did you mean 'bind'?``).
    """
    if isinstance(node, list):
        return [_shorten(v) for v in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    branches = node.get("anyOf")
    if (
        isinstance(branches, list)
        and len(branches) == 2
        and {"type": "null"} in branches
        and node.get("default", ...) is None
    ):
        kept = next(b for b in branches if b != {"type": "null"})
        rest = {k: v for k, v in node.items() if k not in ("anyOf", "default")}
        return _shorten({**kept, **rest})
    for key, value in node.items():
        if key == "title" and isinstance(value, str):
            continue
        if key in _LEFT_TO_THE_CHECK:
            continue
        if key == "additionalProperties" and value in ({}, False):
            continue
        if key == "description" and "properties" in node:
            continue
        if key == "properties" and isinstance(value, dict):
            out[key] = {name: _shorten(sub) for name, sub in value.items()}
        else:
            out[key] = _shorten(value)
    return out


def plan_tool_description(
    plannable: list[str] | None = None,
    max_steps: int = DEFAULT_MAX_STEPS,
    *,
    mcp_servers: Sequence[str] = (),
    returns: Mapping[str, str] | None = None,
    signatures: Mapping[str, str] | None = None,
) -> str:
    """The tool description: when to plan, the expressions, the step kinds, reuse, the check.

    ``plannable`` is listed when given (None: every tool the model sees); ``mcp_servers``
    adds the one line on MCP tools' plan names, only for an agent that has such servers;
    ``returns`` (tool name -> its return shape in a few words) the line on what tools return;
    ``signatures`` (tool name -> the tool as one line, ``check.shapes.text.describe_signature``)
    stand for the specs of plannable tools the model is not sent, one line each.
    """
    shapes = dict(returns or {})
    typed = dict(signatures or {})
    if plannable is None:  # every tool the model sees; those it does not see, signed
        tools = "".join(f"\n{line}" for line in typed.values())
        tools = f"\nAlso plannable (arg?: optional):{tools}" if tools else ""
    elif plannable:
        # A shape goes beside its tool's name; with shapes, "; " parts the tools (their
        # shapes have commas of their own). A tool with a signature has a line of its own.
        listed = [
            f"{name} {shapes.pop(name)}" if name in shapes else name
            for name in plannable
            if name not in typed
        ]
        lined = [typed[name] for name in plannable if name in typed]
        tools = (
            f"\nTools you can plan: {('; ' if returns else ', ').join(listed)}." if listed else ""
        )
        if lined:
            head = "Also plannable" if listed else "Tools you can plan"
            tools += f"\n{head} (arg?: optional):\n" + "\n".join(lined)
    else:
        tools = "\nNo tool can be planned now (plannable is empty): call tools directly."
    shaped = (
        "\nTools return: " + "; ".join(f"{name} {shape}" for name, shape in shapes.items()) + "."
        if shapes and plannable is None
        else ""
    )
    mcp = (
        f"\nIn a plan, an MCP tool is <server>__<tool> (servers: {', '.join(mcp_servers)})."
        if mcp_servers
        else ""
    )
    # A model that reaches the tools only through plans (each one signed) plans one call too.
    single = (
        "a single call is a plan of one step"
        if plannable and all(name in typed for name in plannable)
        else "for a single call, call the tool directly"
    )
    return (
        "Run several tool calls as one plan, without you between them, when you know which "
        "tools to call and later calls take arguments from earlier results; "
        f"{single}.\n"
        'Expressions ("bind", "when") are JSONata over {"steps": {<id>: <result>}}: = not ==, '
        "$not(x) not !, quote strings. Reading steps.<id> waits for that step; a path that "
        "matches nothing fails the step, so read each tool's documented return shape. "
        "Independent steps run in parallel.\n"
        "tool may also be a step kind: agent (a model loop, only for calls you cannot know in "
        "advance), map, reduce or exit; a rejection shows its form.\n"
        "After a failed plan, resubmit: a step with the same id, tool and arguments as one "
        "that ended ok is reused; prior.<id> reads its result.\n"
        f"The plan is checked before anything runs (at most {max_steps} steps): a rejection "
        "lists every problem and its fix." + tools + shaped + mcp
    )
