"""Everything knowable about a plan before a side effect, with every problem at once.

``checker`` runs the whole check over layers written one per concern: ``base`` (the
problems so far), ``arguments`` (a tool's schema, the owner's rules), ``kinds`` (each
step kind checks itself), ``dataflow`` (the expressions and what they read), ``graph``
(cycles, levels), ``shape_checks`` (the paths and bound types against what steps return:
``shapes`` walks a return shape, ``result_shapes`` knows each step's, ``shape_text`` says one
in a few words); ``catalog`` is what the check knows of the tools, ``checked`` what it
hands to the runners, ``json_schema`` every schema applied to a model's or person's values.
"""

from durable_plan.check.catalog import ToolCatalog, ToolSpec
from durable_plan.check.checked import CheckedPlan, CheckedStep
from durable_plan.check.checker import check_plan

__all__ = ["CheckedPlan", "CheckedStep", "ToolCatalog", "ToolSpec", "check_plan"]
