"""Checking a plan file: ``durable_plan.check.plan_file.checking`` (saved plans are checked
with it at registration, below the command line); imported here as before."""

from durable_plan.check.plan_file.checking import check_plan_file as check_plan_file
