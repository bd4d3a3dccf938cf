"""Moved to ``durable_plan.temporal.exactly_once``; this import path keeps working (the README and
``examples/`` use it)."""

from durable_plan.temporal.exactly_once import (
    TRANSACTION_PARAM as TRANSACTION_PARAM,
)
from durable_plan.temporal.exactly_once import (
    EffectStore as EffectStore,
)
from durable_plan.temporal.exactly_once import (
    EffectTransaction as EffectTransaction,
)
from durable_plan.temporal.exactly_once import (
    F as F,
)
from durable_plan.temporal.exactly_once import (
    SQLiteEffects as SQLiteEffects,
)
from durable_plan.temporal.exactly_once import (
    exactly_once as exactly_once,
)
