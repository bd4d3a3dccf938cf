"""`durable-plan validate` and `graph`, end to end, and plan files themselves.

The commands run in this process (``tests.support.helpers.run_cli``, the same exit status and
streams); each also runs once as a subprocess, the way a user starts it.

Each bad input has its exit code and its one-line message pinned; the example plans
under examples/plans/ must stay valid against the tools they run with.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from durable_plan.check.plan_file.checking import check_plan_file
from durable_plan.check.plan_file.reading import load_plan_file
from durable_plan.check.plan_file.records import PlanFileError
from tests.support.helpers import cli_subprocess, run_cli

ROOT = Path(__file__).resolve().parents[2]
PLANS = sorted((ROOT / "examples" / "plans").glob("*.yaml"))
EXAMPLES = ["game_master.yaml", "party_round.yaml", "triage.yaml"]


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    """In this process (``run_cli``); a test per command runs it as a subprocess too."""
    return run_cli(*args)


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


BAD_SCHEMA = """\
name: typo
steps:
  - id: lookup
    tool: look_up_monster
    args: {name: goblin}
  - id: attack
    tol: roll_attack
    bind: {armour: steps.lookup.armour}
"""


# --- validate -------------------------------------------------------------------------------


def test_the_examples_are_valid_against_their_tools() -> None:
    assert [p.name for p in PLANS] == EXAMPLES
    done = cli_subprocess("validate", *map(str, PLANS), "--tools", "examples.plan_tools")
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines == [
        f"{PLANS[0]}: ok (3 steps, 3 levels)",
        f"{PLANS[1]}: ok (6 steps, 4 levels)",
        f"{PLANS[2]}: ok (5 steps, 4 levels)",
    ]


def test_validate_reports_every_problem_in_every_file(tmp_path: Path) -> None:
    typo = write(tmp_path, "typo.yaml", BAD_SCHEMA)
    syntax = write(tmp_path, "syntax.yaml", "steps:\n  - id: a\n   tool: x\n")
    missing = str(tmp_path / "nope.yaml")
    good = str(PLANS[0])
    done = cli("validate", typo, syntax, missing, good)
    assert done.returncode == 2  # a file that is not there: bad input (as for run)
    lines = done.stdout.splitlines()
    assert lines[:2] == [
        f"{typo}:6: step 'attack', field 'tool': required field 'tool' is missing. Fix: add 'tool'",
        f"{typo}:7: step 'attack', field 'tol': unknown field 'tol'. Fix: did you mean 'tool'?",
    ]
    assert f"{syntax}:3: not valid YAML:" in done.stdout
    assert f"{missing}: no such file. Fix: check the path" in lines
    assert f"{good}: ok (3 steps, 3 levels)" in lines
    assert lines[-1].endswith("in 3 of 4 files")


def test_validate_json_for_machines(tmp_path: Path) -> None:
    typo = write(tmp_path, "typo.yaml", BAD_SCHEMA)
    done = cli("validate", "--json", typo, str(PLANS[0]))
    assert done.returncode == 1
    report = json.loads(done.stdout)
    assert report["ok"] is False
    bad, good = report["files"]
    assert good == {"file": str(PLANS[0]), "ok": True, "steps": 3, "levels": 3, "problems": []}
    assert [(p["line"], p["step"], p["field"], p["code"]) for p in bad["problems"]] == [
        (6, "attack", "tool", "schema"),
        (7, "attack", "tol", "schema"),
    ]
    assert bad["problems"][1]["fix"] == "did you mean 'tool'?"


def test_validate_json_file_with_a_syntax_error_names_the_line(tmp_path: Path) -> None:
    bad = write(tmp_path, "plan.json", '{"steps": [\n  {"id": "a", "tool": "t",}\n]}')
    done = cli("validate", bad)
    assert done.returncode == 1
    assert done.stdout.splitlines()[0].startswith(f"{bad}:2: not valid JSON:")


def test_validate_json_plan_lines_come_from_the_json_text(tmp_path: Path) -> None:
    plan = {"steps": [{"id": "a", "tool": "t"}, {"id": "b", "tool": "t", "bind": {"x": "steps.c"}}]}
    bad = write(tmp_path, "plan.json", json.dumps(plan, indent=2))
    done = cli("validate", bad)
    assert done.returncode == 1
    line = next(
        n for n, text in enumerate(json.dumps(plan, indent=2).splitlines(), 1) if '"x"' in text
    )
    assert done.stdout.startswith(f"{bad}:{line}: step 'b', field 'bind.x': reads steps.c")


def test_validate_checks_inputs_reads_and_the_schema(tmp_path: Path) -> None:
    text = """\
inputs:
  type: object
  properties:
    monster: {type: string}
steps:
  - id: lookup
    tool: look_up_monster
    bind: {name: inputs.monstr}
  - id: quoted
    tool: look_up_monster
    bind: {name: "'see inputs.nothing' & inputs.monster"}
"""
    done = cli("validate", write(tmp_path, "inputs.yaml", text))
    assert done.returncode == 1
    [problem, summary] = done.stdout.splitlines()
    assert "inputs.yaml:8: step 'lookup', field 'bind.name': reads inputs.monstr" in problem
    assert "declared: monster" in problem
    assert summary == "1 problem in 1 of 1 files"
    bad_schema = write(
        tmp_path, "schema.yaml", "inputs: {type: array}\nsteps: [{id: a, tool: t}]\n"
    )
    done = cli("validate", bad_schema)
    assert done.returncode == 1
    assert "schema.yaml:1: field" not in done.stdout
    assert "inputs must describe an object (type: object), not type: array" in done.stdout


def test_validate_with_tools_knows_their_names_and_arguments(tmp_path: Path) -> None:
    text = (
        "steps:\n  - id: a\n    tool: look_up_monstr\n"
        "  - id: b\n    tool: roll_attack\n    args: {armour: high}\n"
    )
    done = cli("validate", write(tmp_path, "tools.yaml", text), "--tools", "examples.plan_tools")
    assert done.returncode == 1
    assert "tools.yaml:3: step 'a', field 'tool'" in done.stdout
    assert "look_up_monster" in done.stdout  # the suggestion
    assert "tools.yaml:6: step 'b', field 'args.armour'" in done.stdout


def test_validate_with_a_tools_module_that_does_not_load() -> None:
    done = cli("validate", str(PLANS[0]), "--tools", "no_such_tools")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "durable-plan: error: cannot import tools module 'no_such_tools': no module named "
        "'no_such_tools' (run from the directory that holds it, or pass a path to a .py file)"
    ]


def test_validate_without_files_is_a_usage_error() -> None:
    done = cli("validate")
    assert done.returncode == 2
    assert "the following arguments are required: FILE" in done.stderr


# --- graph ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", EXAMPLES)
def test_graph_mermaid_holds_every_step_and_edge(name: str) -> None:
    path = ROOT / "examples" / "plans" / name
    checked = check_plan_file(load_plan_file(path))
    done = cli("graph", str(path))
    assert done.returncode == 0, done.stderr
    text = done.stdout
    assert text.splitlines()[3] == "flowchart LR"
    for sid, cs in checked.steps.items():
        assert f"    {sid}[" in text
        for dep in cs.deps:
            assert any(
                line.startswith(f"    {dep} ") and line.endswith(f" {sid}")
                for line in text.splitlines()
            ), (dep, sid)
    edges = sum(len(cs.deps) for cs in checked.steps.values())
    assert sum(1 for line in text.splitlines() if "-->" in line or "-.->" in line) == edges


def test_graph_marks_conditions_and_joins() -> None:
    done = cli("graph", str(ROOT / "examples" / "plans" / "triage.yaml"), "--format", "dot")
    assert done.returncode == 0
    text = done.stdout
    assert '"triage" -> "refund" [label="when steps.triage.desk = \\"treasury\\"' in text
    assert '"ticket" -> "refund";' in text  # reads the ticket, not in the condition
    assert '"refund" -> "notify" [style=dashed];' in text  # join: any
    assert "join: any" in text
    assert '{ rank=same; "refund"; "escalate"; }' in text
    assert text.count("penwidth=2.5") == 3  # returns: refund, escalate, notify


def test_graph_writes_text_formats(tmp_path: Path) -> None:
    plan = str(ROOT / "examples" / "plans" / "party_round.yaml")
    for suffix, first in ((".mmd", "---"), (".dot", "digraph plan {")):
        out = tmp_path / f"g{suffix}"
        done = cli("graph", plan, "-o", str(out))
        assert done.returncode == 0
        assert done.stdout.strip() == f"wrote {out} (6 steps, 4 levels)"
        assert out.read_text().splitlines()[0] == first


def test_graph_renders_svg_and_png(tmp_path: Path) -> None:
    if shutil.which("dot") is None:
        pytest.skip("Graphviz `dot` is not installed (.ci/run installs it with apt-get)")
    plan = ROOT / "examples" / "plans" / "triage.yaml"
    svg = tmp_path / "triage.svg"
    done = cli("graph", str(plan), "-o", str(svg))
    assert done.returncode == 0, done.stderr
    text = svg.read_text()
    assert "<svg" in text and "</svg>" in text
    for sid in ("ticket", "triage", "refund", "escalate", "notify"):
        assert f">{sid}</text>" in text
    png = tmp_path / "triage.png"
    assert cli("graph", str(plan), "-o", str(png)).returncode == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_graph_without_graphviz_says_what_to_do(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "durable_plan", "graph", str(PLANS[0]), "-o", "x.svg"],
        cwd=tmp_path,
        env={"PATH": str(tmp_path)},  # no `dot` on this PATH
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "durable-plan: error: Graphviz `dot` is not installed, so no .svg; install it "
        "(apt-get install graphviz, brew install graphviz) or write .mmd or .dot text instead"
    )
    assert not (tmp_path / "x.svg").exists()


def test_graph_bad_input(tmp_path: Path) -> None:
    done = cli("graph", str(PLANS[0]), "-o", str(tmp_path / "x.jpeg"))
    assert done.returncode == 2
    assert done.stderr.startswith("durable-plan: error: cannot tell the format of ")
    done = cli("graph", str(tmp_path / "missing.yaml"))
    assert done.returncode == 2
    assert done.stderr.strip() == (
        f"durable-plan: error: {tmp_path / 'missing.yaml'}: no such file. Fix: check the path"
    )
    done = cli("graph", write(tmp_path, "typo.yaml", BAD_SCHEMA))
    assert done.returncode == 2
    assert "problems:" in done.stderr.splitlines()[0]


# --- plan files as a library ------------------------------------------------------------------


def test_input_reads_ignore_string_literals_and_other_roots() -> None:
    """The expression analysis records them (it reads the parsed tree, not the text)."""
    from durable_plan.expressions import parse

    assert parse("inputs.a & 'inputs.b' & \"inputs.c\" & x.inputs.d").input_reads == ("a",)
    assert parse("inputs.`odd name` + inputs . spaced").input_reads == ("odd name", "spaced")


def test_duplicate_keys_are_problems_with_the_rest(tmp_path: Path) -> None:
    text = "steps:\n  - id: a\n    tool: t\n    tool: u\n    bind: {x: steps.b}\n"
    with pytest.raises(PlanFileError) as info:
        check_plan_file(load_plan_file(write(tmp_path, "dup.yaml", text)))
    assert [(p.line, p.code) for p in info.value.problems] == [
        (4, "file"),
        (5, "dangling_reference"),
    ]


def test_not_a_mapping(tmp_path: Path) -> None:
    with pytest.raises(
        PlanFileError, match="a plan file must be a mapping with steps, but this one is empty"
    ):
        load_plan_file(write(tmp_path, "empty.yaml", ""))
    with pytest.raises(PlanFileError, match="but this one is a list"):
        load_plan_file(write(tmp_path, "list.yaml", "- id: a\n"))


# --- the command line loads what a command needs, when it needs it ---------------------------


def test_version_and_validate_import_neither_strands_nor_the_temporal_client() -> None:
    probe = (
        "import sys, contextlib, io\n"
        "from durable_plan.cli.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    code = main(['validate', {str(PLANS[0])!r}])\n"
        "heavy = [m for m in ('strands', 'temporalio.client', 'boto3') if m in sys.modules]\n"
        "print(code, heavy)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.stdout.strip() == "0 []", done.stderr
    version = cli_subprocess("--version")
    assert version.returncode == 0 and version.stdout.strip() == "durable-plan 0.1.0"


def test_public_names_still_import() -> None:
    import durable_plan

    for name in durable_plan.__all__:
        assert getattr(durable_plan, name) is not None
    from durable_plan import ToolRegistry, execute_plan

    assert callable(execute_plan) and ToolRegistry.__name__ == "ToolRegistry"
    with pytest.raises(AttributeError):
        _ = durable_plan.no_such_name  # type: ignore[attr-defined]


ALIAS_BOMB = (
    "a: &a [x, x, x, x, x, x, x, x, x]\n"
    + "".join(
        f"{n}: &{n} [{', '.join([f'*{p}'] * 9)}]\n"
        for p, n in zip("abcdefg", "bcdefgh", strict=True)
    )
    + "steps: [{id: s, tool: t, args: {x: *h}}]\n"
)


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        # Nine lines that expand to 43 million values: refused before anything walks them.
        ("bomb.yaml", ALIAS_BOMB, "its YAML aliases (*name) expand to more than 100,000 values"),
        ("deep.yaml", "steps: " + "[" * 60_000 + "]" * 60_000, "is nested too deeply to read"),
        ("deep.json", '{"steps": ' + "[" * 60_000 + "]" * 60_000 + "}", "nested too deeply"),
        ("big.yaml", "steps: []\n#" + "x" * (9 * 1024 * 1024), "more than a plan file may be"),
    ],
)
def test_hostile_files_are_refused_quickly_in_one_line(
    tmp_path: Path, name: str, text: str, message: str
) -> None:
    path = write(tmp_path, name, text)
    done = cli("validate", path)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    assert message in done.stdout.splitlines()[0]


def test_hostile_inputs_are_one_short_line(tmp_path: Path) -> None:
    deep = "[" * 60_000 + "]" * 60_000
    plan = write(
        tmp_path,
        "takes.yaml",
        "inputs: {type: object, properties: {data: {type: array}, name: {type: string,"
        " maxLength: 5}}}\nsteps: [{id: a, tool: look_up_monster, args: {name: goblin}}]\n",
    )
    for given, message in (
        (f"data={deep}", "input 'data' is nested too deeply to read"),
        (f"name={'x' * 100_000}", "characters)"),  # the schema error's quote is cut
    ):
        done = cli("run", plan, "--local", "--tools", "examples.plan_tools", "-i", given)
        assert done.returncode == 2, done.stderr
        assert "Traceback" not in done.stderr
        (line,) = done.stderr.strip().splitlines()
        assert message in line and len(line) < 1000
