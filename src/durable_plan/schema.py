"""The plan tool as the model sees it: an input schema and a description.

The schema is generated from the pydantic contract (so the two cannot drift),
with ``$ref``s inlined because several providers reject references in tool
schemas. The description teaches the language in the few lines a model reads.
"""

from __future__ import annotations

from typing import Any

from durable_plan.plan import DEFAULT_MAX_STEPS, Plan

PLAN_TOOL_NAME = "submit_workflow_plan"


def plan_input_schema() -> dict[str, Any]:
    """JSON schema of a plan with every ``$ref`` inlined."""
    schema = Plan.model_json_schema()
    defs = schema.pop("$defs", {})
    inlined: dict[str, Any] = _inline(schema, defs)
    return inlined


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


def plan_tool_description(
    plannable: list[str] | None = None, max_steps: int = DEFAULT_MAX_STEPS
) -> str:
    """The tool description: when to plan, the language, and what comes back."""
    if plannable is None:
        tools = ""
    elif plannable:
        tools = f" Tools you can plan: {', '.join(plannable)}."
    else:
        tools = " No tool can be planned now (plannable is empty): call tools directly."
    return (
        "Run several tool calls as one plan, without waiting for you between them. Use it when "
        "you already know which tools to call and later calls take their arguments from earlier "
        "results (a chain of two or more); for a single call, call the tool directly.\n"
        'A plan is {"steps": [...], "returns": [ids], "final": bool}. Each step: '
        '"id" (lowercase, e.g. "lookup"), "tool", literal "args", and "bind": argument -> '
        'JSONata expression over {"steps": {<id>: <result>}}, e.g. {"armour": '
        '"steps.lookup.armour"}; build arrays inline: "[steps.a.damage, steps.b.damage]". '
        "Read each tool's documented return shape: a path that matches nothing fails the step. "
        '"when": a JSONata condition that must be true or false; false skips the step and '
        "everything that depends on it (not_taken). JSONata uses = not ==, and $not(x) instead "
        'of ! or not; quote strings. "join": "any" lets a step after a branch run when at '
        "least one dependency ran. Steps run as soon as their own inputs are ready; "
        "independent steps run in parallel.\n"
        'An agent step ("tool": "agent") runs a small tool-calling loop for the one thing a '
        "plan cannot say: work where which tools to call, and how often, depends on what "
        'earlier calls return. args: "prompt" (may hold {{ steps.<id>.<field> }}), '
        '"output_schema" (a JSON Schema of type object), optional "tools" (names or patterns), '
        '"max_iterations" (default 8). It costs one model call per round, so use ordinary '
        'steps whenever you know the calls in advance. Its result is {"output", '
        '"iterations", "tools_called", "final"}; output is {} when final is false, so gate '
        'on it: "when": "steps.<id>.final ? steps.<id>.output.<field> : false".\n'
        '"returns" lists the step ids whose results you get back (default: all). Set '
        '"final": true when those results fully answer the user: the turn then ends with them '
        'and you are not asked again. "on_error": "fail_fast" (default) or "continue".\n'
        "After a failed plan, submit a corrected one: a step with the same id, tool and "
        "arguments as one that ended ok in an earlier plan is not run again (its result is "
        "reused; give it a new id to run it again), and prior.<id> reads such a result "
        'directly, e.g. {"armour": "prior.lookup.armour"}.\n'
        f"The whole plan is checked before anything runs (at most {max_steps} steps); a rejected "
        'plan lists every problem and ran nothing. You get back {"status", "returned": '
        '{<id>: <result>}, "not_ok": [steps that failed, were skipped or not taken]}.' + tools
    )
