"""Durable plans on Temporal, in rooms by where the code runs.

- ``wire``: plain data that crosses the workflow/activity/client boundary (inputs, replies,
  result forms, ids, payload limits); imports nothing else of ``temporal``.
- ``workflows``: deterministic workflow code (the plan and agent-step workflows, the call
  stages, admission, approvals, the hook relay, direct calls, status and summaries); loads no
  client, activity, storage or network module (``tests/structure/test_determinism_boundary.py``).
- ``activities``: activity code (the tool activities, large results by reference, exactly-once
  effects, reading an ended plan's ledger).
- ``client``: code that runs outside workers (``start_plan`` and ``PlanHandle``, event
  subscription, pollers, replay, tracing set-up, the search attribute question).
- ``worker``: ``DurablePlanPlugin`` and the worker helpers over it.
"""
