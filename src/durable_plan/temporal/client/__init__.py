"""Code that runs outside workers: starting plans, reading their events, replay, tracing
set-up. Workflow code never imports it."""
