"""Plan files: a plan written by hand, in YAML or JSON, with a name and declared inputs.

A plan file is the plan itself (``steps``, ``returns``, ``final``, ...) plus three
optional fields: ``name``, ``description`` and ``inputs``, a JSON Schema for the
object of values a run is given. Bindings and conditions read those values as
``inputs.<name>``. People run such files from shells and CI jobs, so every
problem names the file and, where the YAML parser can tell, the line, besides
the step, the field and the fix the checker already gives. The plan is checked
by ``check_plan`` (the one checker); this module only adds what a file has and a
plan sent by a model has not: parsing, lines, and inputs.

The work is split by job (``plan_file_types``, ``plan_file_reading``,
``plan_file_checking``, ``plan_file_inputs``); this module stays the one import path the
commands and the tests use, so it re-exports the public names they had here.
"""

from __future__ import annotations

from durable_plan.cli.plan_file_checking import check_plan_file
from durable_plan.cli.plan_file_inputs import (
    MAX_MESSAGE_CHARS,
    parse_input_args,
    resolve_inputs,
)
from durable_plan.cli.plan_file_reading import (
    MAX_EXPANDED_VALUES,
    MAX_FILE_BYTES,
    MAX_READ_BYTES,
    UNREADABLE,
    load_plan_file,
)
from durable_plan.cli.plan_file_types import (
    INPUTS_ROOT,
    META_FIELDS,
    FileProblem,
    Path_,
    PlanFile,
    PlanFileError,
)

__all__ = [
    "INPUTS_ROOT",
    "MAX_EXPANDED_VALUES",
    "MAX_FILE_BYTES",
    "MAX_MESSAGE_CHARS",
    "MAX_READ_BYTES",
    "META_FIELDS",
    "UNREADABLE",
    "FileProblem",
    "Path_",
    "PlanFile",
    "PlanFileError",
    "check_plan_file",
    "load_plan_file",
    "parse_input_args",
    "resolve_inputs",
]
