"""The agent step's loop, written once for a Strands ``Agent`` and a ``TemporalAgent``.

One agent definition, two runners (as pydantic-ai does): in-process the loop is
a plain Strands ``Agent`` over the registry's tools; durably it is a
``TemporalAgent`` in its own child workflow, whose model rounds are model
activities and whose tools are the registry's activities. Both call
``run_agent_step``, so the bound (``max_iterations`` model calls, the answering
one included), the schema check and the result shape cannot drift apart.

The answer is Strands structured output over the step's JSON schema: a schema
miss goes back to the model as a tool error and costs a round; a budget spent
without a conforming answer gives ``final: false`` and ``output: {}``, never a
made-up result.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping
from typing import Any, ClassVar

from pydantic import BaseModel, model_validator
from strands.hooks import AfterModelCallEvent, AfterToolCallEvent, HookProvider, HookRegistry
from strands.types.exceptions import StructuredOutputException

from durable_plan.check.json_schema import validator_for
from durable_plan.language.step_path import StepPath, StepPathError, parse
from durable_plan.run.events import SILENT, Emitter, add_usage, usage_of

ANSWER_TOOL = "answer"
BUILTIN_SYSTEM_PROMPT = (
    "You are one step of a larger automated plan, not a chat. Use the tools to find what the "
    "task needs; call a tool again only when an earlier result says you must. When you know "
    f"the answer, call the `{ANSWER_TOOL}` tool with an object that matches its schema exactly. "
    "Never invent values you did not find; if you cannot complete the task, say so briefly."
)


def system_prompt(extra: str | None) -> str:
    return f"{BUILTIN_SYSTEM_PROMPT}\n\n{extra}" if extra else BUILTIN_SYSTEM_PROMPT


def output_model(schema: Mapping[str, Any]) -> type[BaseModel]:
    """A pydantic class Strands can use for structured output, backed by a JSON schema.

    Strands needs a pydantic model; the step declares a JSON schema. The model
    presents exactly that schema to the model and validates with jsonschema
    (a miss is a ``ValueError``, which Strands hands back to the model to fix).
    """
    frozen = dict(schema)

    class Answer(BaseModel):
        data: dict[str, Any]
        schema_: ClassVar[dict[str, Any]] = frozen

        @model_validator(mode="before")
        @classmethod
        def _conforms(cls, value: Any) -> Any:
            if isinstance(value, Mapping) and set(value) == {"data"}:
                value = value["data"]
            validator = validator_for(cls.schema_)
            if validator is None:  # the plan check refuses such schemas; never trust one
                raise ValueError("the step's output_schema cannot be used to check answers")
            error = validator.first_error(value)
            if error is not None:
                where = "/".join(str(p) for p in error.absolute_path) or "the answer"
                raise ValueError(f"{where}: {error.message}")
            return {"data": dict(value)}

        @classmethod
        def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
            return {
                "title": ANSWER_TOOL,
                "description": "The step's answer.",
                **cls.schema_,
            }

    Answer.__name__ = ANSWER_TOOL
    Answer.__qualname__ = ANSWER_TOOL
    return Answer


SPARE_NTH = 1000
"""Where ``spare_call_path`` numbers from: past any count of calls one message can hold."""


class RoundTracker(HookProvider):
    """Counts model rounds and their tokens, records each tool call with the round that
    made it, and says so as events (``agent_round``, ``agent_tool_call``): the one source
    of an agent step's progress for both runners."""

    def __init__(self, events: Emitter = SILENT, step_id: str | None = None) -> None:
        """``step_id``: the agent step's call inside its run (``e1``, an item's ``e1/do.3``):
        its calls' paths are ``<step_id>/agent.<round>/<tool>`` (``language.step_path``)."""
        self.rounds = 0
        self.calls: list[dict[str, Any]] = []
        self.usage: dict[str, int] | None = None
        self._events = events
        self._step = step_id
        self._place: dict[str, int] = {}  # a tool use's place in its round's message
        self._order: list[tuple[int, int]] = []  # (round, place) of each entry of ``calls``
        self._nth: dict[str, int] = {}
        """A tool use's place among its round's calls to the same tool (by ``toolUseId``,
        recorded in history): the order the model wrote them, never the order they ran."""

    def call_path(self, tool_use: Mapping[str, Any]) -> str | None:
        """The path of this tool call of the current round (None: no step, or a tool name
        no path can hold, one the model made up)."""
        if not self._step:
            return None
        try:
            return str(
                parse(self._step)
                .round(max(self.rounds, 1))
                .call(str(tool_use.get("name")), self._nth.get(str(tool_use.get("toolUseId")), 1))
            )
        except StepPathError:
            return None

    def spare_call_path(self, tool: str, serial: int) -> str:
        """A path no numbered call of the round can have (``<tool>~<SPARE_NTH + serial>``),
        for a call the message cannot name apart: a ``toolUseId`` the model repeated in one
        message, or a loop without a step. Two calls sharing an activity id would have the
        server refuse the workflow task on every retry."""
        step = parse(self._step) if self._step else StepPath.of("agent")
        return str(step.round(max(self.rounds, 1)).call(tool, SPARE_NTH + serial))

    def _number_calls(self, message: Mapping[str, Any] | None) -> None:
        seen: dict[str, int] = {}
        for place, block in enumerate((message or {}).get("content") or ()):
            use = block.get("toolUse") if isinstance(block, Mapping) else None
            if isinstance(use, Mapping):
                name = str(use.get("name"))
                seen[name] = seen.get(name, 0) + 1
                self._nth[str(use.get("toolUseId"))] = seen[name]
                self._place[str(use.get("toolUseId"))] = place

    def register_hooks(self, registry: HookRegistry, **kwargs: Any) -> None:
        registry.add_callback(AfterModelCallEvent, self._round)
        registry.add_callback(AfterToolCallEvent, self._tool)

    def _round(self, event: AfterModelCallEvent) -> None:
        self.rounds += 1
        usage = None
        if event.stop_response is not None:
            self._number_calls(event.stop_response.message)
            metadata = event.stop_response.message.get("metadata")
            if isinstance(metadata, dict):
                usage = usage_of(metadata.get("usage"))
        self.usage = add_usage(self.usage, usage)
        self._events.emit(
            "agent_round",
            step=self._step,
            path=self._round_path(),
            round=self.rounds,
            status="failed" if event.exception is not None else "ok",
            error=None if event.exception is None else str(event.exception),
            usage=usage,
        )

    def _tool(self, event: AfterToolCallEvent) -> None:
        name = event.tool_use["name"]
        if name != ANSWER_TOOL:
            path = self.call_path(event.tool_use)
            call: dict[str, Any] = {"tool": name, "round": self.rounds}
            if path is not None:
                call["path"] = path
            # In the order the model wrote the calls, not the order they ended (a round's
            # calls run concurrently): both runners list them alike.
            order = (self.rounds, self._place.get(str(event.tool_use.get("toolUseId")), 0))
            at = bisect.bisect(self._order, order)
            self._order.insert(at, order)
            self.calls.insert(at, call)
            failed = event.result.get("status") == "error"
            self._events.emit(
                "agent_tool_call",
                step=self._step,
                path=path,
                tool=name,
                round=self.rounds,
                status="failed" if failed else "ok",
            )

    def _round_path(self) -> str | None:
        try:
            return str(parse(self._step).round(self.rounds)) if self._step else None
        except StepPathError:
            return None


async def run_agent_step(
    agent: Any,
    prompt: str,
    schema: Mapping[str, Any],
    max_iterations: int,
    *,
    tracker: RoundTracker | None = None,
) -> dict[str, Any]:
    """Run the loop on ``agent``; the step's result (``output``, ``iterations``, ...).

    ``tracker`` lets a caller watch the rounds as they happen (``progress``).
    """
    answer = output_model(schema)
    tracker = tracker if tracker is not None else RoundTracker()
    agent.hooks.add_hook(tracker)
    output: dict[str, Any] = {}
    final = False
    try:
        result = await agent.invoke_async(
            prompt, structured_output_model=answer, limits={"turns": max_iterations}
        )
        structured = getattr(result, "structured_output", None)
        if isinstance(structured, answer):
            output, final = dict(structured.data), True  # type: ignore[attr-defined]
    except StructuredOutputException:
        final = False  # the budget ran out before a conforming answer
    step_result: dict[str, Any] = {
        "output": output if final else {},
        "iterations": tracker.rounds,
        "tools_called": tracker.calls,
        "final": final,
    }
    if tracker.usage is not None:
        step_result["usage"] = tracker.usage  # the step's model tokens (PlanRun: the ledger's)
    return step_result
