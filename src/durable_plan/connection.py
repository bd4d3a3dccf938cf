"""Moved to ``durable_plan.server.connection``; this import path keeps working (the README and
``examples/`` use it)."""

from durable_plan.server.connection import (
    ADDRESS_ENV as ADDRESS_ENV,
)
from durable_plan.server.connection import (
    DEFAULT_ADDRESS as DEFAULT_ADDRESS,
)
from durable_plan.server.connection import (
    DEFAULT_NAMESPACE as DEFAULT_NAMESPACE,
)
from durable_plan.server.connection import (
    NAMESPACE_ENV as NAMESPACE_ENV,
)
from durable_plan.server.connection import (
    UI_URL_ENV as UI_URL_ENV,
)
from durable_plan.server.connection import (
    BadAddress as BadAddress,
)
from durable_plan.server.connection import (
    NamespaceNotFound as NamespaceNotFound,
)
from durable_plan.server.connection import (
    ServerSetupError as ServerSetupError,
)
from durable_plan.server.connection import (
    ServerUnreachable as ServerUnreachable,
)
from durable_plan.server.connection import (
    add_encryption_argument as add_encryption_argument,
)
from durable_plan.server.connection import (
    add_server_arguments as add_server_arguments,
)
from durable_plan.server.connection import (
    check_address as check_address,
)
from durable_plan.server.connection import (
    connect as connect,
)
from durable_plan.server.connection import (
    default_address as default_address,
)
from durable_plan.server.connection import (
    default_namespace as default_namespace,
)
from durable_plan.server.connection import (
    default_ui_url as default_ui_url,
)
from durable_plan.server.connection import (
    exit_now as exit_now,
)
from durable_plan.server.connection import (
    run_script as run_script,
)
from durable_plan.server.connection import (
    transport_reason as transport_reason,
)
from durable_plan.server.connection import (
    unreachable_message as unreachable_message,
)
from durable_plan.server.connection import (
    workflow_url as workflow_url,
)
