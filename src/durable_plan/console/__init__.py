"""The plan console: a plan in the browser, as the graph it is, live, and acted on.

``durable-plan ui`` serves it (``serve.py``); ``create_app`` builds the ASGI app for a
client of your own. One job per module: ``settings`` (address, token, bounds), ``guard``
(who may ask what), ``listing`` (the plans list from visibility), ``history`` (what a
plan's history holds), ``graph_view`` (the DAG, laid out as `durable-plan graph` draws
it), ``plan_view`` (one workflow's state), ``live`` (its events as Server-Sent Events),
``actions`` (approve, reject, cancel; breakpoints later), ``app`` (the routes), and
``static/`` (the page: plain HTML, JavaScript and CSS, no build step, nothing from a CDN).
"""

from __future__ import annotations

from durable_plan.console.app import create_app
from durable_plan.console.settings import ConsoleSettings

__all__ = ["ConsoleSettings", "create_app"]
