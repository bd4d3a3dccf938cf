"""The state every check shares: the problems found so far, each naming the step, the field
and the fix, and how to write each step kind a problem was found in (sent with the rejection)."""

from __future__ import annotations

import contextlib
import difflib
from collections.abc import Collection, Iterable, Iterator
from typing import Any

from durable_plan.check.catalog import ToolCatalog
from durable_plan.language.errors import Problem
from durable_plan.language.plan_limits import (
    truncate_text,
)

MAX_PROBLEMS = 100


class CheckerState:
    """Problems, rules and context; the checks are written as layers over it."""

    def __init__(
        self,
        catalog: ToolCatalog | None,
        max_steps: int,
        durable: bool,
        prior: Collection[str] | None = None,
        *,
        checked_by_sender: bool = False,
    ) -> None:
        self.catalog = catalog
        self.max_steps = max_steps
        self.durable = durable
        self.problems: list[Problem] = []
        self.roots: tuple[str, ...] = ()
        self.declared_inputs: tuple[str, ...] | None = None
        """A plan file's declared input names (None: any name, or no plan file)."""
        """Names besides ``steps`` that expressions may read at the root (``inputs``)."""
        self._prefix = ""
        # step id -> dependency id -> the field that creates the edge (for cycle reports)
        self.edge_fields: dict[str, dict[str, str]] = {}
        self.prior = prior  # None: no conversation, nothing to read as prior
        self.prior_reads: dict[str, set[str]] = {}
        self._expression_chars = 0
        self.rules: dict[str, str] = {}
        """How to write each step kind a problem was found in, sent with the rejection."""
        self.checked_by_sender = checked_by_sender
        """``check_plan(checked_by_sender=True)``: checks left to the sender are skipped."""

    def add(self, code: Any, message: str, fix: str, step: str | None, fld: str | None) -> None:
        if self._prefix:
            fld = f"{self._prefix}.{fld}" if fld else self._prefix
        # A problem may echo what the model sent (a field name, a value): keep it short.
        cut = truncate_text
        self.problems.append(
            Problem(
                code,
                cut(message, 600),
                cut(fix, 600),
                cut(step, 80) if step else step,
                cut(fld, 120) if fld else fld,
            )
        )
        if len(self.problems) > MAX_PROBLEMS:
            del self.problems[MAX_PROBLEMS:]

    def _listed_all(self) -> bool:
        """No more problems are listed: the plan is refused, whatever else is found."""
        return len(self.problems) >= MAX_PROBLEMS

    def _closest(self, name: str, candidates: Iterable[str]) -> str | None:
        """The candidate closest to ``name`` (difflib's, for a problem's "did you mean"), or
        None; always None once ``MAX_PROBLEMS`` are listed: the plan is refused anyway, no
        more problems are listed, and a plan of thousands of misspelt names must not cost a
        string comparison against every candidate for each of them."""
        if self._listed_all():
            return None
        close = difflib.get_close_matches(name, list(candidates), n=1)
        return close[0] if close else None

    def _suggest(self, ref: str, ids: Iterable[str], fallback: str) -> str:
        close = self._closest(ref, ids)
        return f"did you mean '{close}'?" if close else fallback

    @contextlib.contextmanager
    def _rules_on_problems(self, kind: str, rules: str) -> Iterator[None]:
        """A problem found meanwhile sends ``rules`` (how to write ``kind``) with the rejection."""
        before = len(self.problems)
        try:
            yield
        finally:
            if len(self.problems) > before:
                self.rules.setdefault(kind, rules)

    @contextlib.contextmanager
    def _within(self, prefix: str) -> Iterator[None]:
        """Problems found meanwhile name fields under ``prefix`` (a map's ``args.do``)."""
        outer, self._prefix = self._prefix, prefix
        try:
            yield
        finally:
            self._prefix = outer


_UNION_TAGS = frozenset(
    {"str", "int", "float", "bool", "list", "dict", "list[...]", "dict[str,...]"}
)
