"""MCP tools as plan steps: a real MCP server (FastMCP over stdio, ``tests/support/mcp_server.py``).

In-process, a plain Strands ``Agent`` reaches the server through ``MCPClient``;
durably, a ``TemporalAgent`` lists it through ``TemporalMCPClient`` and each step
runs the server's ``github-call-tool`` activity, registered by
``StrandsPlugin(mcp_clients=...)``, on the session's dev server.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from strands import Agent, tool
from strands.tools.mcp import MCPClient
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHistory
from temporalio.strands_agents import StrandsPlugin
from temporalio.worker import Replayer

from durable_plan import check_plan, plan_worker, start_plan
from durable_plan.check import ToolCatalog
from durable_plan.language.errors import PlanRejected
from durable_plan.local.runner import execute_plan
from durable_plan.strands.plugin import WorkflowPlanPlugin
from durable_plan.testing import ScriptedModel, TurnLike, call, output, say
from durable_plan.tools.mcp import listed_tools, mcp_servers, mcp_tool_table, result_json
from tests.support.helpers import tool_results
from tests.support.mcp_server import LOG_ENV
from tests.support.mcp_support import LOCAL_TOOLS, tracker_client, triage
from tests.support.mcp_workflows import McpAgentInput, McpAgentWorkflow

MIX_PLAN: dict[str, Any] = {
    "steps": [
        {"id": "issue", "tool": "github__get_issue", "args": {"number": 7}},
        {"id": "label", "tool": "triage", "bind": {"title": "steps.issue.title"}},
        {
            "id": "labelled",
            "tool": "github__add_label",
            "bind": {"number": "steps.issue.number", "label": "steps.label.label"},
        },
        {"id": "motd", "tool": "github__motd", "timeout_s": 5, "retries": 0},
    ],
    "returns": ["labelled", "motd"],
    "final": True,
}
LABELLED = {"number": 7, "labels": ["bug", "monster"]}
OVERLAP_PLAN: dict[str, Any] = {
    "steps": [
        {"id": "a", "tool": "github__slow_count", "args": {"number": 1, "seconds": 0.6}},
        {"id": "b", "tool": "github__slow_count", "args": {"number": 2, "seconds": 0.6}},
    ],
    "final": True,
}
CLOSE_PLAN: dict[str, Any] = {
    "steps": [
        {"id": "issue", "tool": "github__get_issue", "args": {"number": 7}},
        {
            "id": "close",
            "tool": "github__close_issue",
            "bind": {"number": "steps.issue.number"},
            "args": {"reason": "fixed"},
        },
    ]
}
LOCKED = "issue #7 is locked: only maintainers may close it"
ISSUE_SCHEMA = {
    "type": "object",
    "properties": {"label": {"type": "string"}},
    "required": ["label"],
}
AGENT_STEP_PLAN: dict[str, Any] = {
    "steps": [
        {
            "id": "pick",
            "tool": "agent",
            "args": {
                "prompt": "Which label fits issue 9?",
                "output_schema": ISSUE_SCHEMA,
                "tools": ["github__*"],
                "max_iterations": 3,
            },
        },
        {
            "id": "each",
            "tool": "map",
            "args": {
                "over": [7, 9],
                "do": {
                    "tool": "github__slow_count",
                    "args": {"seconds": 0.05},
                    "bind": {"number": "item"},
                },
            },
        },
    ],
    "final": True,
}

SCRIPTS: dict[str, list[TurnLike]] = {
    "triage issue 7": [call("submit_workflow_plan", **MIX_PLAN)],
    "count in parallel": [call("submit_workflow_plan", **OVERLAP_PLAN)],
    "close issue 7": [call("submit_workflow_plan", **CLOSE_PLAN), say("It is locked.")],
    "label issue 9": [call("submit_workflow_plan", **AGENT_STEP_PLAN)],
    "delete issue 7": [
        call(
            "submit_workflow_plan",
            steps=[{"id": "gone", "tool": "github__delete_issue", "args": {"number": 7}}],
        ),
        say("I will ask first."),
    ],
    "read deep results": [
        call(
            "submit_workflow_plan",
            steps=[
                {"id": "text", "tool": "github__deep_text", "args": {"levels": 5000}},
                {"id": "record", "tool": "github__deep_record", "args": {"levels": 150}},
            ],
            on_error="continue",
        ),
        say("Read."),
    ],
    "Which label fits issue 9?": [
        call("github__get_issue", number=9),
        output({"label": "ogre"}),
    ],
}


@pytest.fixture
def mcp_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Where the test server logs its calls (servers started from now on inherit it)."""
    log = tmp_path / "mcp-calls.jsonl"
    monkeypatch.setenv(LOG_ENV, str(log))
    return log


def calls(log: Path, tool: str, event: str = "done") -> list[dict[str, Any]]:
    if not log.exists():
        return []
    lines = [json.loads(line) for line in log.read_text().splitlines() if line.endswith("}")]
    return [e for e in lines if e["tool"] == tool and e["event"] == event]


@pytest.fixture
def local_agent(mcp_log: Path) -> Iterator[Any]:
    """Builds plain agents over the "github" server and ``triage``; stops their clients."""
    clients: list[MCPClient] = []

    def make(*, plannable: list[str] | None = None, servers: int = 1) -> Agent:
        mcp = [tracker_client(prefix=name) for name in ("github", "tracker")[:servers]]
        clients.extend(mcp)
        return Agent(
            model=ScriptedModel(scripts=SCRIPTS),
            tools=[*mcp, tool(triage)],
            plugins=[WorkflowPlanPlugin(plannable)],
            callback_handler=None,
        )

    yield make
    for client in clients:
        client.stop(None, None, None)


# -- the catalogue and the checks --------------------------------------------------------------


async def test_mcp_tools_are_checked_against_their_servers_schemas(local_agent: Any) -> None:
    agent = local_agent(servers=2)
    tools = await listed_tools(mcp_servers(agent), durable=False)
    names = {t.name for t in tools}
    # Two servers with the same tools: each name carries its server.
    assert {"github__get_issue", "tracker__get_issue", "github__motd"} <= names
    registry = LOCAL_TOOLS.with_tools(tools)
    bad = {
        "steps": [
            {"id": "a", "tool": "github__get_isue", "args": {"number": 7}},
            {"id": "b", "tool": "github__get_issue", "args": {"numbr": 7}},
            {"id": "c", "tool": "github__get_issue", "args": {"number": "seven"}},
            {"id": "d", "tool": "github__add_label", "args": {"number": 7}},
        ]
    }
    with pytest.raises(PlanRejected) as caught:
        check_plan(bad, catalog=registry.catalog())
    text = str(caught.value)
    assert "unknown tool 'github__get_isue'" in text and "did you mean 'github__get_issue'" in text
    assert "has no argument 'numbr'" in text and "did you mean 'number'" in text
    assert "step 'c'" in text and "'seven'" in text
    assert "step 'd'" in text and "'label'" in text
    check_plan(MIX_PLAN, catalog=registry.catalog())  # the good plan passes


async def test_patterns_exclude_mcp_tools_by_server_and_name(local_agent: Any) -> None:
    agent = local_agent(servers=2)
    registry = LOCAL_TOOLS.with_tools(await listed_tools(mcp_servers(agent), durable=False))
    delete = {"steps": [{"id": "d", "tool": "github__delete_issue", "args": {"number": 7}}]}
    catalog = registry.catalog(["*", "!github__delete_*"])
    with pytest.raises(PlanRejected, match="excluded from plans by the plannable setting"):
        check_plan(delete, catalog=catalog)
    assert "tracker__delete_issue" in catalog.plannable
    only_github = registry.catalog(["github__*"]).plannable
    assert "triage" not in only_github and "tracker__get_issue" not in only_github
    assert "github__get_issue" in only_github


async def test_an_mcp_tools_output_schema_refuses_a_field_it_lacks(local_agent: Any) -> None:
    """The server's ``outputSchema`` (a closed pydantic model) is the tool's return shape,
    in-process and in a durable tool table: ``steps.who.name`` is refused before anything
    runs; ``steps.who.login`` runs and binds what the server returned."""
    agent = local_agent()
    registry = LOCAL_TOOLS.with_tools(await listed_tools(mcp_servers(agent), durable=False))
    who = {"id": "who", "tool": "github__get_assignee", "args": {"number": 7}}

    def plan(field: str) -> dict[str, Any]:
        return {
            "steps": [who, {"id": "t", "tool": "triage", "bind": {"title": f"steps.who.{field}"}}]
        }

    with pytest.raises(PlanRejected) as caught:
        await execute_plan(plan("name"), registry)
    [problem] = caught.value.problems
    assert problem.message == (
        "steps.who has no field 'name': github__get_assignee returns login, open_issues"
    )
    result = await execute_plan(plan("login"), registry)
    assert result.ok and result.returned["who"] == {"login": "mira", "open_issues": 1}
    with tracker_client() as listing:
        table = mcp_tool_table("github", listing.list_tools_sync())
    assert table["github__get_assignee"].output_schema is not None
    with pytest.raises(PlanRejected, match="has no field 'name'"):
        check_plan(
            plan("name"),
            catalog=ToolCatalog.from_options({**LOCAL_TOOLS.options(), **table}),
            durable=True,
        )


def test_an_mcp_result_is_its_structured_content_else_its_text() -> None:
    structured = {"status": "success", "content": [{"text": "{}"}], "structuredContent": {"a": 1}}
    assert result_json(structured) == {"a": 1}
    assert result_json({"status": "success", "content": [{"text": "plain"}]}) == "plain"
    assert result_json({"status": "success", "content": [{"text": "[1, 2]"}]}) == [1, 2]


# -- in-process ------------------------------------------------------------------------------


async def test_a_plain_agents_plan_mixes_mcp_and_local_tools(
    local_agent: Any, mcp_log: Path
) -> None:
    agent = local_agent()
    result = await agent.invoke_async("triage issue 7")
    assert json.loads(str(result)) == {"labelled": LABELLED, "motd": "Mind the ogre."}
    assert len(calls(mcp_log, "get_issue")) == 1 and len(calls(mcp_log, "add_label")) == 1
    # The plan tool's description names the MCP tools the way plans call them.
    description = agent.tool_registry.registry["submit_workflow_plan"].tool_spec["description"]
    assert "github__get_issue" in description and "triage" in description


async def test_independent_mcp_steps_overlap_in_process(local_agent: Any, mcp_log: Path) -> None:
    agent = local_agent()
    started = time.perf_counter()
    result = await agent.invoke_async("count in parallel")
    elapsed = time.perf_counter() - started
    assert json.loads(str(result)) == {
        "a": {"number": 1, "comments": 3},
        "b": {"number": 2, "comments": 6},
    }
    assert elapsed < 1.1, f"two 0.6 s MCP steps took {elapsed:.2f} s: they did not overlap"


async def test_an_mcp_error_result_fails_its_step_with_the_servers_message(
    local_agent: Any,
) -> None:
    agent = local_agent()
    await agent.invoke_async("close issue 7")
    [report] = tool_results(agent)
    assert report["status"] == "error"
    text = report["content"][0]["text"]
    assert LOCKED in text and "close" in text, text


async def test_an_agent_step_and_a_map_body_call_mcp_tools_in_process(
    local_agent: Any, mcp_log: Path
) -> None:
    agent = local_agent()
    result = await agent.invoke_async("label issue 9")
    returned = json.loads(str(result))
    assert returned["pick"]["output"] == {"label": "ogre"}
    assert returned["pick"]["tools_called"][0]["tool"] == "github__get_issue"
    assert [r["comments"] for r in returned["each"]["results"]] == [21, 27]
    assert [c["args"]["number"] for c in calls(mcp_log, "get_issue")] == [9]


# -- durable: a TemporalAgent over TemporalMCPClient --------------------------------------------


@pytest.fixture(scope="module")
async def mcp_client(temporal_target: str) -> AsyncIterator[Client]:
    plugin = StrandsPlugin(
        models={"scripted": lambda: ScriptedModel(scripts=SCRIPTS)},
        mcp_clients={"github": tracker_client},
    )
    yield await Client.connect(temporal_target, plugins=[plugin])


async def converse(
    client: Client, task_queue: str, prompt: str, **options: Any
) -> tuple[dict[str, Any], str]:
    """One conversation on a worker of its own (it closes the server's connection after)."""
    workflow_id = f"mcp-{uuid.uuid4().hex[:8]}"
    async with plan_worker(
        client, task_queue=task_queue, registry=LOCAL_TOOLS, workflows=[McpAgentWorkflow]
    ):
        out = await client.execute_workflow(
            McpAgentWorkflow.run,
            McpAgentInput(prompt, **options),
            id=workflow_id,
            task_queue=task_queue,
        )
    return out, workflow_id


def scheduled(history: WorkflowHistory) -> list[tuple[str, str]]:
    """(activity type, activity id) of every activity the workflow scheduled."""
    return [
        (
            e.activity_task_scheduled_event_attributes.activity_type.name,
            e.activity_task_scheduled_event_attributes.activity_id,
        )
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]


async def test_a_temporal_agents_plan_mixes_mcp_and_local_tools(
    mcp_client: Client, task_queue: str, mcp_log: Path
) -> None:
    out, workflow_id = await converse(mcp_client, task_queue, "triage issue 7")
    assert json.loads(out["answer"]) == {"labelled": LABELLED, "motd": "Mind the ogre."}
    plan = mcp_client.get_workflow_handle(f"{workflow_id}/plan/tooluse_0_0")
    history = await plan.fetch_history()
    # Each MCP step is the server's call-tool activity, scheduled by the plan workflow
    # under the step's id; the local tool is its own activity.
    assert sorted(scheduled(history)) == [
        ("github-call-tool", "issue"),
        ("github-call-tool", "labelled"),
        ("github-call-tool", "motd"),
        ("triage", "label"),
    ]
    # The step's own timeout; one attempt per call: the plan workflow calls again itself,
    # within the step's retries (nothing tells a slow server from a lost worker, so no
    # spare attempts: issue 22, item 7).
    options = {
        a.activity_id: (
            a.start_to_close_timeout.ToTimedelta().total_seconds(),
            a.retry_policy.maximum_attempts,
        )
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and (a := e.activity_task_scheduled_event_attributes).activity_type.name
        == "github-call-tool"
    }
    assert options == {"issue": (10.0, 1), "labelled": (10.0, 1), "motd": (5.0, 1)}, options
    assert len(calls(mcp_log, "get_issue")) == 1 and len(calls(mcp_log, "add_label")) == 1
    # The agent's own history lists the server (list-tools) but never calls it directly.
    agent_types = {
        t for t, _ in scheduled(await mcp_client.get_workflow_handle(workflow_id).fetch_history())
    }
    assert "github-list-tools" in agent_types and "github-call-tool" not in agent_types
    replayer = Replayer(
        workflows=[McpAgentWorkflow, *plan_workflows()],
        plugins=[StrandsPlugin(models={}, mcp_clients={"github": tracker_client})],
    )
    await replayer.replay_workflow(history)


def plan_workflows() -> list[type]:
    from durable_plan.temporal.workflows.agent_workflow import AgentStepWorkflow
    from durable_plan.temporal.workflows.plan_workflow import PlanWorkflow

    return [PlanWorkflow, AgentStepWorkflow]


async def test_a_durable_mcp_error_result_fails_the_step_with_the_servers_message(
    mcp_client: Client, task_queue: str, mcp_log: Path
) -> None:
    out, _ = await converse(mcp_client, task_queue, "close issue 7")
    assert out["answer"] == "It is locked."
    [plan] = out["plans"]
    close = next(o for o in plan["ledger"] if o["id"] == "close")
    assert close["status"] == "failed" and LOCKED in close["error"], close
    assert close["attempts"] == 1  # an isError answer is not retried
    assert len(calls(mcp_log, "close_issue", "start")) == 1


async def test_a_durable_agent_step_and_map_body_call_mcp_tools(
    mcp_client: Client, task_queue: str, mcp_log: Path
) -> None:
    out, workflow_id = await converse(mcp_client, task_queue, "label issue 9")
    returned = json.loads(out["answer"])
    assert returned["pick"]["output"] == {"label": "ogre"}
    assert returned["pick"]["tools_called"][0]["tool"] == "github__get_issue"
    assert [r["comments"] for r in returned["each"]["results"]] == [21, 27]
    agent_step = mcp_client.get_workflow_handle(f"{workflow_id}/plan/tooluse_0_0/agent/pick")
    assert ("github-call-tool", "pick/agent.1/github__get_issue") in scheduled(
        await agent_step.fetch_history()
    )


async def test_a_pattern_excludes_an_mcp_tool_from_durable_plans(
    mcp_client: Client, task_queue: str, mcp_log: Path
) -> None:
    out, _ = await converse(
        mcp_client, task_queue, "delete issue 7", plannable=["*", "!github__delete_*"]
    )
    assert out["answer"] == "I will ask first."
    assert not out["plans"]  # rejected before anything ran
    assert not calls(mcp_log, "delete_issue", "start")


async def test_independent_durable_mcp_steps_overlap(
    mcp_client: Client, task_queue: str, mcp_log: Path
) -> None:
    out, workflow_id = await converse(mcp_client, task_queue, "count in parallel")
    assert json.loads(out["answer"]) == {
        "a": {"number": 1, "comments": 3},
        "b": {"number": 2, "comments": 6},
    }
    # Both calls were running on the server at once: each started before the other ended.
    starts = sorted(e["t"] for e in calls(mcp_log, "slow_count", "start"))
    ends = sorted(e["t"] for e in calls(mcp_log, "slow_count", "done"))
    assert len(starts) == 2 and starts[1] < ends[0], (starts, ends)
    # The model was told the MCP tools' plan names in the plan tool's description.
    agent_history = await mcp_client.get_workflow_handle(workflow_id).fetch_history()
    model_input = next(
        e.activity_task_scheduled_event_attributes.input.payloads[0].data.decode()
        for e in agent_history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and e.activity_task_scheduled_event_attributes.activity_type.name.startswith("invoke_model")
    )
    # ("; " between them: a tool's return shape, from its outputSchema, has commas of its own.)
    assert "Tools you can plan: github__add_label; github__close_issue" in model_input
    assert "; github__get_assignee {login: str, open_issues: int}; " in model_input


def test_an_unnamed_mcp_client_is_refused_when_the_plugin_attaches(mcp_log: Path) -> None:
    unnamed = tracker_client()
    try:
        with pytest.raises(ValueError, match=r"has no name.*prefix='github'"):
            Agent(
                model=ScriptedModel(scripts=SCRIPTS),
                tools=[unnamed],
                plugins=[WorkflowPlanPlugin()],
                callback_handler=None,
            )
    finally:
        unnamed.stop(None, None, None)


async def test_a_failed_mcp_call_is_called_again_within_the_steps_retries(
    mcp_client: Client, task_queue: str, mcp_log: Path, tmp_path: Path
) -> None:
    """The server dies mid-call: the call-tool activity completes with a failed-call result
    (not ``isError``), and the plan workflow calls again as ``<step>#2`` on a new connection."""
    with tracker_client() as listing:
        table = mcp_tool_table("github", listing.list_tools_sync(), timeout_s=10, retries=1)
    plan = {
        "steps": [
            {
                "id": "count",
                "tool": "github__flaky_count",
                "args": {"number": 7, "marker": str(tmp_path / "crashed")},
            }
        ]
    }
    async with plan_worker(mcp_client, task_queue=task_queue, registry=LOCAL_TOOLS):
        handle = await start_plan(
            mcp_client,
            plan,
            task_queue=task_queue,
            registry=table,
            retry_initial_interval_s=0.1,
        )
        result = await handle.result()
    assert result.returned == {"count": {"number": 7, "comments": 21}}, result.ledger
    assert result.outcome("count").attempts == 2
    assert [i for t, i in scheduled(await handle.handle.fetch_history())] == ["count", "count#2"]
    assert len(calls(mcp_log, "flaky_count", "start")) == 2


async def test_hostile_mcp_results_end_their_steps_and_never_stick_the_plan(
    mcp_client: Client, task_queue: str, mcp_log: Path
) -> None:
    """A server's text may be JSON nested 5,000 deep, and its structured content deeper than
    a plan may hold: each step ends (kept as text, or failed naming the limit) and the plan
    ends; no workflow task is left failing on a value it cannot read."""
    out, _ = await converse(mcp_client, task_queue, "read deep results")
    assert out["answer"] == "Read."
    [plan] = out["plans"]
    outcome = {o["id"]: o for o in plan["ledger"]}
    limit = "nested more than 100 levels deep"
    text = outcome["text"]
    assert text["status"] == "ok" or limit in text["error"], text["error"]
    assert outcome["record"]["status"] == "failed"
    assert limit in outcome["record"]["error"]


async def test_an_mcp_tool_is_called_no_more_than_its_owner_allows(
    mcp_client: Client, task_queue: str, mcp_log: Path
) -> None:
    """Issue 22 (7): an MCP tool registered with timeout_s=1, retries=0 whose call takes
    1.5 s was called 6 times by one step (spare attempts for lost workers, though nothing
    tells a slow server from a dead worker). Now: retries + 1 calls, here one."""
    with tracker_client() as listing:
        table = mcp_tool_table("github", listing.list_tools_sync(), timeout_s=1, retries=0)
    plan = {
        "steps": [
            {"id": "count", "tool": "github__slow_count", "args": {"number": 7, "seconds": 1.5}}
        ]
    }
    async with plan_worker(mcp_client, task_queue=task_queue, registry=LOCAL_TOOLS):
        handle = await start_plan(
            mcp_client, plan, task_queue=task_queue, registry=table, retry_initial_interval_s=0.1
        )
        result = await handle.result()
        history = await handle.handle.fetch_history()
    outcome = result.outcome("count")
    assert outcome.status == "failed" and "timed out after 1 s" in (outcome.error or "")
    assert [i for _, i in scheduled(history)] == ["count"]
    await asyncio.sleep(1.0)  # the server may log the start of a call after the timeout
    assert len(calls(mcp_log, "slow_count", "start")) == 1
