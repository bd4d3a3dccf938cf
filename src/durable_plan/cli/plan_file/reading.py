"""Reading plan files: ``durable_plan.check.plan_file.reading`` (saved plans read them below
the command line); imported here as before."""

from durable_plan.check.plan_file.reading import (
    MAX_FILE_BYTES as MAX_FILE_BYTES,
)
from durable_plan.check.plan_file.reading import (
    UNREADABLE as UNREADABLE,
)
from durable_plan.check.plan_file.reading import (
    load_plan_file as load_plan_file,
)
