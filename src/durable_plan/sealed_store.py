"""Moved to ``durable_plan.protect.sealed_store``; this import path (0.1.0's) keeps working."""

from durable_plan.protect.sealed_store import SEAL_MARKER as SEAL_MARKER
from durable_plan.protect.sealed_store import SealedResultStore as SealedResultStore
