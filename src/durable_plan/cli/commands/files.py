"""`durable-plan validate` and `durable-plan graph`: plan files, checked and drawn, nothing run."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from durable_plan.check.plan_file.checking import check_plan_file
from durable_plan.check.plan_file.reading import UNREADABLE, load_plan_file
from durable_plan.check.plan_file.records import FileProblem, PlanFile, PlanFileError
from durable_plan.cli.commands import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK, TOOLS_ENV, CommandError


def catalog_of(spec: str | None, *, durable: bool) -> Any:
    """The tools module's catalog (names, argument schemas, gates), or None: any tool name."""
    if not spec:  # neither --tools nor $DURABLE_PLAN_TOOLS (set but empty counts as unset)
        return None
    from durable_plan.cli.tools_module import ToolsModuleError, load_tools

    try:
        return load_tools(spec).catalog(durable=durable)
    except ToolsModuleError as exc:
        raise CommandError(EXIT_BAD_INPUT, str(exc)) from None


def validate(args: argparse.Namespace) -> int:
    """Every problem in every file; exit 1 if any, 2 if a file could not be read at all
    (a wrong path is a mistake in the command, like `run`'s, not a problem in a plan)."""
    # Durable rules: a gated tool is fine (its step waits for a person), and the clock and
    # random functions, which a durable run refuses, are refused here too.
    catalog = catalog_of(args.tools, durable=True)
    report: list[dict[str, Any]] = []
    unreadable = False
    for name in args.files:
        problems: list[FileProblem] = []
        steps = levels = 0
        try:
            pf = load_plan_file(name)
            checked = check_plan_file(pf, catalog=catalog, durable=True)
            steps, levels = len(checked.steps), len(checked.levels)
        except PlanFileError as exc:
            problems = exc.problems
            unreadable = unreadable or any(p.code == UNREADABLE for p in problems)
        report.append(
            {
                "file": name,
                "ok": not problems,
                "steps": steps,
                "levels": levels,
                "problems": [p.to_json() for p in problems],
            }
        )
        if not args.json:
            for problem in problems:
                print(problem)
            if not problems:
                print(f"{name}: ok ({_count(steps, 'step')}, {_count(levels, 'level')})")
    bad = sum(1 for r in report if not r["ok"])
    count = sum(len(r["problems"]) for r in report)
    if args.json:
        print(
            json.dumps(
                {"ok": bad == 0, "tools_checked": catalog is not None, "files": report}, indent=2
            )
        )
    elif bad:
        print(f"{_count(count, 'problem')} in {bad} of {len(report)} files")
    if catalog is None:
        # Without the tools any tool name passes: say so, or "ok" reads as "the tools exist".
        print(
            f"validate: tool names and arguments were not checked; pass --tools MODULE (or set "
            f"${TOOLS_ENV}) to check them",
            file=sys.stderr,
        )
    if unreadable:
        return EXIT_BAD_INPUT
    return EXIT_FAILED if bad else EXIT_OK


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def load_checked(name: str, catalog: Any = None) -> tuple[PlanFile, Any]:
    """A plan file and its checked plan; its problems as ``CommandError(EXIT_BAD_INPUT)``."""
    try:
        pf = load_plan_file(name)
        return pf, check_plan_file(pf, catalog=catalog, durable=True)
    except PlanFileError as exc:
        raise CommandError(EXIT_BAD_INPUT, _lines(exc)) from None


def _lines(exc: PlanFileError) -> str:
    """One problem on the error line; several below it, one per line."""
    if len(exc.problems) == 1:
        return str(exc.problems[0])
    return f"{len(exc.problems)} problems:\n" + "\n".join(f"  {p}" for p in exc.problems)


def graph(args: argparse.Namespace) -> int:
    from durable_plan.cli import graph as pictures

    pf, checked = load_checked(args.file)
    if args.output is None:
        draw = pictures.to_dot if args.format == "dot" else pictures.to_mermaid
        sys.stdout.write(draw(checked, pf.title))
        return EXIT_OK
    try:
        fmt = pictures.format_for(args.output)
    except ValueError as exc:
        raise CommandError(EXIT_BAD_INPUT, str(exc)) from None
    out = Path(args.output)
    if not out.parent.is_dir():
        raise CommandError(
            EXIT_BAD_INPUT,
            f"cannot write {args.output}: there is no directory {str(out.parent)!r}; create it "
            "or pass another -o",
        )
    try:
        if fmt == "mermaid":
            out.write_text(pictures.to_mermaid(checked, pf.title), encoding="utf-8")
        elif fmt == "dot":
            out.write_text(pictures.to_dot(checked, pf.title), encoding="utf-8")
        else:
            pictures.render(pictures.to_dot(checked, pf.title), fmt, args.output)
    except pictures.GraphvizMissing as exc:
        raise CommandError(EXIT_BAD_INPUT, str(exc)) from None
    except OSError as exc:  # a directory, no permission, a full disk
        raise CommandError(
            EXIT_BAD_INPUT, f"cannot write {args.output}: {exc.strerror or exc}; pass another -o"
        ) from None
    except (RuntimeError, subprocess.TimeoutExpired) as exc:  # Graphviz itself failed
        first = (str(exc).splitlines() or [""])[0]
        raise CommandError(EXIT_BAD_INPUT, f"cannot draw {args.output}: {first}") from None
    print(f"wrote {args.output} ({len(checked.steps)} steps, {len(checked.levels)} levels)")
    return EXIT_OK
