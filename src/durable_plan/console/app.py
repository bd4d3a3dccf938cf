"""The console's ASGI app: the static page, the JSON API, the event stream, the actions.

Starlette, because it is already installed wherever durable-plan is (Strands needs MCP,
which needs Starlette and uvicorn) and gives Server-Sent Events and routing in a few
lines; the ``ui`` extra names both so an install that lacks them gets them. Every route
runs behind ``ConsoleGuard`` (host, token, same-origin POSTs, no-store).

Routes: ``GET /`` the page; ``GET /static/...`` its script and style; ``GET /api/info``;
``GET /api/plans`` the list; ``GET /api/plans/{id}`` one workflow's state;
``GET /api/plans/{id}/steps/{step}`` a step's calls; ``GET /api/plans/{id}/events`` its
events (SSE); ``POST /api/plans/{id}/cancel``; ``POST /api/plans/{id}/steps/{step}/decide``;
``POST /api/plans/{id}/steps/{step}/breakpoint`` (``{"action": "continue"|"skip"|"abort"}``).
Workflow ids hold slashes (``conv/plan/toolu_1``): the path converter takes them whole.
"""

from __future__ import annotations

import json
from importlib.resources import files
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from temporalio.client import Client

from durable_plan import __version__
from durable_plan.console import actions
from durable_plan.console.guard import ConsoleGuard
from durable_plan.console.history import step_calls
from durable_plan.console.listing import list_plans
from durable_plan.console.live import event_frames
from durable_plan.console.plan_view import NotFound, workflow_state
from durable_plan.console.settings import ConsoleSettings

STATIC = {
    "app.js": "text/javascript; charset=utf-8",
    "app.css": "text/css; charset=utf-8",
}
MAX_BODY_BYTES = 16 * 1024


def _static(name: str) -> bytes:
    return files("durable_plan.console").joinpath("static", name).read_bytes()


def _problem(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


async def _json_body(request: Request) -> dict[str, Any]:
    raw = await request.body()
    if len(raw) > MAX_BODY_BYTES:
        raise actions.ActionRefused(413, f"the request body is over {MAX_BODY_BYTES} bytes")
    try:
        body = json.loads(raw or b"{}")
    except ValueError:
        raise actions.ActionRefused(400, "the request body is not JSON") from None
    if not isinstance(body, dict):
        raise actions.ActionRefused(400, "the request body is a JSON object")
    return body


def create_app(client: Client, settings: ConsoleSettings) -> ConsoleGuard:
    """The console for ``client`` (whose converter decides what can be decoded)."""

    async def index(request: Request) -> Response:
        return Response(_static("index.html"), media_type="text/html; charset=utf-8")

    async def static(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in STATIC:
            return _problem(404, f"no static file {name!r}")
        return Response(_static(name), media_type=STATIC[name])

    async def info(request: Request) -> Response:
        return JSONResponse(
            {
                "version": __version__,
                "address": settings.address,
                "namespace": settings.namespace,
                "decodes": settings.decodes,
                "breakpoint_actions": list(actions.BREAKPOINT_ACTIONS),
                "breakpoints": True,
            }
        )

    async def plans(request: Request) -> Response:
        q = request.query_params
        try:
            found = await list_plans(
                client,
                status=q.get("status") or None,
                search=q.get("q") or None,
                page_token=q.get("page") or None,
            )
        except ValueError as exc:
            return _problem(400, str(exc))
        return JSONResponse(found)

    async def plan(request: Request) -> Response:
        try:
            return JSONResponse(await workflow_state(client, request.path_params["wid"]))
        except NotFound as exc:
            return _problem(404, str(exc))

    async def step(request: Request) -> Response:
        wid, sid = request.path_params["wid"], request.path_params["sid"]
        return JSONResponse(await step_calls(client, wid, sid))

    async def events(request: Request) -> Response:
        start = request.headers.get("last-event-id") or request.query_params.get("from") or ""
        offset = int(start) + (1 if request.headers.get("last-event-id") else 0) if start else 0
        if offset < 0:
            return _problem(400, "from: an offset, 0 or more")
        return StreamingResponse(
            event_frames(client, request.path_params["wid"], offset),
            media_type="text/event-stream",
            headers={"x-accel-buffering": "no"},
        )

    async def act(request: Request) -> Response:
        wid = request.path_params["wid"]
        sid = request.path_params.get("sid", "")
        verb = request.path_params["verb"]
        try:
            body = await _json_body(request)
            if verb == "cancel" and not sid:
                said = await actions.cancel(client, wid)
            elif verb == "decide" and sid:
                said = await actions.decide(client, settings.address, wid, sid, body)
            elif verb == "breakpoint" and sid:
                said = await actions.breakpoint_action(client, settings.address, wid, sid, body)
            else:
                return _problem(404, f"no action {verb!r} here")
        except actions.ActionRefused as exc:
            return _problem(exc.status, str(exc))
        return JSONResponse({"ok": True, "said": said})

    # Steps first: ``{wid:path}`` would swallow "/steps/<id>" otherwise.
    routes = [
        Route("/", index),
        Route("/static/{name}", static),
        Route("/favicon.ico", lambda request: Response(status_code=204)),
        Route("/api/info", info),
        Route("/api/plans", plans),
        Route("/api/plans/{wid:path}/steps/{sid}/{verb}", act, methods=["POST"]),
        Route("/api/plans/{wid:path}/steps/{sid}", step),
        Route("/api/plans/{wid:path}/events", events),
        Route("/api/plans/{wid:path}/{verb}", act, methods=["POST"]),
        Route("/api/plans/{wid:path}", plan),
    ]
    return ConsoleGuard(Starlette(routes=routes), settings)
