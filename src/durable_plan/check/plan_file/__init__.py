"""Plan files: a plan written by hand, in YAML or JSON, with a name and declared inputs.

A plan file is the plan itself (``steps``, ``returns``, ``final``, ...) plus three
optional fields: ``name``, ``description`` and ``inputs``, a JSON Schema for the
object of values a run is given. Bindings and conditions read those values as
``inputs.<name>``. People run such files from shells and CI jobs, so every
problem names the file and, where the YAML parser can tell, the line, besides
the step, the field and the fix the checker already gives. The plan is checked
by ``check_plan`` (the one checker); this package only adds what a file has and a
plan sent by a model has not: parsing, lines, and inputs.

The work is split by job, one module each: ``records`` (``PlanFile`` and its located
problems), ``reading`` (bytes to a ``PlanFile``: YAML or JSON, lines, bounds), ``checking``
(``check_plan``, located in the file) and ``inputs`` (the declared inputs and a run's
values). Each name is imported from the module that holds it.
"""
