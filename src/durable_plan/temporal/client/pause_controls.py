"""A person's controls over a running plan, addressed by step path: pauses and approvals.

A call is addressed by its path from the top-level plan's root (``language.step_path``):
``e2``, ``e1/do.3``, ``e1/agent.2/charge``, ``e4/plan.fetch/agent.1/lookup``. The call
waits in the workflow that runs it (a plan's steps and items in the plan's, an agent step's
tool calls in the agent step's child, a saved plan's in its child plan): ``route`` finds
that workflow from the path alone (``StepPath.hops``: each child's id is
``ids.child_workflow_id(<its parent's id>, <kind>, <key>)``), and the workflow knows the
call by its path inside its run (``StepPath.within_run``). A text that is no step path (a
conversation's direct call, an old call id) is sent as it is, to the workflow given.

``PauseControls`` is what ``PlanHandle`` adds for breakpoints: ``paused()``,
``continue_``, ``skip``, ``abort``; the CLI and the console call these.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from temporalio.client import WorkflowHandle, WorkflowUpdateFailedError
from temporalio.service import RPCError, RPCStatusCode

from durable_plan.language.step_path import StepPathError, parse
from durable_plan.run.breakpoints import Action, check_action
from durable_plan.temporal.wire.ids import child_workflow_id
from durable_plan.temporal.wire.messages import failure_message
from durable_plan.temporal.workflows.pauses import (
    ANSWER_UPDATE,
    PAUSED_CHILDREN_QUERY,
    PAUSED_QUERY,
)

MAX_CHILDREN_ASKED = 64
"""Child workflows of one workflow whose pauses ``paused()`` asks about (a wide map)."""
MAX_CHILD_DEPTH = 10
"""Child workflows inside one another ``paused()`` follows: saved plans nest at most four
deep, each with an agent step and a saved plan's call in it."""


async def _paused_in(handle: WorkflowHandle[Any, Any], depth: int) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = list(await handle.query(PAUSED_QUERY))
    if depth >= MAX_CHILD_DEPTH:
        return found
    children: list[list[str]] = await handle.query(PAUSED_CHILDREN_QUERY)

    async def ask(kind: str, key: str) -> list[dict[str, Any]]:
        child = handle._client.get_workflow_handle(child_workflow_id(handle.id, kind, key))
        try:
            return await _paused_in(child, depth + 1)
        except RPCError:
            return []  # not started yet, or ended since

    asked = children[:MAX_CHILDREN_ASKED]
    for more in await asyncio.gather(*(ask(kind, key) for kind, key in asked)):
        found.extend(more)
    return found


def route(workflow_id: str, path: str) -> tuple[str, str]:
    """(the workflow holding the call at ``path``, the call's id there)."""
    try:
        parsed = parse(path)
    except StepPathError:
        return workflow_id, path
    target = workflow_id
    for kind, key in parsed.hops():
        target = child_workflow_id(target, kind, key)
    return target, parsed.within_run()


class PauseControls:
    """Breakpoint controls over ``self.handle`` (a plan workflow's handle)."""

    handle: WorkflowHandle[Any, Any]

    async def _update(self, path: str, name: str, arg: Callable[[str], Any]) -> Any:
        """Send update ``name`` to the workflow holding the call at ``path``, with
        ``arg(<the call's id there>)``; its answer."""
        return (await self._send(path, name, arg))[1]

    async def _send(self, path: str, name: str, arg: Callable[[str], Any]) -> tuple[str, Any]:
        """``_update``, and the id of the workflow that answered. A handle on an agent
        step's own child workflow is given the path too: when the child it routes to does
        not exist, the call is asked of this workflow."""
        target, call = route(self.handle.id, path)
        if target != self.handle.id:
            routed = self.handle._client.get_workflow_handle(target)
            try:
                return target, await routed.execute_update(name, arg(call))
            except RPCError as exc:
                if exc.status != RPCStatusCode.NOT_FOUND:
                    raise
        return self.handle.id, await self.handle.execute_update(name, arg(call))

    async def paused(self) -> list[dict[str, Any]]:
        """Every call paused now, in this plan and in the child workflows it runs (agent
        steps, saved plans, theirs): ``path`` (from the root), ``tool``, the bound ``args``,
        and the ``scope`` its bindings read."""
        return await _paused_in(self.handle, 0)

    async def answer(self, path: str, action: str) -> str:
        """Answer the call paused at ``path`` (``ValueError`` when none is paused there).
        ``abort`` then cancels the plan, which ends cancelled with its ledger: a call paused
        in a child workflow (an agent step's, a saved plan's) cancels the top-level plan
        itself (``pauses.PauseDesk``), one in this handle's workflow is cancelled here."""
        checked: Action = check_action(action)
        try:
            answered_by, said = await self._send(
                path, ANSWER_UPDATE, lambda call: {"path": call, "action": checked}
            )
        except WorkflowUpdateFailedError as exc:
            raise ValueError(failure_message(exc)) from None
        except RPCError as exc:
            raise ValueError(f"{path}: {exc.message}") from None
        if checked == "abort" and answered_by == self.handle.id:
            try:
                await self.handle.cancel()
            except RPCError as exc:  # a child's handle: the plan it aborted ended it already
                if exc.status != RPCStatusCode.NOT_FOUND:
                    raise
        return str(said)

    async def continue_(self, path: str) -> str:
        """Let the call paused at ``path`` go on (its approval, if any, still applies)."""
        return await self.answer(path, "continue")

    async def skip(self, path: str) -> str:
        """Skip the call paused at ``path``: a step or item ends ``not_taken`` (its
        dependents pruned), an agent's tool call returns an error to the agent."""
        return await self.answer(path, "skip")

    async def abort(self, path: str) -> str:
        """End the plan at the call paused at ``path``: cancelled, with its ledger."""
        return await self.answer(path, "abort")
