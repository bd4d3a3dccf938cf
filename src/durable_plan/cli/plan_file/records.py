"""Plan file records: they live in ``durable_plan.check.plan_file.records`` since saved plans
(``ToolRegistry.add_plan``) read plan files below the command line; imported here as before."""

from durable_plan.check.plan_file.records import (
    INPUTS_ROOT as INPUTS_ROOT,
)
from durable_plan.check.plan_file.records import (
    META_FIELDS as META_FIELDS,
)
from durable_plan.check.plan_file.records import (
    FileProblem as FileProblem,
)
from durable_plan.check.plan_file.records import (
    Path_ as Path_,
)
from durable_plan.check.plan_file.records import (
    PlanFile as PlanFile,
)
from durable_plan.check.plan_file.records import (
    PlanFileError as PlanFileError,
)
from durable_plan.check.plan_file.records import (
    value_kind as value_kind,
)
