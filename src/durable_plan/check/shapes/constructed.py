"""Array and object constructors in a binding, typed part by part against the argument.

``"prices": "[steps.a.item, steps.b.item]"`` into a ``list[float]`` argument puts strings
where numbers go: without this, every step before the one that binds it ran (with its
side effects) and then that step failed on its arguments. Here each part of a constructor
is typed as JSONata builds the value, under the rule of every shape check: a part is
refused only when every value the declared shapes allow for it is one the argument's
schema refuses.

How JSONata builds the value decides what is sound:

* An array constructor drops a part that is undefined, and splices a part whose value is
  an array (one level: a path's list of numbers adds numbers), which may be empty. So a
  path part proves a wrong item only when it is surely there (``Read.present``: the
  field is required all the way, read through no list, in a result every run of this
  step has) and cannot be a list. A nested constructor (``[[1, 2]]``) is always there
  and kept whole, as one item; so is a literal.
* An object constructor leaves out a key whose value is undefined: a key's value is held
  against the argument's schema when it is surely there or the key is required there
  (left out, it fails too), and a key a closed object does not take is refused only when
  its value is surely there. A required key the constructor does not write is missing.
* A part the analysis cannot tell (a function call, a filter, a step without a shape) may
  be any value. ``prefixItems`` are read as "any of these", since splicing loses positions.
* A union (``anyOf``/``oneOf``, a type list, a nullable) refuses only if every branch does.

Every value the part may then have is of a type the argument's schema refuses there:
only then is the binding refused (``wrong_type``, like a plain path's). A plain path may
be typed as there (``checks``): a binding that matches nothing fails its step
anyway. A constructor always has a value, so its parts may not.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from durable_plan.check.shapes.compact import json_type
from durable_plan.check.shapes.text import MAX_LISTED, listing
from durable_plan.check.shapes.walk import (
    ANY_TYPE,
    Reached,
    Rooted,
    ShapeWalker,
    null_by_default,
    type_words,
    types_overlap,
)
from durable_plan.expressions.forms import Form, ListForm, LiteralForm, ObjectForm, PathForm
from durable_plan.language.plan_limits import brief

ITEM = "[]"
"""In ``Mismatch.at``: the items of the list before it."""


@dataclass(frozen=True)
class Mismatch:
    """Why a constructed value cannot be the argument, at one place inside it.

    ``at``: where, from the argument's name (``("prices", "[]")``: its items;
    ``("order", "total")``: a key). ``kind``: ``type`` (``parts`` are the parts written
    there, of ``found`` types, where ``wanted`` types go), ``missing`` (``names``: the
    required keys the object is built without; ``parts``: the keys it has) or
    ``unknown`` (a key a closed object does not take; ``names``: the keys it takes).
    ``suggestions``: fields of the same results that have the wanted type."""

    at: tuple[str, ...]
    kind: str
    parts: tuple[str, ...] = ()
    found: frozenset[str] = frozenset()
    wanted: frozenset[str] = frozenset()
    names: tuple[str, ...] = ()
    suggestions: tuple[str, ...] = ()


@dataclass(frozen=True)
class Read:
    """What the shapes say of a path part: what it reads (``Reached``), and whether it is
    ``present`` whenever the step runs (the result read has it for sure, and the step
    waits for every step it reads: an undefined part vanishes, and then fits)."""

    reached: Reached
    present: bool


ReadPath = Callable[[tuple[str, ...]], Read | None]
"""A path (step id first) to what the result's shape says is there; None: unknown."""
SuggestFields = Callable[[tuple[str, ...], frozenset[str]], list[str]]
"""A path to fields beside it of the wanted types (``steps.a.price`` for ``steps.a.item``)."""


class ConstructedTypes:
    """Types the parts of one plan's constructors (the walker's budget is the plan's)."""

    def __init__(self, walker: ShapeWalker, read: ReadPath, suggest: SuggestFields) -> None:
        self._walker = walker
        self._read = read
        self._suggest = suggest

    def mismatch(
        self, form: Form, schemas: Sequence[Rooted], at: tuple[str, ...]
    ) -> Mismatch | None:
        """Why ``form`` can meet none of ``schemas``; None when it may meet one. Of several
        branches' reasons, the one found deepest inside the value (the likely intent)."""
        alts: list[Rooted] = []
        for schema in schemas:
            expanded = self._walker.alternatives(schema)
            if expanded is None:
                return None
            alts += expanded
        best: Mismatch | None = None
        for alt in alts:
            reason = self._against(form, alt, at)
            if reason is None:
                return None
            if best is None or len(reason.at) > len(best.at):
                best = reason
        return best

    def _against(self, form: Form, alt: Rooted, at: tuple[str, ...]) -> Mismatch | None:
        wanted = self._walker.types(alt)
        if null_by_default(alt.node):
            wanted = wanted | {"null"}
        found = self._types(form)
        if found and not types_overlap(found, wanted):
            suggestions = self._suggest(form.path, wanted) if isinstance(form, PathForm) else []
            return Mismatch(at, "type", (describe(form),), found, wanted, (), tuple(suggestions))
        if isinstance(form, ListForm):
            return self._items(form, alt, at)
        if isinstance(form, ObjectForm):
            return self._entries(form, alt, at)
        return None

    def _types(self, form: Form) -> frozenset[str]:
        """The types ``form``'s value may have (as one value, not spliced)."""
        if isinstance(form, LiteralForm):
            return frozenset({json_type(form.value)})
        if isinstance(form, ListForm):
            return frozenset({"array"})
        if isinstance(form, ObjectForm):
            return frozenset({"object"})
        read = self._read(form.path)
        return ANY_TYPE if read is None else read.reached.types(self._walker)

    def _item_types(self, form: PathForm | LiteralForm) -> frozenset[str] | None:
        """The types of the items a part surely adds to a list; None when it may add none
        (undefined, or a list, which may be empty and is spliced)."""
        if isinstance(form, LiteralForm):
            return frozenset({json_type(form.value)})
        read = self._read(form.path)
        if read is None or not read.present or read.reached.through_list:
            return None
        types = read.reached.types(self._walker)
        return None if "array" in types or not types else types

    def _items(self, form: ListForm, alt: Rooted, at: tuple[str, ...]) -> Mismatch | None:
        items = self._walker.items_of(alt)
        wanted = self._walker.item_types([alt])
        item_at = (*at, ITEM)
        parts: list[str] = []
        found: set[str] = set()
        suggestions: list[str] = []
        deeper: Mismatch | None = None
        for part in form.parts:
            if part is None:
                continue  # any value: it may fit
            if isinstance(part, ListForm | ObjectForm):  # one item, kept whole
                reason = self.mismatch(part, items, item_at)
                if reason is None:
                    continue
                if reason.at == item_at and reason.kind == "type":
                    parts += reason.parts
                    found |= reason.found
                elif deeper is None:
                    deeper = reason
                continue
            types = self._item_types(part)
            if types is None or types_overlap(types, wanted):
                continue
            parts.append(describe(part))
            found |= types
            if isinstance(part, PathForm):
                suggestions += self._suggest(part.path, wanted)
        if parts:
            return Mismatch(
                item_at,
                "type",
                tuple(dict.fromkeys(parts)),
                frozenset(found),
                wanted,
                (),
                tuple(dict.fromkeys(suggestions)),
            )
        return deeper

    def _entries(self, form: ObjectForm, alt: Rooted, at: tuple[str, ...]) -> Mismatch | None:
        node, root = alt.node, alt.root
        props = node.get("properties")
        props = props if isinstance(props, Mapping) else {}
        patterns = node.get("patternProperties")
        extra = node.get("additionalProperties")
        required = node.get("required")
        required = required if isinstance(required, list) else []
        for key, value in form.entries:
            if key in props:
                sub = _child(props[key], root)
            elif isinstance(patterns, Mapping) and patterns:
                continue  # the key may match a pattern: any value of that schema
            elif extra is False:
                if value is not None and self._present(value):
                    names = tuple(k for k in props if isinstance(k, str))
                    return Mismatch((*at, key), "unknown", (describe(value),), names=names)
                continue  # (an undefined value leaves the key out)
            elif isinstance(extra, Mapping | Rooted):
                sub = _child(extra, root)
            else:
                continue  # an open object: any key, any value
            if value is None:
                continue
            if key not in required and not self._present(value):
                continue  # undefined, the key is left out: and it is optional
            reason = self.mismatch(value, [sub], (*at, key))
            if reason is not None:
                return reason
        keys = {key for key, _ in form.entries}
        missing = [r for r in required if isinstance(r, str) and r not in keys]
        if missing:  # the constructor's keys are all written out: provably absent
            written = tuple(key for key, _ in form.entries)
            return Mismatch(at, "missing", written, names=tuple(dict.fromkeys(missing)))
        return None

    def _present(self, form: Form) -> bool:
        """The part always has a value (a literal and a constructor do; a path, if ``Read``
        says so)."""
        if not isinstance(form, PathForm):
            return True
        read = self._read(form.path)
        return read is not None and read.present


def describe(form: Form) -> str:
    """A part as the message names it."""
    if isinstance(form, PathForm):
        return "steps." + ".".join(form.path)
    if isinstance(form, LiteralForm):
        return f"the literal {brief(form.value)}"
    return "a list" if isinstance(form, ListForm) else "an object"


def location(at: Sequence[str]) -> str:
    """``("order", "lines", "[]", "qty")`` -> ``order.lines[].qty``."""
    text = at[0] if at else ""
    for name in at[1:]:
        text += name if name == ITEM else f".{name}"
    return text


def _child(node: object, root: object) -> Rooted:
    return node if isinstance(node, Rooted) else Rooted(node, root)


def constructed_problem(found: Mismatch, name: str, tool: str) -> tuple[str, str]:
    """The message and fix for a constructor's part that cannot be the argument's."""
    at, wanted = location(found.at), found.wanted
    if found.kind == "missing":
        missing = ", ".join(f"'{k}'" for k in found.names)
        extra = [k for k in found.parts if k not in found.names]
        renames = [
            f"'{k}' for '{close[0]}'"
            for k in found.names
            if (close := difflib.get_close_matches(k, extra[: MAX_LISTED * 8], 1, 0.6))
        ]
        fix = "add " + ", ".join(f'"{k}": ...' for k in found.names) + f" to the object at '{at}'"
        return (
            f"binding '{name}' builds '{at}' without {missing}, which tool '{tool}' requires",
            f"did you mean {', '.join(renames)}? ({fix})" if renames else fix,
        )
    if found.kind == "unknown":
        key, parent = found.at[-1], location(found.at[:-1])
        takes = f"it takes {listing(found.names)}" if found.names else "it takes no keys"
        close = difflib.get_close_matches(key, list(found.names[: MAX_LISTED * 8]), 1, 0.5)
        return (
            f"binding '{name}' sets '{at}', but tool '{tool}' takes no key '{key}' in "
            f"'{parent}' ({takes})",
            f"did you mean '{close[0]}'?" if close else f"remove '{key}' from the object",
        )
    if found.at[-1] == ITEM:
        parent = location(found.at[:-1])
        inside = "" if len(found.at) == 2 else f" in '{parent}'"
        which = (
            ""
            if all(p in ("a list", "an object") for p in found.parts)
            else f", which are {type_words(found.found, plural=True)}"
            if len(found.parts) > 1
            else f", which is {type_words(found.found)}"
        )
        fix = (
            f"list fields that are {type_words(wanted, plural=True)}: {listing(found.suggestions)}"
            if found.suggestions
            else f"list only {type_words(wanted, plural=True)} in '{parent}'"
        )
        if "a list" in found.parts:
            fix += " (a [...] inside a list stays one item: write its elements in the outer list)"
        return (
            f"binding '{name}' lists {listing(found.parts)}{inside}{which}, but tool "
            f"'{tool}' takes the items of '{parent}' as {type_words(wanted, plural=True)}",
            fix,
        )
    part = found.parts[0] if found.parts else "a value"
    if len(found.at) == 1:
        what = f"binding '{name}' is {part}"
        fix = f"bind a value that is {type_words(wanted)}"
        if part == "a list" and "string" in wanted:
            fix += " ($join([...], ', ') makes one text of a list of strings)"
    else:
        which = "" if part in ("a list", "an object") else f", which is {type_words(found.found)}"
        what = f"binding '{name}' sets '{at}' to {part}{which}"
        fix = f"set '{at}' to a value that is {type_words(wanted)}"
    if found.suggestions:
        fix = f"use a field that is {type_words(wanted)}: {listing(found.suggestions)}"
    return f"{what}, but tool '{tool}' takes '{at}' as {type_words(wanted)}", fix
