"""Test helpers: a deterministic scripted Strands model and history helpers."""

from durable_plan.testing import scripted_model
from durable_plan.testing.scripted_model import *  # noqa: F403  (the names in __all__)

__all__ = list(scripted_model.__all__)
