"""The Strands integration: ``WorkflowPlanPlugin`` and its ``submit_workflow_plan`` tool, for a
plain ``Agent`` (plans in-process) and a ``TemporalAgent`` (plans as child workflows)."""
