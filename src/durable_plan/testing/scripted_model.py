"""A deterministic, stateless scripted model for tests and offline demos.

``ScriptedModel`` is a real :class:`strands.models.Model`: the real Strands agent loop (and,
under ``temporalio.strands_agents``, the real ``invoke_model`` activity) runs against it, but
each model response comes from a script instead of a provider.

Position rule
-------------
The model keeps **no** per-conversation state, because ``StrandsPlugin(models=...)`` builds one
model per name per worker and shares it between every workflow that worker runs. The script
position is therefore derived from the conversation passed to :meth:`ScriptedModel.stream`:

    position = number of messages with ``role == "assistant"`` in ``messages``

So the first model call of a conversation plays turn 0, the call after the first tool round
plays turn 1, and so on, across several ``invoke_async`` calls on the same agent. Every
assistant message counts, including one a hook appended without a model call (for example
``AfterToolsEvent.end_turn``): a script for a conversation that continues after such a turn must
leave a slot for it (use :data:`SKIPPED`). A conversation manager that drops old messages
shifts the position; tests using this model should keep the default (non-trimming) history.

One worker can serve several conversations with ``scripts={key: turns}``: the conversation's
first user message text selects the script, by exact match first, otherwise by the one key that
is a substring of that text (no match, or several substring matches, is an error).

Running past the end of a script raises :class:`ScriptExhaustedError`, naming the position.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, AsyncIterable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel
from strands.models import Model
from strands.types.content import Messages
from strands.types.streaming import StreamEvent
from strands.types.tools import ToolSpec
from temporalio.exceptions import ApplicationError

from durable_plan.testing.script_items import (
    SKIPPED,
    StructuredOutput,
    Text,
    ToolCall,
    Turn,
    TurnLike,
    _as_turn,
    call,
    output,
    say,
    turn,
)

__all__ = [
    "MODEL_ACTIVITY_NAMES",
    "SKIPPED",
    "STRUCTURED_OUTPUT_TOOL_MARKER",
    "ScriptError",
    "ScriptExhaustedError",
    "ScriptedModel",
    "StructuredOutput",
    "Text",
    "ToolCall",
    "Turn",
    "TurnLike",
    "call",
    "model_calls",
    "output",
    "say",
    "turn",
]

T = TypeVar("T", bound=BaseModel)

#: Activity types that ``temporalio.strands_agents.StrandsPlugin`` registers for model calls
#: (``ModelActivity.invoke_model`` / ``invoke_model_streaming`` in ``_model_activity.py``).
MODEL_ACTIVITY_NAMES: frozenset[str] = frozenset({"invoke_model", "invoke_model_streaming"})

#: Strands prefixes the structured-output tool's description with this text
#: (``strands/tools/structured_output/structured_output_tool.py``); the tool's name is the
#: pydantic model's class name.
STRUCTURED_OUTPUT_TOOL_MARKER = "This StructuredOutputTool"


# Script items (``Text``, ``ToolCall``, ``Turn``, ``say``, ``call``...): ``script_items.py``.


# --------------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------------


class ScriptError(ApplicationError):
    """A script cannot answer this model call.

    A non-retryable Temporal ``ApplicationError`` so that, inside the ``invoke_model``
    activity, a broken script fails the call at once instead of being retried; outside
    Temporal it is an ordinary exception.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message, type=type(self).__name__, non_retryable=True)


class ScriptExhaustedError(ScriptError):
    """The conversation asked for a turn past the end of its script."""


# --------------------------------------------------------------------------------------------
# The model
# --------------------------------------------------------------------------------------------


class ScriptedModel(Model):
    """A Strands model that answers from a script. Stateless: safe to share.

    Args:
        script: The turns of a single conversation (used when ``scripts`` has no match, or
            alone). Each entry is a :class:`Turn`, one item, a ``str``, or a list of items.
        scripts: Scripts keyed by the first user prompt (exact text or a substring of it).
        latency_s: Simulated latency: ``asyncio.sleep(latency_s)`` at every model call.
        name: Reported as ``model_id`` in the config.
    """

    def __init__(
        self,
        script: Sequence[TurnLike] | None = None,
        latency_s: float = 0.0,
        name: str = "scripted",
        *,
        scripts: Mapping[str, Sequence[TurnLike]] | None = None,
    ) -> None:
        if script is None and not scripts:
            raise ValueError("ScriptedModel needs a script or scripts={prompt: turns}")
        self._script: tuple[Turn, ...] | None = (
            None if script is None else tuple(_as_turn(t) for t in script)
        )
        self._scripts: dict[str, tuple[Turn, ...]] = {
            key: tuple(_as_turn(t) for t in turns) for key, turns in (scripts or {}).items()
        }
        self.config: dict[str, Any] = {"model_id": name, "latency_s": latency_s}

    # -- configuration -----------------------------------------------------------------------

    def update_config(self, **model_config: Any) -> None:
        """Update the configuration (``model_id``, ``latency_s``, ...)."""
        self.config.update(model_config)

    def get_config(self) -> dict[str, Any]:
        """Return a copy of the configuration."""
        return dict(self.config)

    @property
    def name(self) -> str:
        """The model's name (``model_id``)."""
        return str(self.config.get("model_id", "scripted"))

    # -- script lookup -----------------------------------------------------------------------

    def turn_for(self, messages: Messages) -> tuple[int, Turn]:
        """The position and turn this conversation's next model call plays."""
        key, script = self._select_script(messages)
        position = sum(1 for m in messages if m.get("role") == "assistant")
        where = f"script {key!r}" if key is not None else "the script"
        if position >= len(script):
            raise ScriptExhaustedError(
                f"ScriptedModel {self.name!r}: {where} is exhausted: the model was called at "
                f"position {position} ({position} assistant messages in the conversation) but "
                f"the script has only {len(script)} turn(s)"
            )
        played = script[position]
        if not played.items:
            raise ScriptError(
                f"ScriptedModel {self.name!r}: {where} has an empty turn (SKIPPED) at position "
                f"{position}: a hook was expected to end the turn there, but the model was called"
            )
        return position, played

    def _select_script(self, messages: Messages) -> tuple[str | None, tuple[Turn, ...]]:
        prompt = _first_user_text(messages)
        if self._scripts:
            if prompt in self._scripts:
                return prompt, self._scripts[prompt]
            matches = [k for k in self._scripts if k and k in prompt]
            if len(matches) == 1:
                return matches[0], self._scripts[matches[0]]
            if len(matches) > 1:
                raise ScriptError(
                    f"ScriptedModel {self.name!r}: the first prompt {prompt[:80]!r} matches "
                    f"several scripts: {sorted(matches)}"
                )
        if self._script is not None:
            return None, self._script
        raise ScriptError(
            f"ScriptedModel {self.name!r}: no script for the first prompt {prompt[:80]!r}; "
            f"known keys: {sorted(self._scripts)}"
        )

    # -- Model API ---------------------------------------------------------------------------

    async def stream(
        self,
        messages: Messages,
        tool_specs: list[ToolSpec] | None = None,
        system_prompt: str | None = None,
        **kwargs: Any,
    ) -> AsyncIterable[StreamEvent]:
        """Play the turn at this conversation's position as Strands stream events."""
        position, played = self.turn_for(messages)
        latency = float(self.config.get("latency_s") or 0.0)
        if latency > 0:
            await asyncio.sleep(latency)
        for event in self.events_for(position, played, tool_specs, messages):
            yield event

    def events_for(
        self,
        position: int,
        played: Turn,
        tool_specs: Sequence[ToolSpec] | None,
        messages: Messages,
    ) -> list[StreamEvent]:
        """The stream events for one turn (the shapes Bedrock's converse stream produces)."""
        events: list[StreamEvent] = [{"messageStart": {"role": "assistant"}}]
        output_chars = 0
        call_index = 0
        for block_index, item in enumerate(played.items):
            if isinstance(item, Text):
                output_chars += len(item.text)
                events.append(
                    {
                        "contentBlockDelta": {
                            "contentBlockIndex": block_index,
                            "delta": {"text": item.text},
                        }
                    }
                )
                events.append({"contentBlockStop": {"contentBlockIndex": block_index}})
                continue
            if isinstance(item, ToolCall):
                name, data, given_id = item.name, item.input, item.tool_use_id
            else:
                name = item.tool_name or _structured_output_tool(tool_specs, position)
                data, given_id = item.data, item.tool_use_id
            tool_use_id = given_id or f"tooluse_{position}_{call_index}"
            call_index += 1
            payload = json.dumps(dict(data), separators=(",", ":"))
            output_chars += len(payload)
            events.append(
                {
                    "contentBlockStart": {
                        "contentBlockIndex": block_index,
                        "start": {"toolUse": {"toolUseId": tool_use_id, "name": name}},
                    }
                }
            )
            events.append(
                {
                    "contentBlockDelta": {
                        "contentBlockIndex": block_index,
                        "delta": {"toolUse": {"input": payload}},
                    }
                }
            )
            events.append({"contentBlockStop": {"contentBlockIndex": block_index}})
        events.append({"messageStop": {"stopReason": played.stop_reason}})
        input_tokens = _estimate_tokens(messages)
        output_tokens = (output_chars + 3) // 4
        events.append(
            {
                "metadata": {
                    "usage": {
                        "inputTokens": input_tokens,
                        "outputTokens": output_tokens,
                        "totalTokens": input_tokens + output_tokens,
                    },
                    "metrics": {
                        "latencyMs": int(float(self.config.get("latency_s") or 0.0) * 1000)
                    },
                }
            }
        )
        return events

    async def structured_output(
        self,
        output_model: type[T],
        prompt: Messages,
        system_prompt: str | None = None,
        **kwargs: Any,
    ) -> AsyncGenerator[dict[str, T | Any], None]:
        """Legacy ``Agent.structured_output()``: the current turn must hold one ``output()``."""
        position, played = self.turn_for(prompt)
        outputs = [i for i in played.items if isinstance(i, StructuredOutput)]
        if len(outputs) != 1:
            raise ScriptError(
                f"ScriptedModel {self.name!r}: structured_output() was called at position "
                f"{position}, but that turn has {len(outputs)} output() items (expected 1)"
            )
        latency = float(self.config.get("latency_s") or 0.0)
        if latency > 0:
            await asyncio.sleep(latency)
        yield {"output": output_model.model_validate(dict(outputs[0].data))}


# --------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------


def _first_user_text(messages: Messages) -> str:
    for message in messages:
        if message.get("role") == "user":
            return "".join(str(block.get("text", "")) for block in message.get("content", []))
    return ""


def _structured_output_tool(tool_specs: Sequence[ToolSpec] | None, position: int) -> str:
    names = [
        spec["name"]
        for spec in tool_specs or ()
        if STRUCTURED_OUTPUT_TOOL_MARKER in str(spec.get("description", ""))
    ]
    if len(names) != 1:
        raise ScriptError(
            f"ScriptedModel: output() at position {position} needs exactly one structured output "
            f"tool in tool_specs, found {names} (is structured_output_model set on the agent?)"
        )
    return names[0]


def _estimate_tokens(messages: Messages) -> int:
    try:
        return (len(json.dumps(messages, default=str)) + 3) // 4
    except (TypeError, ValueError):
        return 0


def model_calls(history: Any) -> int:
    """Count the model calls in a workflow history.

    Counts ``ActivityTaskScheduled`` events whose activity type is one of
    :data:`MODEL_ACTIVITY_NAMES`. ``history`` is a ``temporalio.client.WorkflowHistory``
    (``await handle.fetch_history()``), a history proto, or an iterable of ``HistoryEvent``.
    Child workflows have their own histories and are not included.
    """
    events: Iterable[Any] = getattr(history, "events", history)
    count = 0
    for event in events:
        if event.HasField("activity_task_scheduled_event_attributes"):
            attrs = event.activity_task_scheduled_event_attributes
            if attrs.activity_type.name in MODEL_ACTIVITY_NAMES:
                count += 1
    return count
