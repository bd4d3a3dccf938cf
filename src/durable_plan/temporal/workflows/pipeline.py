"""The stages every durable tool call passes, in one order, written once.

A plan step, a map or reduce item, a tool call inside an agent step and a call the model
makes directly in a conversation (``direct_calls``) all go through ``Stages.run``: a pause
when a breakpoint names the call (``pauses``; never for a direct call), the agent's
before-hooks (they may cancel the call or rewrite its arguments; a direct call's
run in Strands itself, around this), a person's approval when the owner gated the tool,
admission (the workflow task's byte budget, the history guard, the pending-activity limit),
the activity under the owner's ``CallPolicy`` (``step_activities.call_activity``), then the
after-hooks (they may rewrite the result). In-process the same order holds
(``local.hooked``; a gated tool is refused in a plan there, and a direct call of it is the
agent's interrupt, ``tools.approval.ask_in_process``). Workflow code.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from durable_plan.language.options import ToolOptions
    from durable_plan.run.breakpoints import Skipped
    from durable_plan.temporal.workflows.admission import ALWAYS, Admission, Wanted, json_size
    from durable_plan.temporal.workflows.approvals import ApprovalDesk, await_decision
    from durable_plan.temporal.workflows.hook_relay import HookAsker
    from durable_plan.temporal.workflows.outcomes import Outcome
    from durable_plan.temporal.workflows.pauses import PauseDesk


@dataclass(frozen=True)
class Stages:
    """What one workflow's calls pass: its hook relay, approval desk and admission."""

    hooks: HookAsker
    desk: ApprovalDesk
    admission: Admission
    pauses: PauseDesk | None = None
    """Breakpoints: a call they name pauses before every other stage (``pauses``)."""

    async def run(
        self,
        call_id: str,
        tool: str,
        options: ToolOptions,
        args: dict[str, Any],
        execute: Callable[[dict[str, Any]], Awaitable[Outcome]],
        wanted: Wanted = ALWAYS,
        size: int | None = None,
        scope: Callable[[], dict[str, Any] | None] | None = None,
        carried: int = 0,
    ) -> Outcome | None:
        """The call through every stage; None when ``wanted`` says the plan stopped before
        it started (a ``fail_fast`` stop: the engine records it as skipped).

        A call a breakpoint names pauses first, its arguments bound, ``scope`` (what its
        bindings read) shown beside them; skipped, its outcome is ``Skipped`` (recorded as
        ``not_taken``); continued, it passes every stage below as it would have.

        ``execute`` gets the arguments as the hooks left them and runs the activity.
        ``size``: ``args`` as JSON, when the caller measured it already (a hook that
        rewrites them has them measured again). ``carried``: what the command carries
        besides the arguments (a saved plan's child input: its plan and the tool table,
        ``saved_plan_child.saved_plan_call_size``), counted whatever the hooks did."""
        if self.pauses is not None and self.pauses.wants(call_id, tool):
            if not wanted():
                return None
            action = await self.pauses.pause(call_id, tool, args, scope() if scope else None)
            if action == "skip":
                return False, Skipped(), 0.0, 0
        hooked = self.hooks.covers(tool)
        if hooked:
            if not wanted():
                return None
            before = await self.hooks.before(call_id, tool, args)
            if before.cancel is not None:
                return False, before.cancel, 0.0, 0
            if before.args is not args:
                args, size = before.args, None
        if options.requires_approval:
            if not wanted():
                return None
            rejected = await await_decision(self.desk, call_id, args, tool)
            if rejected is not None:
                return False, rejected, 0.0, 0
        verdict = await self.admission.enter(
            (json_size(args) if size is None else size) + carried, wanted=wanted
        )
        if verdict == "withdrawn":
            return None
        if verdict == "full":
            return False, self.admission.history_full_message(), 0.0, 0
        try:
            ok, value, duration_ms, attempts = await execute(args)
        finally:
            self.admission.leave()
        if hooked:
            after = await self.hooks.after(call_id, tool, ok, value)
            ok, value = after.ok, after.value
        return ok, value, duration_ms, attempts
