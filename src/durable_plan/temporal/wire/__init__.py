"""The wire: plain data that crosses the workflow/activity/client boundary. A leaf: it
imports nothing else of ``durable_plan.temporal``, so every room may use it."""
