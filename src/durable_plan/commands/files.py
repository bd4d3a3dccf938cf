"""`durable-plan validate` and `durable-plan graph`: plan files, checked and drawn, nothing run."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from durable_plan.commands import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK, CommandError
from durable_plan.plan_file import (
    FileProblem,
    PlanFile,
    PlanFileError,
    check_plan_file,
    load_plan_file,
)


def catalog_of(spec: str | None, *, durable: bool) -> Any:
    """The tools module's catalog (names, argument schemas, gates), or None: any tool name."""
    if spec is None:
        return None
    from durable_plan.tools_module import ToolsModuleError, load_tools

    try:
        return load_tools(spec).catalog(durable=durable)
    except ToolsModuleError as exc:
        raise CommandError(EXIT_BAD_INPUT, str(exc)) from None


def validate(args: argparse.Namespace) -> int:
    # Durable rules: a gated tool is fine (its step waits for a person), and the clock and
    # random functions, which a durable run refuses, are refused here too.
    catalog = catalog_of(args.tools, durable=True)
    report: list[dict[str, Any]] = []
    for name in args.files:
        problems: list[FileProblem] = []
        steps = levels = 0
        try:
            pf = load_plan_file(name)
            checked = check_plan_file(pf, catalog=catalog, durable=True)
            steps, levels = len(checked.steps), len(checked.levels)
        except PlanFileError as exc:
            problems = exc.problems
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
                print(f"{name}: ok ({steps} steps, {levels} levels)")
    bad = sum(1 for r in report if not r["ok"])
    count = sum(len(r["problems"]) for r in report)
    if args.json:
        print(json.dumps({"ok": bad == 0, "files": report}, indent=2))
    elif bad:
        print(f"{count} problem{'s' if count != 1 else ''} in {bad} of {len(report)} files")
    return EXIT_FAILED if bad else EXIT_OK


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
    from durable_plan import graph as pictures

    pf, checked = load_checked(args.file)
    if args.output is None:
        draw = pictures.to_dot if args.format == "dot" else pictures.to_mermaid
        sys.stdout.write(draw(checked, pf.title))
        return EXIT_OK
    try:
        fmt = pictures.format_for(args.output)
    except ValueError as exc:
        raise CommandError(EXIT_BAD_INPUT, str(exc)) from None
    if fmt == "mermaid":
        Path(args.output).write_text(pictures.to_mermaid(checked, pf.title), encoding="utf-8")
    elif fmt == "dot":
        Path(args.output).write_text(pictures.to_dot(checked, pf.title), encoding="utf-8")
    else:
        try:
            pictures.render(pictures.to_dot(checked, pf.title), fmt, args.output)
        except pictures.GraphvizMissing as exc:
            raise CommandError(EXIT_BAD_INPUT, str(exc)) from None
    print(f"wrote {args.output} ({len(checked.steps)} steps, {len(checked.levels)} levels)")
    return EXIT_OK
