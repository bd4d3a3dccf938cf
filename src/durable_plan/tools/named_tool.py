"""The shape every plan-made Strands tool shares: a name and a spec, given once."""

from __future__ import annotations

from strands.types.tools import AgentTool, ToolSpec


class NamedTool(AgentTool):
    """A Strands tool whose name and spec are fixed at construction; subclasses stream."""

    def __init__(self, name: str, spec: ToolSpec) -> None:
        super().__init__()
        self._name = name
        self._spec = spec

    @property
    def tool_name(self) -> str:
        return self._name

    @property
    def tool_type(self) -> str:
        return "durable_plan"

    @property
    def tool_spec(self) -> ToolSpec:
        return self._spec
