"""A plan over the agent's sandbox: the agent writes a file directly, its plan reads it, edits
it and runs a command over it, and the agent's next direct call sees the change.

.venv/bin/durable-plan dev                      # terminal 1 (or TEMPORAL_ADDRESS=host:port)
.venv/bin/python examples/sandbox_agent.py      # --live: Bedrock writes the plan
"""

import sys
import uuid

from sandbox_agent_workflow import PLAN, SANDBOX, TOOLS, SandboxAgentWorkflow, workspace
from temporalio.strands_agents import StrandsPlugin

from durable_plan import connect, plan_worker, run_script
from durable_plan.testing import ScriptedModel, call, say

PROMPT = "Write hello.txt, make it polite in a plan, then show me."


def model() -> object:
    if "--live" in sys.argv:
        from strands.models.bedrock import BedrockModel

        return BedrockModel()
    turns = [
        call("sandbox_file_editor", command="create", path="/hello.txt", file_text="hi there\n"),
        call("submit_workflow_plan", **PLAN),
        call("sandbox_shell", command="cat hello.txt"),
        say("Done: hello.txt is polite now."),
    ]
    return ScriptedModel(scripts={PROMPT: turns})


async def main() -> None:
    # The sandbox is registered once, as the SDK documents; plans reach it through the same
    # factory, with the conversation's chain.
    plugin = StrandsPlugin(models={"default": model}, sandboxes={SANDBOX: workspace})
    client = await connect(plugins=[plugin])
    workflow_id = f"sandbox-agent-{uuid.uuid4().hex[:8]}"
    async with plan_worker(
        client, task_queue="sandbox-agents", registry=TOOLS, workflows=[SandboxAgentWorkflow]
    ):
        created, plan, cat, answer = await client.execute_workflow(
            SandboxAgentWorkflow.run, PROMPT, id=workflow_id, task_queue="sandbox-agents"
        )
    print("agent wrote:", created[0])
    print("plan returned:", plan[0]["returned"])
    print("agent then read:", cat[0])
    print("answer:", answer)


if __name__ == "__main__":
    run_script(main())
