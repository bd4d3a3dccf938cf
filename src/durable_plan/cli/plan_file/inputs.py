"""A plan file's inputs: ``durable_plan.check.plan_file.inputs`` (saved plans check their
callers' arguments with it below the command line); imported here as before."""

from durable_plan.check.plan_file.inputs import (
    inputs_schema_problems as inputs_schema_problems,
)
from durable_plan.check.plan_file.inputs import (
    parse_input_args as parse_input_args,
)
from durable_plan.check.plan_file.inputs import (
    resolve_inputs as resolve_inputs,
)
