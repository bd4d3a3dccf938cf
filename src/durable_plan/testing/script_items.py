"""What a script is made of: turns of text blocks, tool calls and structured outputs.

Apart from the model (``scripted_model.py``) because a test writes scripts with these
alone (``say``, ``call``, ``output``, ``turn``, ``SKIPPED``) and never needs to read how
the model plays them; the model reads them back as ``Turn`` values.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from strands.types.event_loop import StopReason


@dataclass(frozen=True)
class Text:
    """A text block in a model response."""

    text: str


@dataclass(frozen=True)
class ToolCall:
    """A tool call in a model response.

    ``tool_use_id`` defaults to ``f"tooluse_{position}_{index}"``, where ``index`` counts the
    tool calls (and structured outputs) of the same turn.
    """

    name: str
    input: Mapping[str, Any] = field(default_factory=dict)
    tool_use_id: str | None = None


@dataclass(frozen=True)
class StructuredOutput:
    """A call to Strands' structured-output tool (``Agent(structured_output_model=...)``).

    The tool's name is looked up in the ``tool_specs`` of the model call (the spec whose
    description contains :data:`STRUCTURED_OUTPUT_TOOL_MARKER`) unless ``tool_name`` is given.
    The same item also answers the legacy :meth:`ScriptedModel.structured_output` API.
    """

    data: Mapping[str, Any]
    tool_name: str | None = None
    tool_use_id: str | None = None


Item: TypeAlias = Text | ToolCall | StructuredOutput


@dataclass(frozen=True)
class Turn:
    """One model response: text blocks and/or tool calls, in order.

    A turn with at least one tool call (or structured output) stops with ``"tool_use"``,
    otherwise with ``"end_turn"``. Several tool calls in one turn are parallel tool calls.
    """

    items: tuple[Item, ...]

    @property
    def stop_reason(self) -> StopReason:
        """``"tool_use"`` if the turn calls a tool, else ``"end_turn"``."""
        if any(isinstance(item, ToolCall | StructuredOutput) for item in self.items):
            return "tool_use"
        return "end_turn"


#: Placeholder for a position the model never plays (an assistant message a hook appended,
#: e.g. the final message of ``AfterToolsEvent.end_turn``). Playing it (or any empty turn) is an
#: error.
SKIPPED = Turn(items=())

TurnLike: TypeAlias = Turn | Item | str | Sequence[Item | str]


def say(text: str) -> Text:
    """A text block."""
    return Text(text)


def call(tool: str, /, **input: Any) -> ToolCall:
    """A tool call with a generated id: ``call("roll_attack", armour=15)``."""
    return ToolCall(tool, dict(input))


def output(data: Mapping[str, Any], /, *, tool_name: str | None = None) -> StructuredOutput:
    """A structured-output answer (validated by Strands against the output model)."""
    return StructuredOutput(dict(data), tool_name=tool_name)


def turn(*items: Item | str) -> Turn:
    """A model response made of the given items (a ``str`` is a text block)."""
    return Turn(tuple(_item(i) for i in items))


def _item(value: object) -> Item:
    if isinstance(value, str):
        return Text(value)
    if isinstance(value, Text | ToolCall | StructuredOutput):
        return value
    raise TypeError(f"not a script item: {value!r} (use say(), call(), output())")


def _as_turn(value: TurnLike) -> Turn:
    if isinstance(value, Turn):
        return value
    if isinstance(value, str | Text | ToolCall | StructuredOutput):
        return Turn((_item(value),))
    return Turn(tuple(_item(v) for v in value))
