"""Moved to ``durable_plan.protect.result_store``; this import path keeps working (the README and
``examples/`` use it)."""

from durable_plan.protect.result_store import (
    OWNER as OWNER,
)
from durable_plan.protect.result_store import (
    STORE_ENV as STORE_ENV,
)
from durable_plan.protect.result_store import (
    FileResultStore as FileResultStore,
)
from durable_plan.protect.result_store import (
    ResultStore as ResultStore,
)
from durable_plan.protect.result_store import (
    S3ResultStore as S3ResultStore,
)
from durable_plan.protect.result_store import (
    StoredResultMissing as StoredResultMissing,
)
from durable_plan.protect.result_store import (
    StoredResultUnreadable as StoredResultUnreadable,
)
from durable_plan.protect.result_store import (
    default_root as default_root,
)
from durable_plan.protect.result_store import (
    owner_key as owner_key,
)
from durable_plan.protect.result_store import (
    owner_record as owner_record,
)
from durable_plan.protect.result_store import (
    plan_prefix as plan_prefix,
)
from durable_plan.protect.result_store import (
    result_key as result_key,
)
from durable_plan.protect.result_store import (
    store_from_env as store_from_env,
)
