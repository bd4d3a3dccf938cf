"""Plan files for the command line: the package is ``durable_plan.check.plan_file`` (a saved
plan, ``ToolRegistry.add_plan``, is a plan file too, and the registry sits below the command
line); these modules import its names as they always did."""
