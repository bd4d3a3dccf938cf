"""The documentation holds to what it documents (issue 51): the README stays short and its
links lead somewhere; every `durable-plan` command shown parses with the real parser; every
command's help ends with a link to a page and heading that exist; the API reference lists the
public names, the error-code table every problem code; each performance table names the bench
that produced it; and every `durable_plan.x.y` a page names can be imported.
``mkdocs build --strict`` (in .ci/run) checks the links between the docs pages."""

from __future__ import annotations

import ast
import importlib
import re
import shlex
import typing
from pathlib import Path

import pytest

from durable_plan.cli.arguments import COMMAND_DOCS, DOCS_BASE
from durable_plan.cli.parser import build_parser
from durable_plan.language.errors import ProblemCode
from tests.support.doc_pages import DOCS, ROOT, blocks, page, pages, slugs

README_MAX_LINES = 250


def test_the_readme_is_short() -> None:
    lines = page("README.md").count("\n")
    assert lines <= README_MAX_LINES, f"README.md is {lines} lines; move detail into docs/"


def test_the_readme_s_links_lead_to_files_and_headings_that_exist() -> None:
    links = re.findall(r"\]\(([^)\s]+)\)", page("README.md"))
    local = [link for link in links if not re.match(r"[a-z]+:", link)]
    assert local
    for link in local:
        path, _, anchor = link.partition("#")
        target = ROOT / path
        assert target.exists(), f"README.md links to {link}, which does not exist"
        if anchor:
            assert anchor in slugs(target.read_text(encoding="utf-8")), f"README.md: {link}"


# --- commands shown -------------------------------------------------------------------------

SHELL_LANGS = ("bash", "sh", "shell", "console", "text")


def _commands(lang: str, body: str) -> list[list[str]]:
    """The `durable-plan` commands in a shell block (in a text block, only `$ ` lines: the
    rest is output), each as its words after the program's name."""
    found = []
    for line in body.replace("\\\n", " ").splitlines():
        if lang == "text":
            if not line.startswith("$ "):
                continue
            line = line[2:]
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        words = list(lexer)
        command: list[str] = []
        for word in [*words, ";"]:
            if word in ("&&", "||", "|", ";", "&"):
                while command and re.match(r"^[A-Z_]+=", command[0]):
                    command.pop(0)  # VAR=value before the program
                if command and Path(command[0]).name == "durable-plan":
                    found.append(command[1:])
                command = []
            else:
                command.append(word)
    return found


def _shown_commands() -> list[tuple[str, list[str]]]:
    return [
        (b.page, words)
        for b in blocks()
        if b.lang in SHELL_LANGS
        for words in _commands(b.lang, b.body)
    ]


def test_the_command_finder_reads_shell_lines() -> None:
    assert _commands("bash", "A=1 .venv/bin/durable-plan dev --port 1 # x\n") == [
        ["dev", "--port", "1"]
    ]
    assert _commands("bash", "x && durable-plan show w \\\n  --json\n") == [["show", "w", "--json"]]
    assert _commands("text", "$ durable-plan dev\ndurable-plan: output\n") == [["dev"]]


def test_every_command_shown_parses() -> None:
    shown = _shown_commands()
    assert len(shown) >= 20, shown
    assert {words[0] for _, words in shown} >= {
        "dev",
        "validate",
        "run",
        "graph",
        "show",
        "approve",
    }
    for where, words in shown:
        try:
            build_parser().parse_args(words)
        except SystemExit as exc:  # argparse's usage error, printed on stderr
            pytest.fail(f"{where}: `durable-plan {shlex.join(words)}` does not parse ({exc})")


def test_a_command_the_parser_refuses_is_caught() -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["run", "plan.yaml", "--locale"])


# --- help links -----------------------------------------------------------------------------


def _subcommands() -> dict[str, typing.Any]:
    parser = build_parser()
    action = next(a for a in parser._actions if a.dest == "command")
    return dict(action.choices)


def test_every_help_ends_with_a_link_to_a_page_that_explains_it() -> None:
    helps = {None: build_parser().format_help()}
    helps.update({name: p.format_help() for name, p in _subcommands().items()})
    assert set(COMMAND_DOCS) <= set(helps), "COMMAND_DOCS names a subcommand that is gone"
    for command, text in helps.items():
        # A subcommand without its own entry links to the command line reference.
        link = COMMAND_DOCS.get(command, COMMAND_DOCS[None])
        last = text.rstrip().splitlines()[-1]
        assert last == f"documentation: {DOCS_BASE}{link}", (command, last)
        path, _, anchor = link.partition("#")
        target = DOCS / path
        assert target.exists(), f"{command}: {target} does not exist"
        if anchor:
            assert anchor in slugs(target.read_text(encoding="utf-8")), (command, anchor)


# --- the reference pages --------------------------------------------------------------------


def _exports() -> dict[str, str]:
    source = (ROOT / "src" / "durable_plan" / "__init__.py").read_text(encoding="utf-8")
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", "") == "_EXPORTS":
            assert node.value is not None
            exports: dict[str, str] = ast.literal_eval(node.value)
            return exports
    raise AssertionError("durable_plan._EXPORTS not found")


def test_the_api_reference_documents_every_public_name() -> None:
    """By the name `durable_plan` exports (mkdocstrings follows it to the owning module), so a
    module split moves nothing here; a name added or dropped must be added or dropped here."""
    listed = re.findall(r"^::: durable_plan\.(\w+)$", page("docs/reference/python-api.md"), re.M)
    assert sorted(listed) == sorted(_exports())


def test_the_error_code_table_lists_every_problem_code() -> None:
    text = page("docs/reference/error-codes.md")
    table = text[: text.index("## Exit codes")]
    listed = re.findall(r"^\| `([a-z_]+)` \|", table, re.M)
    assert sorted(listed) == sorted(typing.get_args(ProblemCode))


def test_every_performance_table_names_the_bench_that_produced_it() -> None:
    """A table of figures follows, within its section, a `python -m bench.NAME` that exists."""
    for path in sorted((DOCS / "performance").glob("*.md")):
        text = path.read_text(encoding="utf-8")
        for section in re.split(r"^#+ .*$", text, flags=re.M):
            table_at = [m.start() for m in re.finditer(r"^\| .*\n\| ?[-:]", section, re.M)]
            for start in table_at:
                named = re.findall(r"python -m bench\.(\w+)", section[:start])
                assert named, f"{path.name}: a table without its bench: {section[start:][:80]!r}"
    for name, text in pages().items():
        for bench in set(re.findall(r"python -m bench\.(\w+)", text)):
            assert (ROOT / "bench" / f"{bench}.py").exists(), f"{name}: bench.{bench}"


# --- names the pages mention -----------------------------------------------------------------

# Span, attribute and metric names (durable_plan.plan.id, durable_plan.steps.started, ...):
# telemetry's vocabulary, not modules.
TELEMETRY = re.compile(r"^durable_plan\.(plans?|steps?|agent|model|tool|level|attempts|status)\b")


def _resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            value: object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        try:
            for attribute in parts[cut:]:
                value = getattr(value, attribute)
        except AttributeError:
            return False
        return True
    return False


def test_every_module_and_name_the_pages_mention_exists() -> None:
    wrong = []
    for name, text in pages().items():
        for dotted in sorted(set(re.findall(r"`(durable_plan(?:\.\w+)+)", text))):
            if not TELEMETRY.match(dotted) and not _resolves(dotted):
                wrong.append(f"{name}: {dotted}")
    assert not wrong, "renamed or gone:\n" + "\n".join(wrong)


def test_the_architecture_tree_names_modules_that_exist() -> None:
    """The package tree on the architecture page: each subpackage is there, and each module
    it names under a subpackage exists in it (the page named modules renamed long before)."""
    text = page("docs/concepts/architecture.md")
    tree = next(
        b.body for b in blocks() if b.page.endswith("architecture.md") and "language/" in b.body
    )
    package = ROOT / "src" / "durable_plan"
    subpackages = {p.name for p in package.iterdir() if (p / "__init__.py").exists()}
    listed = re.findall(r"^(\w+)/ ", tree, re.M)
    assert set(listed) <= subpackages, "the architecture page lists a subpackage that is gone"
    for section in re.split(r"^(?=\w+/ )", tree, flags=re.M):
        if not section.strip():
            continue
        sub = section.split("/", 1)[0]
        existing = {p.name for p in (package / sub).rglob("*.py")}
        for module in set(re.findall(r"\b(\w+\.py)\b", section)):
            assert module in existing, f"architecture.md names {sub}/.../{module}, not in {sub}/"
    assert "src/durable_plan/" in text


def test_ci_runs_the_readme_s_test_command_verbatim_then_builds_the_docs() -> None:
    readme = page("README.md")
    commands = [b.body.strip() for b in blocks() if b.page == "README.md" and b.lang == "bash"]
    test_command = next(c for c in commands if "pytest" in c)
    ci = page(".ci/run").splitlines()
    assert test_command in ci, ".ci/run must call the README's test command exactly"
    build = next(i for i, line in enumerate(ci) if "mkdocs build --strict" in line)
    assert build > ci.index(test_command)
    assert ".venv/bin/mkdocs serve" in readme


def test_every_source_path_the_pages_mention_exists() -> None:
    package = ROOT / "src" / "durable_plan"
    subpackages = "|".join(p.name for p in package.iterdir() if (p / "__init__.py").exists())
    path = re.compile(rf"(?<![\w/])(?:src/durable_plan/)?((?:{subpackages})/[\w/]+\.py)\b")
    wrong = [
        f"{name}: {found}"
        for name, text in pages().items()
        for found in sorted(set(path.findall(text)))
        if not (package / found).exists()
    ]
    assert not wrong, "moved or gone:\n" + "\n".join(wrong)
