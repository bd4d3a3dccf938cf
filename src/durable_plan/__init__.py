"""durable-plan: a Temporal-durable plan executor for LLM agents."""

__version__ = "0.1.0"
