"""Everything knowable about a plan before a side effect, with every problem at once.

``checker`` runs the whole check over layers written one per concern: ``plan_errors`` (a
plan that does not parse, described and salvaged), ``base`` (the problems so far),
``arguments`` (a tool's schema, the owner's rules), ``kinds`` (each step kind checks
itself), ``dataflow`` (the expressions and what they read), ``graph`` (cycles, levels),
``shapes`` (return shapes, one package: where a tool's shape comes from, each step's, and
``shapes.checks``, the paths and bound types against what steps return); ``catalog`` is
what the check knows of the tools, ``checked`` what it hands to the runners,
``json_schema`` every schema applied to a model's or person's values (``usable_schema``:
whether a schema can be).
"""

from durable_plan.check.catalog import ToolCatalog, ToolSpec
from durable_plan.check.checked import CheckedPlan, CheckedStep
from durable_plan.check.checker import check_plan

__all__ = ["CheckedPlan", "CheckedStep", "ToolCatalog", "ToolSpec", "check_plan"]
