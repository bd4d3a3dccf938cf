"""Test helpers: a deterministic scripted Strands model and history helpers."""

from .scripted_model import (
    MODEL_ACTIVITY_NAMES,
    SKIPPED,
    ScriptedModel,
    ScriptError,
    ScriptExhaustedError,
    StructuredOutput,
    Text,
    ToolCall,
    Turn,
    TurnLike,
    call,
    model_calls,
    output,
    say,
    turn,
)

__all__ = [
    "MODEL_ACTIVITY_NAMES",
    "SKIPPED",
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
