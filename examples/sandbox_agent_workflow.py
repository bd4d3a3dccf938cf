"""SandboxAgentWorkflow: a TemporalAgent in its own sandbox, whose plans work in it too.

The agent's direct calls to ``sandbox_shell`` / ``sandbox_file_editor`` are the SDK's sandbox
activities (``TemporalSandbox("workspace")``). A plan's steps call the same tools, registered on
the plugin's registry as sandbox tools: each step is our wrapper activity, which calls the same
factory with this conversation's chain (carried in the plan's input, never by the model), so
the plan reads, edits and runs in the very environment the agent wrote to.
"""

import tempfile
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from strands import tool
    from strands.sandbox.not_a_sandbox_local_environment import NotASandboxLocalEnvironment
    from strands.types.tools import ToolContext
    from temporalio.strands_agents import SandboxWorkflowContext, TemporalAgent, TemporalSandbox

    from durable_plan import ToolRegistry, WorkflowPlanPlugin, fail_on_agent_error
    from durable_plan.tools.sandbox_tools import add_sandbox_tools, on_sandbox

SANDBOX = "workspace"


class Workspace(NotASandboxLocalEnvironment):
    """The host's shell and files in one directory per conversation (a demo, not isolation:
    use DockerSandbox or your own backend where it matters). ``/x`` is ``<dir>/x``."""

    def __init__(self, root: Path) -> None:
        super().__init__()
        self.root = root

    def _resolve_path(self, path: str) -> Path:  # type: ignore[override]
        return self.root / path.lstrip("/")

    async def execute_streaming(self, command: str, **kwargs: Any) -> Any:
        kwargs["cwd"] = kwargs.get("cwd") or str(self.root)
        async for item in super().execute_streaming(command, **kwargs):
            yield item


def workspace(context: SandboxWorkflowContext) -> Workspace:
    """The factory: the conversation's workspace, found (or made) by its chain, idempotently:
    the agent's direct calls and its plans' steps, on any worker, get the same one."""
    chain = context.chain
    name = f"{chain.workflow_id}-{chain.first_execution_run_id}".replace("/", "_")
    root = Path(tempfile.gettempdir()) / "durable-plan-workspaces" / name
    root.mkdir(parents=True, exist_ok=True)
    return Workspace(root)


@tool(context=True)
async def word_count(path: str, tool_context: ToolContext) -> dict[str, Any]:
    """Count the words of a file in the sandbox (an owner's tool on the sandbox API).

    Args:
        path: Absolute path of the file.
    """
    text = (await tool_context.agent.sandbox.read_file(path)).decode()
    return {"path": path, "words": len(text.split())}


TOOLS = ToolRegistry()
add_sandbox_tools(TOOLS, SANDBOX, timeout_s=60, retries=1)  # sandbox_shell, sandbox_file_editor
TOOLS.add(on_sandbox(word_count, SANDBOX), timeout_s=30)

PLAN = {
    "steps": [
        {
            "id": "read",
            "tool": "sandbox_file_editor",
            "args": {"command": "view", "path": "/hello.txt"},
        },
        {
            "id": "edit",
            "tool": "sandbox_file_editor",
            "args": {
                "command": "str_replace",
                "path": "/hello.txt",
                "old_str": "hi",
                "new_str": "good day",
            },
            "after": ["read"],
        },
        {
            "id": "shout",
            "tool": "sandbox_shell",
            "args": {"command": "tr a-z A-Z < hello.txt"},
            "after": ["edit"],
        },
        {"id": "words", "tool": "word_count", "args": {"path": "/hello.txt"}, "after": ["edit"]},
    ],
    "returns": ["shout", "words"],
}


@workflow.defn
class SandboxAgentWorkflow:
    @workflow.run
    async def run(self, prompt: str) -> list[Any]:
        """What each tool call of the conversation returned, in order (the answer last)."""
        agent = TemporalAgent(
            model="default",
            sandbox=TemporalSandbox(
                SANDBOX,
                start_to_close_timeout=timedelta(seconds=60),
                retry_policy=RetryPolicy(maximum_attempts=3),
            ),
            plugins=[WorkflowPlanPlugin(["*"], registry=TOOLS)],
            callback_handler=None,
            start_to_close_timeout=timedelta(seconds=60),
            retry_policy=RetryPolicy(maximum_attempts=2),
        )
        with fail_on_agent_error():  # never leave the workflow task retrying
            answer = str(await agent.invoke_async(prompt)).strip()
        results = [
            b["toolResult"] for m in agent.messages for b in m["content"] if "toolResult" in b
        ]
        return [[c.get("json", c.get("text")) for c in r["content"]] for r in results] + [answer]
