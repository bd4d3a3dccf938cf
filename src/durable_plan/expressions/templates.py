"""Prompt templates: text with ``{{ <JSONata> }}`` placeholders (an agent step's ``prompt`` and
``system_prompt``), parsed once; each placeholder is an expression like any binding."""

from __future__ import annotations

import re

from durable_plan.expressions.analysis import Expression, ExpressionSyntaxError, parse

_PLACEHOLDER = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)

Template = tuple[str | Expression, ...]
"""A prompt: literal text and ``{{ expression }}`` placeholders, in order."""


def parse_template(text: str) -> Template:
    """Split ``text`` at its ``{{ }}`` placeholders; raises ExpressionSyntaxError."""
    parts: list[str | Expression] = []
    position = 0
    for match in _PLACEHOLDER.finditer(text):
        if match.start() > position:
            parts.append(text[position : match.start()])
        source = match.group(1).strip()
        if not source:
            raise ExpressionSyntaxError("an empty {{ }} placeholder")
        parts.append(parse(source))
        position = match.end()
    if position < len(text):
        parts.append(text[position:])
    return tuple(parts)


def template_expressions(template: Template) -> list[Expression]:
    return [part for part in template if isinstance(part, Expression)]
