"""What an expression reads: one walk over JSONata's parsed tree.

Apart from ``analysis.py`` (which parses and builds the ``Expression``) because the walk
is the long, intricate part: which steps, paths, ``prior`` results and plan-file inputs
an expression reads, which functions it calls, and which reads it guards. Dependencies
are read from the tree, not the text, so ``$lookup(steps, 'a')`` creates an edge and the
string ``'see steps.manual'`` does not.
"""

from __future__ import annotations

from typing import Any

from durable_plan.expressions.forms import _is_name

INPUTS_ROOT = "inputs"
"""Beside ``steps`` in a plan file: its input values (``inputs.<name>``), checked against
the names the file declares."""
PRIOR_ROOT = "prior"
"""Beside ``steps``: results of steps that ended ok in earlier plans of the conversation
(``prior.<id>.<field>``, see ``reuse.py``). They create no dependency."""

_SKIP_ATTRS = frozenset({"_outer_instance", "outer", "seeking_parent", "tuple", "focus", "token"})
_RELATIVE_ATTRS = frozenset({"stages", "predicate", "group"})
_LEAVES = frozenset({type(None), str, int, float, bool})
"""Attribute values the walk returns from at once: skipped without the call."""


class _Analysis:
    """Walks the AST once, collecting step references and function names.

    ``_relative`` counts how deep the walk is inside path steps after the first
    and inside filters, where the context is no longer the root: there, ``$``,
    ``*`` and ``**`` read the current item, not ``{"steps": ...}``. At the root
    they (and ``$$`` anywhere) read steps the checker cannot name.
    """

    def __init__(self) -> None:
        self.refs: set[str] = set()
        self.dynamic: list[str] = []
        self.paths: list[tuple[str, ...]] = []
        self.functions: set[str] = set()
        self.required: list[tuple[str, ...]] = []
        self._seen: set[int] = set()
        self._relative = 0
        self._optional = 0
        self.bare_names: list[str] = []
        self.signatures = 0
        self.prior_paths: list[tuple[str, ...]] = []
        self.prior_required: list[tuple[str, ...]] = []
        self.prior_dynamic: list[str] = []
        self.input_reads: list[str] = []
        self.shape_paths: list[tuple[str, ...]] = []
        self.guarded_paths: list[tuple[str, ...]] = []
        self._guarding = 0

    def visit(self, node: Any) -> None:
        if node is None or isinstance(node, str | int | float | bool):
            return
        if isinstance(node, list | tuple):
            for item in node:
                self.visit(item)
            return
        if not hasattr(node, "__dict__") or id(node) in self._seen:
            return
        self._seen.add(id(node))
        kind = getattr(node, "type", None)
        value = getattr(node, "value", None)
        if kind == "variable" and isinstance(value, str):
            if value == "$":
                self.dynamic.append("$$")
            elif value == "":
                if not self._relative:
                    self.dynamic.append("$")
            else:
                self.functions.add(value)
        elif kind in ("wildcard", "descendant") and not self._relative:
            self.dynamic.append(str(value))
        elif kind == "name" and value == PRIOR_ROOT and not self._relative:
            self.prior_dynamic.append(PRIOR_ROOT)  # all of prior, e.g. $lookup(prior, $x)
        elif kind == "name" and isinstance(value, str) and not self._relative:
            # A field of the root, which holds only ``steps``: never matches. A model
            # writes this for a literal ("bind": {"name": "goblin"}).
            self.bare_names.append(value)
        if kind == "lambda":
            if getattr(node, "signature", None) is not None:
                self.signatures += 1
            # A lambda's body reads whatever it is applied to, not the root.
            self._visit_relative([getattr(node, "body", None), getattr(node, "arguments", None)])
            return
        if kind == "function" and self._visit_lookup(node):
            return
        if self._tests_existence(node):
            self._optional += 1
            try:
                for name, child in vars(node).items():
                    if type(child) not in _LEAVES and name not in _SKIP_ATTRS:
                        self._visit_guard(child) if self._guards(kind, name) else self.visit(child)
            finally:
                self._optional -= 1
            return
        if kind == "path":
            if not (
                self._visit_steps_path(node)
                or self._visit_prior_path(node)
                or self._visit_inputs_path(node)
            ):
                self._visit_path(node)
            return
        for name, child in vars(node).items():
            if type(child) in _LEAVES or name in _SKIP_ATTRS:
                continue  # most of a node's ~50 attributes: None, flags, positions
            if name in _RELATIVE_ATTRS:
                self._visit_relative(child)
            else:
                self.visit(child)

    @staticmethod
    def _guards(kind: Any, name: str) -> bool:
        """The part of a conditional or ``$exists`` that tests whether a value is there."""
        return (kind == "condition" and name == "condition") or (
            kind == "function" and name == "arguments"
        )

    def _visit_guard(self, node: Any) -> None:
        self._guarding += 1
        try:
            self.visit(node)
        finally:
            self._guarding -= 1

    def _visit_relative(self, node: Any) -> None:
        self._relative += 1
        try:
            self.visit(node)
        finally:
            self._relative -= 1

    def _visit_path(self, node: Any) -> None:
        """A path not rooted at ``steps``: its head reads the current context, the rest do not."""
        parts = list(getattr(node, "steps", None) or [])
        if parts:
            self.visit(parts[0])
        self._visit_relative(parts[1:])
        for name, child in vars(node).items():
            if type(child) not in _LEAVES and name not in _SKIP_ATTRS and name != "steps":
                self._visit_relative(child)

    def _visit_steps_path(self, node: Any) -> bool:
        parts = list(getattr(node, "steps", None) or [])
        rooted = not self._relative
        if parts and self._is_root(parts[0]):
            rooted = True  # $$ reads the root anywhere, $ only where the context is the root
            parts = parts[1:]
        if not parts or not _is_name(parts[0], "steps"):
            return False
        if rooted:
            shape = _shape_path(parts[1:])
            if shape:
                self.shape_paths.append(shape)
                if self._guarding:
                    self.guarded_paths.append(shape)
        # Stages/predicates and later parts may themselves hold expressions.
        self._visit_relative(getattr(parts[0], "stages", None))
        self._visit_relative(parts[1:])
        if len(parts) == 1:
            self.dynamic.append("steps")
            return True
        second = parts[1]
        if getattr(second, "type", None) == "name" and isinstance(second.value, str):
            self.refs.add(second.value)
            names: list[str] = []
            for part in parts[1:]:
                if getattr(part, "type", None) != "name" or not isinstance(part.value, str):
                    break
                names.append(part.value)
            self.paths.append(tuple(names))
            if not self._optional:
                self.required.append(tuple(names))
        else:
            self.dynamic.append("steps." + str(getattr(second, "value", "?")))
        return True

    def _visit_prior_path(self, node: Any) -> bool:
        """``prior.<id>...``: an earlier plan's result, recorded apart from ``steps``."""
        parts = list(getattr(node, "steps", None) or [])
        if parts and self._is_root(parts[0]):
            parts = parts[1:]
        if not parts or not _is_name(parts[0], PRIOR_ROOT):
            return False
        self._visit_relative(getattr(parts[0], "stages", None))
        self._visit_relative(parts[1:])
        names: list[str] = []
        for part in parts[1:]:
            if getattr(part, "type", None) != "name" or not isinstance(part.value, str):
                break
            names.append(part.value)
        if not names:
            second = f".{getattr(parts[1], 'value', '?')}" if len(parts) > 1 else ""
            self.prior_dynamic.append(PRIOR_ROOT + second)
            return True
        self.prior_paths.append(tuple(names))
        if not self._optional:
            self.prior_required.append(tuple(names))
        return True

    def _visit_inputs_path(self, node: Any) -> bool:
        """``inputs.<name>...``: a plan file's input; the root stays readable as ``inputs``."""
        parts = list(getattr(node, "steps", None) or [])
        if parts and self._is_root(parts[0]):
            parts = parts[1:]
        if len(parts) < 2 or not _is_name(parts[0], INPUTS_ROOT):
            return False
        self.bare_names.append(INPUTS_ROOT)  # the root itself, as a bare `inputs` reads it
        self._visit_relative(getattr(parts[0], "stages", None))
        self._visit_relative(parts[1:])
        second = parts[1]
        if getattr(second, "type", None) == "name" and isinstance(second.value, str):
            self.input_reads.append(second.value)
        return True

    @staticmethod
    def _tests_existence(node: Any) -> bool:
        """Conditionals (``?:``, ``??``, ``a ? b : c``) and ``$exists`` may read absent fields."""
        kind = getattr(node, "type", None)
        if kind == "condition":
            return True
        procedure = getattr(node, "procedure", None)
        return kind == "function" and getattr(procedure, "value", None) == "exists"

    def _is_root(self, node: Any) -> bool:
        """``$$`` anywhere, or ``$`` where the context is still the root."""
        if getattr(node, "type", None) != "variable":
            return False
        value = getattr(node, "value", None)
        return value == "$" or (value == "" and not self._relative)

    def _visit_lookup(self, node: Any) -> bool:
        procedure = getattr(node, "procedure", None)
        args = list(getattr(node, "arguments", None) or [])
        if getattr(procedure, "value", None) != "lookup" or len(args) != 2:
            return False
        target = args[0]
        target_parts = list(getattr(target, "steps", None) or [])
        if target_parts and self._is_root(target_parts[0]):
            target_parts = target_parts[1:]
        if not (len(target_parts) == 1 and _is_name(target_parts[0], "steps")):
            return False
        self.functions.add("lookup")
        key = args[1]
        if getattr(key, "type", None) == "string" and isinstance(key.value, str):
            self.refs.add(key.value)
            self.paths.append((key.value,))
        else:
            self.dynamic.append("$lookup(steps, <computed>)")
            self.visit(key)
        return True


_PASSING_STAGES = frozenset({"filter", "index"})
"""Stages after which a path's next name still reads a field of the items: a filter keeps
some of them, ``#$i`` binds their positions."""


def _shape_path(parts: list[Any]) -> tuple[str, ...]:
    """The names after ``steps`` that each read a field of the value before: the first is
    the step id. Stops at anything else, and after a name whose next step reads from
    elsewhere (a focus ``@$x`` or an ancestor ``%`` keeps the previous context)."""
    names: list[str] = []
    for part in parts:
        if getattr(part, "type", None) != "name" or not isinstance(part.value, str):
            break
        names.append(part.value)
        stages = getattr(part, "stages", None) or []
        if (
            getattr(part, "focus", None) is not None
            or getattr(part, "ancestor", None) is not None
            or getattr(part, "group", None) is not None
            or any(getattr(stage, "type", None) not in _PASSING_STAGES for stage in stages)
        ):
            break
    return tuple(names)
