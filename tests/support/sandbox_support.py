"""A real local sandbox per workflow chain, registered as a user would
(``StrandsPlugin(sandboxes={"work": chain_sandboxes(base)})``), and the tools plans call on it.

``DirSandbox`` is Strands' ``NotASandboxLocalEnvironment`` rooted in one directory: commands run
there (``sh -c`` in that directory), and a file path (absolute, as Strands' file editor wants)
is read under it, so ``/notes.txt`` is ``<root>/notes.txt``. The factory gives each chain
(namespace, workflow id, first run id) its own directory, made idempotently, as the SDK asks
of a factory: every worker process, every attempt, finds the same one.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from strands import tool
from strands.sandbox.not_a_sandbox_local_environment import NotASandboxLocalEnvironment
from strands.types.tools import ToolContext
from temporalio.strands_agents import SandboxWorkflowContext

from durable_plan.tools.registry import ToolRegistry
from durable_plan.tools.sandbox_tools import add_sandbox_tools, on_sandbox

SANDBOX = "work"
BASE_ENV = "DURABLE_PLAN_TEST_SANDBOXES"
"""Where a worker subprocess finds the sandboxes' base directory."""
CALLS_FILE = "factory-calls.log"
"""Each factory call appends the chain it was asked for here (under the base directory)."""


class DirSandbox(NotASandboxLocalEnvironment):
    """The host's shell and files, rooted in ``root`` (not an isolation boundary: a test's)."""

    def __init__(self, root: Path) -> None:
        super().__init__()
        self.root = root

    def _resolve_path(self, path: str) -> Path:  # type: ignore[override]
        return self.root / path.lstrip("/")

    async def execute_streaming(self, command: str, **kwargs: Any) -> Any:
        kwargs["cwd"] = kwargs.get("cwd") or str(self.root)
        async for item in super().execute_streaming(command, **kwargs):
            yield item


def chain_dir(base: Path, context: SandboxWorkflowContext) -> Path:
    chain = context.chain
    name = f"{chain.workflow_id}--{chain.first_execution_run_id}"
    return base / re.sub(r"[^A-Za-z0-9_.-]", "_", name)


def chain_sandboxes(base: Path | None = None) -> Any:
    """The factory: one ``DirSandbox`` per chain under ``base`` (default: ``$BASE_ENV``)."""

    def factory(context: SandboxWorkflowContext) -> DirSandbox:
        root_base = base if base is not None else Path(os.environ[BASE_ENV])
        root = chain_dir(root_base, context)
        root.mkdir(parents=True, exist_ok=True)  # idempotent: any worker, any attempt
        with (root_base / CALLS_FILE).open("a") as log:
            log.write(f"{context.chain.workflow_id} {context.chain.first_execution_run_id}\n")
        return DirSandbox(root)

    return factory


@tool(context=True)
async def count_lines(path: str, tool_context: ToolContext) -> dict[str, Any]:
    """Count the lines of a file in the sandbox (an owner's tool on the sandbox API).

    Args:
        path: Absolute path of the file.
    """
    text = (await tool_context.agent.sandbox.read_file(path)).decode()
    return {"path": path, "lines": len(text.splitlines())}


def sandbox_registry(
    *, shell_approval: bool = False, retries: int = 2, heartbeat_timeout_s: float | None = None
) -> ToolRegistry:
    """The conversation's plannable tools: the sandbox's shell and editor, and ``count_lines``."""
    registry = ToolRegistry()
    [shell, editor] = add_sandbox_tools(
        registry, SANDBOX, timeout_s=30, retries=retries, heartbeat_timeout_s=heartbeat_timeout_s
    )
    if shell_approval:
        registry = ToolRegistry()
        registry.add(on_sandbox(shell.target, SANDBOX), requires_approval=True, timeout_s=30)
        registry.add(on_sandbox(editor.target, SANDBOX), timeout_s=30, retries=retries)
    registry.add(on_sandbox(count_lines, SANDBOX), timeout_s=30)
    return registry


SANDBOX_TOOLS = sandbox_registry()
NESTED_SANDBOX_TOOLS = sandbox_registry()
NESTED_SANDBOX_TOOLS.add_plan(
    {
        "steps": [{"id": "peek", "tool": "sandbox_shell", "args": {"command": "cat notes.txt"}}],
        "returns": ["peek"],
    },
    name="peek_notes",
)
"""A saved plan (``plan__peek_notes``) whose step reads the caller's environment."""
GATED_SANDBOX_TOOLS = sandbox_registry(shell_approval=True)
SLOW_SANDBOX_TOOLS = sandbox_registry(retries=0, heartbeat_timeout_s=1.0)
"""No retries of the tool's own: a step a killed worker cut short runs again only as an
interruption (``max_interruptions``), in the same environment."""


# -- the model's scripts (the tests' conversations and a crash worker's) -----------------------

NOTES = "alpha\nbeta\n"
EDIT_PLAN: dict[str, Any] = {
    "steps": [
        {
            "id": "read",
            "tool": "sandbox_file_editor",
            "args": {"command": "view", "path": "/notes.txt"},
        },
        {
            "id": "edit",
            "tool": "sandbox_file_editor",
            "args": {
                "command": "str_replace",
                "path": "/notes.txt",
                "old_str": "beta",
                "new_str": "gamma",
            },
            "after": ["read"],
        },
        {
            "id": "run",
            "tool": "sandbox_shell",
            "args": {"command": "grep -c a notes.txt"},
            "after": ["edit"],
        },
        {"id": "lines", "tool": "count_lines", "args": {"path": "/notes.txt"}, "after": ["edit"]},
    ],
    "returns": ["read", "run", "lines"],
}
FIX_PROMPT = "Fix the notes: beta becomes delta."
AGENT_PLAN: dict[str, Any] = {
    "steps": [
        {
            "id": "fix",
            "tool": "agent",
            "args": {
                "prompt": FIX_PROMPT,
                "output_schema": {
                    "type": "object",
                    "properties": {"fixed": {"type": "boolean"}},
                    "required": ["fixed"],
                },
                "tools": ["sandbox_file_editor", "sandbox_shell"],
                "max_iterations": 4,
            },
        }
    ],
    "returns": ["fix"],
}
MAP_PLAN: dict[str, Any] = {
    "steps": [
        {
            "id": "each",
            "tool": "map",
            "args": {
                "over": ["/a.txt", "/b.txt"],
                "do": {
                    "tool": "sandbox_file_editor",
                    "args": {"command": "str_replace", "old_str": "x", "new_str": "y"},
                    "bind": {"path": "item"},
                },
            },
        }
    ],
    "returns": ["each"],
}
SLOW_COMMAND = "echo start >> runs.log; sleep 3; echo done >> runs.log; cat notes.txt"


def _edit(path: str, old: str, new: str) -> Any:
    from durable_plan.testing import call

    return call("sandbox_file_editor", command="str_replace", path=path, old_str=old, new_str=new)


def sandbox_scripts() -> dict[str, list[Any]]:
    from durable_plan.testing import call, output, say

    def create(path: str, text: str) -> Any:
        return call("sandbox_file_editor", command="create", path=path, file_text=text)

    def plan(**body: Any) -> Any:
        return call("submit_workflow_plan", **body)

    cat = call("sandbox_shell", command="cat notes.txt")
    peek = plan(
        steps=[{"id": "peek", "tool": "sandbox_shell", "args": {"command": "cat secret.txt"}}]
    )
    return {
        "edit in a plan": [create("/notes.txt", NOTES), plan(**EDIT_PLAN), cat, say("done")],
        "fix in an agent step": [create("/notes.txt", NOTES), plan(**AGENT_PLAN), cat, say("done")],
        FIX_PROMPT: [
            _edit("/notes.txt", "beta", "delta"),
            call("sandbox_shell", command="cat notes.txt"),
            output({"fixed": True}),
        ],
        "edit over files": [
            [create("/a.txt", "x1\n"), create("/b.txt", "x2\n")],
            plan(**MAP_PLAN),
            call("sandbox_shell", command="cat a.txt b.txt"),
            say("done"),
        ],
        "keep a secret red": [create("/secret.txt", "red\n"), say("kept"), peek, say("read")],
        "keep a secret blue": [create("/secret.txt", "blue\n"), say("kept"), peek, say("read")],
        "read another's secret": [
            plan(steps=[{"id": "peek", "tool": "count_lines", "args": {"path": "/secret.txt"}}]),
            say("no such file"),
        ],
        "forge a chain": [
            plan(
                steps=[
                    {
                        "id": "peek",
                        "tool": "sandbox_shell",
                        "args": {"command": "cat secret.txt", "chain_workflow_id": "sandbox-red"},
                    }
                ]
            ),
            say("refused"),
        ],
        "count directly": [
            create("/notes.txt", NOTES),
            call("count_lines", path="/notes.txt"),
            say("two"),
        ],
        "peek in a saved plan": [
            create("/notes.txt", NOTES),
            plan(steps=[{"id": "nested", "tool": "plan__peek_notes"}], returns=["nested"]),
            say("done"),
        ],
        "gated command": [
            create("/notes.txt", NOTES),
            plan(
                steps=[
                    {"id": "run", "tool": "sandbox_shell", "args": {"command": "wc -l notes.txt"}}
                ]
            ),
            say("done"),
        ],
        "slow command": [
            create("/notes.txt", NOTES),
            plan(
                steps=[{"id": "slow", "tool": "sandbox_shell", "args": {"command": SLOW_COMMAND}}]
            ),
            say("done"),
        ],
    }
