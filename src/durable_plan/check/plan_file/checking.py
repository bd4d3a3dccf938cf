"""Checking a read plan file: the one checker, ``check_plan``, with its problems located.

The checker knows steps and fields, not files; a person fixing a file needs the line too,
and the file's own problems (keys given twice, a bad inputs schema) in the same report, so
one run of ``validate`` shows everything at once.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from durable_plan.check import CheckedPlan, ToolCatalog, check_plan
from durable_plan.check.plan_file.records import PlanFile, PlanFileError
from durable_plan.language.errors import PlanRejected


def check_plan_file(
    pf: PlanFile,
    *,
    catalog: ToolCatalog | None = None,
    inputs: Mapping[str, Any] | None = None,
    durable: bool = False,
) -> CheckedPlan:
    """``check_plan`` on the file's plan, with every problem located in the file.

    ``inputs``: the run's values (``resolve_inputs``); None checks the plan alone, with
    ``inputs`` readable. Reads of ``inputs.<name>`` the schema does not declare are
    problems too, so a misspelled input fails here, not as a step failure at run time.
    """
    problems = list(pf.problems)
    checked: CheckedPlan | None = None
    try:
        checked = check_plan(
            pf.plan,
            catalog=catalog,
            durable=durable,
            inputs=inputs or {},
            input_names=pf.declared_inputs,
        )
    except PlanRejected as exc:
        for p in exc.problems:
            where = pf.step_path(p.step, p.field)
            problems.append(
                pf.problem(p.message, p.fix, path=where, step=p.step, fld=p.field, code=p.code)
            )
    if problems or checked is None:
        raise PlanFileError(problems)
    return checked
