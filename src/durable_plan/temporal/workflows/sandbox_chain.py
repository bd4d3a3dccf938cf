"""Whose sandbox a plan's sandbox tools run in: the conversation's chain, decided in workflow
code from trusted input only. Workflow code.

``temporalio.strands_agents`` finds a sandbox's backing environment by the chain of the
workflow that schedules the sandbox activity: its namespace, its workflow id (read from the
activity's own info) and its first execution run id. A plan runs in a child workflow, another
chain, so the SDK's activities scheduled from there would find (or provision) another
environment than the conversation's: the file the agent wrote would not be there. So the
conversation writes its chain into the plan's input (``Chain``, a settings record the model
cannot reach: plan arguments are checked against each tool's schema, which has no such
field, and nothing here reads arguments), every child the plan starts (agent steps, nested
plans) carries the record whole, and each sandbox call sends it in its ``StepRequest``: our
wrapper activity calls the worker's registered factory with that chain
(``activities/sandbox_calls.py``).

A plan started outside a conversation (``start_plan``) has an empty record: its sandbox tools
use the plan's own chain, so its environment is its own, as a workflow's own sandbox is.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from durable_plan.language.options import ToolOptions
    from durable_plan.temporal.wire.plan_settings import Chain


def uses_sandbox(tools: Mapping[str, ToolOptions]) -> bool:
    """Whether a tool table has a sandbox tool: only then does a plan's input carry a chain
    (every other plan's input stays as it was, byte for byte)."""
    return any(o.kind == "sandbox" for o in tools.values())


def conversation_chain(agent: Any, tools: Mapping[str, ToolOptions]) -> Chain:
    """The chain of the conversation running in this workflow (the plan tool's body calls it
    in the agent's workflow), with its sandbox's stream topic when its agent's sandbox is a
    ``TemporalSandbox`` with one; empty when the plan's ``tools`` have no sandbox tool."""
    if not uses_sandbox(tools):
        return Chain()
    info = workflow.info()
    sandbox = getattr(agent, "sandbox", None)
    topic = getattr(sandbox, "_streaming_topic", None)
    return Chain(
        chain_namespace=info.namespace,
        chain_workflow_id=info.workflow_id,
        chain_first_run_id=info.first_execution_run_id,
        chain_run_id=info.run_id,
        sandbox_topic=topic if isinstance(topic, str) and topic else None,
    )


def own_chain(chain: Chain, tools: Mapping[str, ToolOptions] | None = None) -> Chain:
    """``chain`` when a conversation set it, else this workflow's own (a plan ``start_plan``
    started): what the children this workflow starts carry, so they all use one environment.
    ``tools``: the child's tool table; without a sandbox tool it gets ``chain`` as it is."""
    if chain.chain_workflow_id or (tools is not None and not uses_sandbox(tools)):
        return chain
    info = workflow.info()
    return replace(
        chain,
        chain_namespace=info.namespace,
        chain_workflow_id=info.workflow_id,
        chain_first_run_id=info.first_execution_run_id,
        chain_run_id=info.run_id,
    )


def sandbox_scope(chain: Chain, options: ToolOptions, path: str) -> dict[str, Any] | None:
    """What a sandbox tool's call sends beside its arguments (``StepRequest.sandbox``): the
    chain (this workflow's own when ``chain`` is empty), the stream topic and the call's
    path; None for every other kind of tool."""
    if options.kind != "sandbox":
        return None
    chain = own_chain(chain)
    scope: dict[str, Any] = {
        "namespace": chain.chain_namespace,
        "workflow_id": chain.chain_workflow_id,
        "first_execution_run_id": chain.chain_first_run_id,
        "run_id": chain.chain_run_id,
        "path": path,
    }
    if chain.sandbox_topic:
        scope["topic"] = chain.sandbox_topic
    return scope
