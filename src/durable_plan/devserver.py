"""Moved to ``durable_plan.server.devserver``; this import path keeps working (the README and
``examples/`` use it)."""

from durable_plan.server.devserver import (
    DevServer as DevServer,
)
from durable_plan.server.devserver import (
    DevServerError as DevServerError,
)
from durable_plan.server.devserver import (
    DevServerNotFound as DevServerNotFound,
)
from durable_plan.server.devserver import (
    find_temporal_cli as find_temporal_cli,
)
from durable_plan.server.devserver import (
    find_test_server as find_test_server,
)
from durable_plan.server.devserver import (
    free_port as free_port,
)
from durable_plan.server.devserver import (
    require_temporal_cli as require_temporal_cli,
)
from durable_plan.server.devserver import (
    require_test_server as require_test_server,
)
