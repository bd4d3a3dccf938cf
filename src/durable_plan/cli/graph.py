"""Pictures of a plan: its DAG as Mermaid or Graphviz DOT text, and SVG/PNG through ``dot``.

The picture is drawn from a ``CheckedPlan``, so it shows the dependencies the
engine will honour (read from the parsed bindings, not guessed from text):
levels run left to right, a ``when`` condition labels the edges from the steps it
reads, a step that waits for several others is a join ("all" or, drawn dashed,
"any"), and the steps whose results the plan returns have a heavy border.
Mermaid and DOT are plain text and always available; SVG and PNG need Graphviz.
"""

from __future__ import annotations

import shutil
import subprocess
import textwrap
from dataclasses import dataclass
from pathlib import Path

from durable_plan.check import CheckedPlan, CheckedStep
from durable_plan.language.control_steps import EXIT, LOOPS

TEXT_FORMATS = ("mermaid", "dot")
IMAGE_FORMATS = ("svg", "png")
SUFFIXES = {".mmd": "mermaid", ".mermaid": "mermaid", ".dot": "dot", ".gv": "dot"}
SUFFIXES.update({f".{fmt}": fmt for fmt in IMAGE_FORMATS})
WRAP = 40
MAX_LINES = 4


class GraphvizMissing(RuntimeError):
    """``dot`` is not installed; the message says how to get it or what to write instead."""


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    label: tuple[str, ...]
    """The lines of a ``when`` condition on the edges it reads; empty otherwise."""
    dashed: bool


@dataclass(frozen=True)
class Node:
    id: str
    lines: tuple[str, ...]
    kind: str  # "tool", "loop", "agent", "exit"
    returned: bool


def format_for(path: str | Path) -> str:
    """The output format a file name asks for (``.svg``, ``.png``, ``.mmd``, ``.dot``)."""
    suffix = Path(path).suffix.lower()
    if suffix not in SUFFIXES:
        known = ", ".join(sorted(SUFFIXES))
        raise ValueError(f"cannot tell the format of {str(path)!r}; name it with one of {known}")
    return SUFFIXES[suffix]


def nodes(checked: CheckedPlan) -> list[Node]:
    returned = set(checked.returns)
    out = []
    for sid, cs in checked.steps.items():
        step = cs.step
        if step.tool in LOOPS:
            body = step.args.get("do")
            inner = body.get("tool") if isinstance(body, dict) else None
            lines = [sid, f"{step.tool}: {inner}" if inner else step.tool]
            kind = "loop"
        else:
            lines = [sid, step.tool]
            kind = {"agent": "agent", EXIT: "exit"}.get(step.tool, "tool")
        if step.join == "any":
            lines.append("join: any")
        if step.when is not None and not _when_sources(cs):
            lines += _wrap(f"when {step.when}")
        out.append(Node(sid, tuple(lines), kind, sid in returned))
    return out


def edges(checked: CheckedPlan) -> list[Edge]:
    """One edge per dependency, in plan order; a ``when`` labels the edges it reads."""
    out = []
    for sid, cs in checked.steps.items():
        readers = _when_sources(cs)
        for dep in cs.ordered_deps:
            label = _wrap(f"when {cs.step.when}") if dep in readers else ()
            out.append(Edge(dep, sid, label, cs.step.join == "any"))
    return out


def _when_sources(cs: CheckedStep) -> set[str]:
    return set(cs.when.refs) & set(cs.deps) if cs.when is not None else set()


def _wrap(text: str) -> tuple[str, ...]:
    """A condition as a few short lines, so labels keep the picture narrow."""
    lines = textwrap.wrap(" ".join(text.split()), WRAP, break_long_words=True)
    if len(lines) > MAX_LINES:
        lines = [*lines[: MAX_LINES - 1], textwrap.shorten(lines[MAX_LINES - 1] + " ...", WRAP)]
    return tuple(lines)


# --- Mermaid ----------------------------------------------------------------------------------

_MERMAID_SHAPES = {
    "tool": ('["', '"]'),
    "loop": ('[["', '"]]'),
    "agent": ('(["', '"])'),
    "exit": ('{{"', '"}}'),
}


def to_mermaid(checked: CheckedPlan, title: str | None = None) -> str:
    """A ``flowchart LR`` GitHub renders in Markdown (```mermaid)."""
    out: list[str] = []
    if title:
        out += ["---", f"title: {_mermaid_text(title)}", "---"]
    out.append("flowchart LR")
    all_nodes = nodes(checked)
    for node in all_nodes:
        opening, closing = _MERMAID_SHAPES[node.kind]
        label = "<br/>".join(_mermaid_text(line) for line in node.lines)
        out.append(f"    {node.id}{opening}{label}{closing}")
    for edge in edges(checked):
        arrow = "-.->" if edge.dashed else "-->"
        text = "<br/>".join(_mermaid_text(line) for line in edge.label)
        label = f'|"{text}"|' if edge.label else ""
        out.append(f"    {edge.source} {arrow}{label} {edge.target}")
    returned = [node.id for node in all_nodes if node.returned]
    if returned:
        out.append("    classDef returned stroke-width:3px")
        out.append(f"    class {','.join(returned)} returned")
    return "\n".join(out) + "\n"


def _mermaid_text(text: str) -> str:
    """Mermaid labels are HTML inside quotes: escape what would end or break them."""
    replacements = {"&": "#amp;", '"': "#quot;", "<": "#lt;", ">": "#gt;", "|": "#124;"}
    return "".join(replacements.get(ch, ch) for ch in text)


# --- Graphviz ---------------------------------------------------------------------------------

_DOT_SHAPES = {"tool": "box", "loop": "box3d", "agent": "ellipse", "exit": "octagon"}


def to_dot(checked: CheckedPlan, title: str | None = None) -> str:
    """DOT with one ``rank=same`` group per level, so levels line up left to right."""
    out = ["digraph plan {", "    rankdir=LR;", '    graph [fontname="Helvetica"];']
    if title:
        out.append(f'    label="{_dot_text(title)}"; labelloc=t;')
    out.append('    node [fontname="Helvetica", style=rounded];')
    out.append('    edge [fontname="Helvetica", fontsize=10];')
    for node in nodes(checked):
        label = "\\n".join(_dot_text(line) for line in node.lines)
        attrs = [f'label="{label}"', f"shape={_DOT_SHAPES[node.kind]}"]
        if node.returned:
            attrs.append("penwidth=2.5")
        out.append(f'    "{node.id}" [{", ".join(attrs)}];')
    for edge in edges(checked):
        attrs = []
        if edge.label:
            text = "\\n".join(_dot_text(line) for line in edge.label)
            attrs.append(f'label="{text}"')
        if edge.dashed:
            attrs.append("style=dashed")
        suffix = f" [{', '.join(attrs)}]" if attrs else ""
        out.append(f'    "{edge.source}" -> "{edge.target}"{suffix};')
    for level in checked.levels:
        members = " ".join(f'"{sid}";' for sid in level)
        out.append(f"    {{ rank=same; {members} }}")
    out.append("}")
    return "\n".join(out) + "\n"


def _dot_text(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def render(dot_source: str, fmt: str, out: str | Path, *, dot: str | None = None) -> None:
    """Draw DOT text into an SVG or PNG file with Graphviz's ``dot``."""
    binary = dot or shutil.which("dot")
    if binary is None:
        raise GraphvizMissing(
            f"Graphviz `dot` is not installed, so no .{fmt}; install it (apt-get install "
            "graphviz, brew install graphviz) or write .mmd or .dot text instead"
        )
    done = subprocess.run(
        [binary, f"-T{fmt}", "-o", str(out)],
        input=dot_source.encode(),
        capture_output=True,
        timeout=60,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"dot failed ({done.returncode}): {done.stderr.decode().strip()}")
