"""Moved to ``durable_plan.strands.plugin``; this import path keeps working (the README and
``examples/`` use it)."""

from durable_plan.strands.plugin import (
    CONVERSATION_MAX_HISTORY_BYTES as CONVERSATION_MAX_HISTORY_BYTES,
)
from durable_plan.strands.plugin import (
    DEFAULT_HOOK_RELAY_BYTES as DEFAULT_HOOK_RELAY_BYTES,
)
from durable_plan.strands.plugin import (
    INTERRUPTED_REFUSAL as INTERRUPTED_REFUSAL,
)
from durable_plan.strands.plugin import (
    MAX_RESULTS_KEPT as MAX_RESULTS_KEPT,
)
from durable_plan.strands.plugin import (
    ONE_AT_A_TIME_PATCH as ONE_AT_A_TIME_PATCH,
)
from durable_plan.strands.plugin import (
    PLUGIN_NAME as PLUGIN_NAME,
)
from durable_plan.strands.plugin import (
    RECOVER_LEDGER_PATCH as RECOVER_LEDGER_PATCH,
)
from durable_plan.strands.plugin import (
    PlanTool as PlanTool,
)
from durable_plan.strands.plugin import (
    WorkflowPlanPlugin as WorkflowPlanPlugin,
)
from durable_plan.strands.plugin import (
    durable_plan_options as durable_plan_options,
)
from durable_plan.strands.plugin import (
    unwrap_peer_input as unwrap_peer_input,
)
