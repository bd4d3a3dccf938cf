"""The worker side: ``DurablePlanPlugin`` and the helpers over it, which gather the
workflows, activities and converter pieces of every other room."""
