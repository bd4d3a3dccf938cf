"""Moved to ``durable_plan.server.devserver``; this import path keeps working (the README
uses it)."""

from durable_plan.server.devserver import HOST as HOST
from durable_plan.server.devserver import INSTALL_HINT as INSTALL_HINT
from durable_plan.server.devserver import DevServer as DevServer
from durable_plan.server.devserver import DevServerError as DevServerError
from durable_plan.server.devserver import DevServerNotFound as DevServerNotFound
from durable_plan.server.devserver import find_temporal_cli as find_temporal_cli
from durable_plan.server.devserver import free_port as free_port
from durable_plan.server.devserver import require_temporal_cli as require_temporal_cli
