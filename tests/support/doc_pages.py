"""The documentation as the tests read it: README.md and every page under docs/, and their
fenced code blocks with the marker comment each one carries (``<!-- file: PATH -->``,
``<!-- not-run: REASON -->``, ``<!-- graph: PATH -->``, ``<!-- validate: PATH -->``)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"

FENCE = re.compile(
    r"(?:^ *<!-- (?P<marker>[a-z-]+): (?P<value>[^\n]*?) -->\n)?"
    r"^(?P<indent> *)```(?P<lang>\w*)\n(?P<body>.*?)^(?P=indent)```$",
    re.S | re.M,
)
"""A fenced block (indented too, in a list) and the marker comment on the line before it."""


@dataclass(frozen=True)
class Block:
    page: str  # the page's path in the repository, e.g. "docs/guides/cli.md"
    lang: str
    body: str
    marker: str | None  # "file", "not-run", "graph", "validate", or None
    value: str | None  # the marker's path or reason

    def where(self) -> str:
        return f"{self.page}: ```{self.lang} block starting {self.body[:60]!r}"


def pages() -> dict[str, str]:
    """Every page's text by its path in the repository: the README first, then docs/."""
    found = {"README.md": (ROOT / "README.md").read_text(encoding="utf-8")}
    for path in sorted(DOCS.rglob("*.md")):
        found[path.relative_to(ROOT).as_posix()] = path.read_text(encoding="utf-8")
    return found


def page(name: str) -> str:
    """One page's text, e.g. ``page("docs/guides/cli.md")``."""
    return (ROOT / name).read_text(encoding="utf-8")


def blocks() -> list[Block]:
    found = []
    for name, text in pages().items():
        for m in FENCE.finditer(text):
            indent = len(m["indent"])
            body = "".join(line[indent:] for line in m["body"].splitlines(keepends=True))
            found.append(Block(name, m["lang"], body, m["marker"], m["value"]))
    return found


def slugs(text: str) -> set[str]:
    """The anchors of a page's headings, as MkDocs' ``toc`` extension makes them (lower case,
    punctuation dropped, spaces to hyphens) for the plain headings these pages use."""
    found = set()
    in_fence = False
    for line in text.splitlines():
        if line.startswith("```"):
            in_fence = not in_fence
        heading = re.match(r"^#{1,6} (.*)$", line)
        if heading and not in_fence:
            words = re.sub(r"[^\w\s-]", "", heading.group(1).replace("`", "")).strip().lower()
            found.add(re.sub(r"[-\s]+", "-", words))
    return found
