"""Encrypted history on a real dev server: what the server stores, rotation, wrong keys, and
the codec server the web UI calls."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import json_format
from google.protobuf.message import Message
from temporalio.api.common.v1 import Payload, Payloads
from temporalio.api.enums.v1 import EventType
from temporalio.api.failure.v1 import Failure
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHistory
from temporalio.exceptions import ApplicationError
from temporalio.worker import Replayer, Worker

from durable_plan import PlanHandle, PlanWorkflow, plan_worker, start_plan
from durable_plan.protect.codec_server import CodecServer
from durable_plan.protect.encryption import (
    ENCODING,
    KEY_ID_KEY,
    KEYS_ENV,
    DecryptionError,
    EncryptionCodec,
    EncryptionPlugin,
    KeyConfigError,
    Keyring,
    encrypted_client,
    is_encrypting,
    new_key,
)
from durable_plan.temporal.activities.tool_activities import registry_activities
from durable_plan.temporal.workflows.agent_workflow import AgentStepWorkflow
from durable_plan.tools.registry import ToolRegistry
from tests.support.helpers import until_phase
from tests.support.warm_python import WarmProcess
from tests.support.worker_processes import warm_python

ARG_SECRET = "acct-7731-ARGSECRET"
RESULT_SECRET = "balance-RESULTSECRET-4410"
FAILURE_SECRET = "locked-FAILSECRET-99"
SECRETS = (ARG_SECRET, RESULT_SECRET, FAILURE_SECRET, ARG_SECRET.upper(), RESULT_SECRET.upper())


async def vault_read(account: str) -> dict[str, Any]:
    return {"account": account, "note": f"{RESULT_SECRET} for {account}"}


async def vault_use(note: str) -> dict[str, Any]:
    return {"used": note.upper()}


async def vault_lock(account: str) -> None:
    raise ApplicationError(f"{FAILURE_SECRET}: {account} is locked", non_retryable=True)


def registry() -> ToolRegistry:
    tools = ToolRegistry()
    tools.add(vault_read)
    tools.add(vault_use)
    tools.add(vault_lock, retries=0)
    return tools


REGISTRY = registry()
PLAN: dict[str, Any] = {
    "steps": [
        {"id": "read", "tool": "vault_read", "args": {"account": ARG_SECRET}},
        {"id": "use", "tool": "vault_use", "bind": {"note": "steps.read.note"}},
        {"id": "lock", "tool": "vault_lock", "bind": {"account": "steps.use.used"}},
    ],
    "returns": ["read", "use"],
}


def keyring(*ids: str) -> Keyring:
    return Keyring(tuple(new_key(key_id) for key_id in ids))


async def run_plan(client: Client, keys: Keyring, task_queue: str) -> tuple[str, Any]:
    """The plan on an encrypting client and worker; its id and result."""
    sealed = encrypted_client(client, keys)
    async with plan_worker(sealed, task_queue=task_queue, registry=REGISTRY, encryption=keys):
        handle = await start_plan(sealed, PLAN, task_queue=task_queue, registry=REGISTRY)
        result = await asyncio.wait_for(handle.result(), 30)
    return handle.id, result


def raw_bytes(history: WorkflowHistory) -> bytes:
    return b"".join(event.SerializeToString() for event in history.events)


def payloads_in(history: WorkflowHistory) -> list[Payload]:
    """Every payload in the history's events (walked generically over the protobufs), except
    search attributes (the server indexes them, so no codec ever touches them) and the SDK's
    own patch markers (``workflow.patched`` ids, written by the SDK's core without the codec)."""
    found: list[Payload] = []

    def walk(message: Any) -> None:
        if isinstance(message, Payload):
            found.append(message)
            return
        for field, value in message.ListFields():
            if field.message_type is None or field.name == "search_attributes":
                continue
            if isinstance(value, Message):
                walk(value)
            else:  # a repeated field or a map of messages
                for item in value.values() if hasattr(value, "values") else value:
                    if isinstance(item, Message):
                        walk(item)

    for event in history.events:
        if event.marker_recorded_event_attributes.marker_name != "core_patch":
            walk(event)
    return found


async def test_history_holds_ciphertext_only_and_the_plan_runs_and_replays(
    client: Client, task_queue: str
) -> None:
    keys = keyring("k1")
    workflow_id, result = await run_plan(client, keys, task_queue)
    assert result.returned["read"]["note"] == f"{RESULT_SECRET} for {ARG_SECRET}"
    assert result.returned["use"]["used"] == f"{RESULT_SECRET} for {ARG_SECRET}".upper()
    [failure] = result.failures
    assert FAILURE_SECRET in failure.error, "the codec-holding client reads the message back"

    # The raw history, fetched with a client that has no codec: no secret anywhere.
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    raw = raw_bytes(history)
    as_json = json.dumps(history.to_json_dict())
    for secret in SECRETS:
        assert secret.encode() not in raw, secret
        assert secret not in as_json, secret
        assert base64.b64encode(secret.encode()).decode()[:12] not in as_json, secret
    payloads = payloads_in(history)
    assert len(payloads) >= 6, "input, summaries, three steps' args and results, the result"
    assert all(p.metadata["encoding"] == ENCODING for p in payloads), [
        dict(p.metadata) for p in payloads if p.metadata["encoding"] != ENCODING
    ]
    assert {p.metadata[KEY_ID_KEY] for p in payloads} == {b"k1"}
    failed = [
        e.activity_task_failed_event_attributes.failure
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED
    ]
    assert failed and all(f.message == "Encoded failure" for f in failed)

    # It replays with the keys, and only with them.
    replayer = Replayer(
        workflows=[PlanWorkflow, AgentStepWorkflow], plugins=[EncryptionPlugin(keys)]
    )
    await replayer.replay_workflow(history)
    without = Replayer(workflows=[PlanWorkflow, AgentStepWorkflow])
    outcome = await without.replay_workflow(history, raise_on_replay_failure=False)
    assert outcome.replay_failure is not None


def key_ids(history: WorkflowHistory) -> set[bytes]:
    return {p.metadata[KEY_ID_KEY] for p in payloads_in(history)}


async def test_a_rotated_keyring_opens_old_payloads_and_seals_with_the_newest_key(
    client: Client, task_queue: str
) -> None:
    old = keyring("2025-01")
    first_id, first = await run_plan(client, old, task_queue)
    rotated = old.with_key(*new_key("2025-06"))
    second_id, second = await run_plan(client, rotated, task_queue)
    assert second.returned == first.returned

    first_history = await client.get_workflow_handle(first_id).fetch_history()
    second_history = await client.get_workflow_handle(second_id).fetch_history()
    assert key_ids(first_history) == {b"2025-01"}
    assert key_ids(second_history) == {b"2025-06"}, "new payloads use the newest key"

    # After the rotation the old plan's result still opens, and its history replays.
    after = encrypted_client(client, rotated)
    reread = await PlanHandle(after.get_workflow_handle(first_id)).result()
    assert reread.returned == first.returned
    replayer = Replayer(
        workflows=[PlanWorkflow, AgentStepWorkflow], plugins=[EncryptionPlugin(rotated)]
    )
    await replayer.replay_workflow(first_history)

    # The old keyring alone cannot open what the new key sealed: a clear error.
    with pytest.raises(DecryptionError, match=r"key id '2025-06'.*holds: 2025-01"):
        await PlanHandle(encrypted_client(client, old).get_workflow_handle(second_id)).result()


async def wait_for_event(
    client: Client, workflow_id: str, event_type: EventType.ValueType, timeout_s: float = 15
) -> Any:
    """The first event of ``event_type`` in the workflow's raw history (polling)."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        history = await client.get_workflow_handle(workflow_id).fetch_history()
        for event in history.events:
            if event.event_type == event_type:
                return event
        assert asyncio.get_running_loop().time() < deadline, f"no {EventType.Name(event_type)}"
        await asyncio.sleep(0.1)


@pytest.mark.parametrize(
    ("worker_keys", "expected"),
    [
        (Keyring((new_key("k1"),)), r"key id 'k1' does not decrypt with this process's key"),
        (Keyring((new_key("k0"),)), r"key id 'k1', which this process's DURABLE_PLAN_KEYS does"),
    ],
    ids=["same-id-other-key", "unknown-id"],
)
async def test_a_worker_with_the_wrong_key_fails_clearly_and_runs_nothing(
    client: Client, task_queue: str, worker_keys: Keyring, expected: str
) -> None:
    starter = encrypted_client(client, keyring("k1"))
    async with plan_worker(
        client, task_queue=task_queue, registry=REGISTRY, encryption=worker_keys
    ):
        handle = await start_plan(starter, PLAN, task_queue=task_queue, registry=REGISTRY)
        try:
            event = await wait_for_event(
                client, handle.id, EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED
            )
            failure = event.workflow_task_failed_event_attributes.failure
            assert re.search(expected, failure.message), failure.message
            history = await handle.handle.fetch_history()
            scheduled = [
                e
                for e in history.events
                if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
            ]
            assert scheduled == [], "no step runs on a plan its worker cannot read"
            description = await handle.handle.describe()
            assert description.status == WorkflowExecutionStatus.RUNNING
        finally:
            await handle.handle.terminate("test over")


async def test_a_step_whose_worker_has_the_wrong_key_fails_with_the_key_error(
    client: Client, task_queue: str
) -> None:
    """Plans on a worker with the right key, tools on one with another: the step fails (its
    input does not open) with the key error readable in the history, nothing runs."""
    right, wrong = keyring("k1"), Keyring((new_key("k1"),))
    tools = ToolRegistry()
    tools.add(vault_read, retries=0)
    starter = encrypted_client(client, right)
    plans_only = Worker(starter, task_queue=task_queue, workflows=[PlanWorkflow, AgentStepWorkflow])
    # Its own connection: one connection refuses two workers on one task queue.
    elsewhere = await Client.connect(
        client.service_client.config.target_host, plugins=[EncryptionPlugin(wrong)]
    )
    tools_only = Worker(elsewhere, task_queue=task_queue, activities=registry_activities(tools))
    plan = {"steps": [PLAN["steps"][0]]}
    async with plans_only, tools_only:
        handle = await start_plan(
            starter, plan, task_queue=task_queue, registry=tools, max_interruptions=0
        )
        result = await asyncio.wait_for(handle.result(), 30)
    [failure] = result.failures
    assert "does not decrypt with this process's key" in failure.error, failure.error
    history = await client.get_workflow_handle(handle.id).fetch_history()
    [failed] = [
        e.activity_task_failed_event_attributes.failure
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED
    ]
    assert failed.message.startswith("Failed decoding arguments: a payload encrypted with key")
    assert "key id 'k1' does not decrypt" in failed.cause.message
    assert RESULT_SECRET.encode() not in raw_bytes(history)


UI = "http://localhost:8233"


@pytest.fixture
def codec_keys() -> Keyring:
    return keyring("ui-1")


@pytest.fixture
def codec_server(codec_keys: Keyring) -> Iterator[CodecServer]:
    with CodecServer(codec_keys, port=0, namespaces={"default"}) as server:
        yield server


def post(
    url: str, body: bytes, *, namespace: str = "default", origin: str = UI
) -> tuple[int, dict[str, str], Any]:
    """POST the way the web UI's browser code does; status, headers and JSON body."""
    request = urllib.request.Request(
        url,
        data=body,
        method="POST",
        headers={"Content-Type": "application/json", "X-Namespace": namespace, "Origin": origin},
    )
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, dict(response.headers), json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), json.loads(error.read())


async def test_the_codec_server_decodes_a_real_history_for_the_web_ui(
    client: Client, task_queue: str, codec_keys: Keyring, codec_server: CodecServer
) -> None:
    workflow_id, _ = await run_plan(client, codec_keys, task_queue)
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    started = history.events[0].workflow_execution_started_event_attributes
    # The UI sends the protobuf JSON of Payloads: base64 metadata values and data.
    body = json_format.MessageToJson(started.input).encode()
    assert json.loads(body)["payloads"][0]["metadata"]["encoding"] == "YmluYXJ5L2VuY3J5cHRlZA=="

    status, headers, answer = await asyncio.to_thread(post, f"{codec_server.url}/decode", body)
    assert status == 200, answer
    assert headers["Access-Control-Allow-Origin"] == UI
    [payload] = answer["payloads"]
    assert base64.b64decode(payload["metadata"]["encoding"]) == b"json/plain"
    plan_input = json.loads(base64.b64decode(payload["data"]))
    assert ARG_SECRET in json.dumps(plan_input)

    # /encode seals what the UI sends (a signal typed in the UI), /decode opens it again.
    plain = json_format.MessageToJson(
        Payloads(
            payloads=[
                Payload(
                    metadata={"encoding": b"json/plain"},
                    data=json.dumps({"note": ARG_SECRET}).encode(),
                )
            ]
        )
    ).encode()
    status, _, sealed = await asyncio.to_thread(post, f"{codec_server.url}/encode", plain)
    assert status == 200
    assert ARG_SECRET not in json.dumps(sealed)
    assert base64.b64decode(sealed["payloads"][0]["metadata"][KEY_ID_KEY]) == b"ui-1"
    status, _, opened = await asyncio.to_thread(
        post, f"{codec_server.url}/decode", json.dumps(sealed).encode()
    )
    assert json.loads(base64.b64decode(opened["payloads"][0]["data"])) == {"note": ARG_SECRET}


def preflight(url: str, origin: str) -> tuple[int, dict[str, str]]:
    import http.client
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=5)
    connection.request(
        "OPTIONS",
        "/decode",
        headers={
            "Origin": origin,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "content-type,x-namespace",
        },
    )
    response = connection.getresponse()
    response.read()
    connection.close()
    return response.status, dict(response.getheaders())


def test_the_codec_server_answers_cors_only_for_the_ui_and_refuses_clearly(
    codec_server: CodecServer,
) -> None:
    status, headers = preflight(codec_server.url, UI)
    assert status == 204
    assert headers["Access-Control-Allow-Origin"] == UI
    assert "x-namespace" in headers["Access-Control-Allow-Headers"]
    assert "POST" in headers["Access-Control-Allow-Methods"]

    status, headers = preflight(codec_server.url, "http://evil.example")
    assert status == 403 and "Access-Control-Allow-Origin" not in headers

    url = f"{codec_server.url}/decode"
    status, _, answer = post(url, b'{"payloads": [{"data": 12}]}')
    assert status == 400 and "payloads" in answer["error"]
    status, _, answer = post(url, b'{"payloads": []}', namespace="other")
    assert status == 403 and "'other'" in answer["error"]
    stranger = EncryptionCodec(keyring("k9")).encode_sync([Payload(data=b'"x"')])
    body = json_format.MessageToJson(Payloads(payloads=stranger)).encode()
    status, _, answer = post(url, body)
    assert status == 422 and "key id 'k9'" in answer["error"], answer


def test_keys_from_the_environment_newest_last_with_clear_errors() -> None:
    old, new = new_key("2025-01"), new_key("2025-06")
    b64 = {key_id: base64.b64encode(key).decode() for key_id, key in (old, new)}
    text = f"2025-01:{b64['2025-01']}, 2025-06:{b64['2025-06']}"
    keys = Keyring.from_env({"DURABLE_PLAN_KEYS": text})
    assert keys.ids == ("2025-01", "2025-06") and keys.newest == new
    assert Keyring.parse(keys.to_text()) == keys
    assert "AAAA" not in repr(keys) and repr(keys) == "Keyring(ids=['2025-01', '2025-06'])"
    problems = {
        "": "encryption needs keys: set DURABLE_PLAN_KEYS",
        "nokey": "entry 1 is not ID:BASE64KEY",
        "a:!!!!": "entry 1 ('a'): the key is not base64",
        "a:" + base64.b64encode(b"short").decode(): "5 bytes, an AES key has 16, 24 or 32",
        f"{text},2025-01:{b64['2025-01']}": "the id is listed twice",
    }
    for value, message in problems.items():
        with pytest.raises(KeyConfigError, match=re.escape(message)):
            Keyring.from_env({"DURABLE_PLAN_KEYS": value})


@pytest.mark.parametrize("encryption_first", [True, False])
async def test_the_strands_plugin_keeps_the_codec_in_either_order(
    client: Client, encryption_first: bool
) -> None:
    """StrandsPlugin rewrites the converter (pydantic, its failure converter): the codec and
    the encoded failure messages survive that, whichever plugin comes first."""
    from temporalio.contrib.pydantic import PydanticPayloadConverter
    from temporalio.strands_agents import StrandsPlugin

    keys = keyring("k1")
    plugins: list[Any] = [StrandsPlugin(), EncryptionPlugin(keys)]
    if encryption_first:
        plugins.reverse()
    both = Client(**{**client.config(), "plugins": plugins})
    assert is_encrypting(both)
    converter = both.config(active_config=True)["data_converter"]
    assert converter.payload_converter_class is PydanticPayloadConverter
    assert "Strands" in converter.failure_converter_class.__name__
    failure = Failure()
    converter.failure_converter.to_failure(
        ApplicationError(f"{ARG_SECRET} is bad"), converter.payload_converter, failure
    )
    assert failure.message == "Encoded failure"
    [sealed] = await converter.encode([{"secret": ARG_SECRET}])
    assert sealed.metadata["encoding"] == ENCODING


# --- the command line, as subprocesses ------------------------------------------------------

ROOT = Path(__file__).resolve().parents[3]
TICKET_TEXT = "charged twice for my subscription"  # read_ticket's result for ticket 7


async def start_cli(*args: str, keys: Keyring | None) -> WarmProcess:
    """``python -m durable_plan ARGS`` in a process of its own whose environment holds the
    keys (or none), forked from the launcher that imported the libraries once."""
    env = {k: v for k, v in os.environ.items() if k != KEYS_ENV}
    if keys is not None:
        env[KEYS_ENV] = keys.to_text()
    launcher = await warm_python()
    return await launcher.spawn("-m", "durable_plan", *args, env=env, cwd=ROOT, stderr="pipe")


async def cli(*args: str, keys: Keyring | None) -> tuple[int, str, str]:
    proc = await start_cli(*args, keys=keys)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    return proc.returncode if proc.returncode is not None else -1, out.decode(), err.decode()


async def test_the_command_line_encrypts_with_the_keys_in_the_environment(
    client: Client, temporal_target: str, task_queue: str, workflow_id: str
) -> None:
    """worker, run --no-worker, show and approve in their own processes, all given the keys
    in $DURABLE_PLAN_KEYS only: the plan runs through an approval, the history is sealed."""
    keys = keyring("cli-1")
    where = ("--address", temporal_target)
    worker = await start_cli(
        "worker", "--tools", "examples.plan_tools", "--task-queue", task_queue, *where, keys=keys
    )
    try:
        assert worker.stdout is not None
        first = await asyncio.wait_for(worker.stdout.readline(), 30)
        assert b"payloads encrypted with key cli-1" in first, first
        run = await start_cli(
            "run", str(ROOT / "examples" / "plans" / "triage.yaml"), "--tools",
            "examples.plan_tools", "--input", "ticket_id=7", "--input", "min_confidence=0.5",
            "--no-worker", "--task-queue", task_queue, "--workflow-id", workflow_id, "-q",
            *where, keys=keys,
        )  # fmt: skip
        await until_phase(
            encrypted_client(client, keys).get_workflow_handle(workflow_id),
            "refund",
            "awaiting_approval",
        )
        code, shown, err = await cli("show", workflow_id, *where, keys=keys)
        assert "awaiting" in shown, (shown, err)
        code, _out, err = await cli("approve", workflow_id, "refund", *where, keys=keys)
        assert code == 0, err
        out_bytes, err_bytes = await asyncio.wait_for(run.communicate(), 60)
        assert run.returncode == 0, err_bytes.decode()
        result = json.loads(out_bytes)
        assert result["returned"]["refund"], result
    finally:
        worker.terminate()
        await worker.wait()

    history = await client.get_workflow_handle(workflow_id).fetch_history()
    assert TICKET_TEXT.encode() not in raw_bytes(history)
    assert key_ids(history) == {b"cli-1"}
    # Without the keys the command says what is missing, in one line.
    code, _out, err = await cli("show", workflow_id, *where, keys=None)
    assert code == 2 and "payloads are encrypted and this process has no keys" in err, err
    assert len(err.strip().splitlines()) == 1, err


async def test_an_agent_step_s_conversation_is_sealed_with_the_strands_plugin(
    temporal_target: str, client: Client, task_queue: str
) -> None:
    """With StrandsPlugin on the client too: the model's inputs (the conversation) and its
    answers are sealed in the agent step's own history, and both histories replay."""
    from temporalio.strands_agents import StrandsPlugin

    from tests.durable.plans.test_agent_steps import REGISTRY as AGENT_TOOLS
    from tests.durable.plans.test_agent_steps import morale_plan, scripted

    keys = keyring("agents-1")
    strands = StrandsPlugin(models={"scripted": scripted})
    sealed = await Client.connect(temporal_target, plugins=[strands, EncryptionPlugin(keys)])
    async with plan_worker(sealed, task_queue=task_queue, registry=AGENT_TOOLS):
        handle = await start_plan(
            sealed, morale_plan(), task_queue=task_queue, registry=AGENT_TOOLS, model="scripted"
        )
        result = await asyncio.wait_for(handle.result(), 60)
    assert result.returned["morale"]["output"]["reason"] == "3 hp and no allies"
    plan = await client.get_workflow_handle(handle.id).fetch_history()
    agent = await client.get_workflow_handle(f"{handle.id}/agent/morale").fetch_history()
    # Both are in plaintext there without the codec (the answer, the rendered prompt).
    for history in (plan, agent):
        raw = raw_bytes(history)
        for plaintext in (b"no allies", b"Morale check for goblin"):
            assert plaintext not in raw
        assert key_ids(history) == {b"agents-1"}
    assert b"toolSpec" not in raw_bytes(agent), "the model request's tool specs are sealed"
    replayer = Replayer(
        workflows=[PlanWorkflow, AgentStepWorkflow],
        plugins=[StrandsPlugin(models={"scripted": scripted}), EncryptionPlugin(keys)],
    )
    for history in (plan, agent):
        await replayer.replay_workflow(history)


async def test_the_readme_example_runs_with_the_keys_from_keygen(temporal_target: str) -> None:
    code, key_line, _ = await cli("keygen", "--id", "readme", keys=None)
    assert code == 0 and key_line.startswith("readme:")
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(ROOT / "examples" / "encrypted_plans.py"),
        cwd=ROOT,
        env={**os.environ, KEYS_ENV: key_line.strip(), "TEMPORAL_ADDRESS": temporal_target},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    lines = out.decode().splitlines()
    assert lines[0] == "durable: {'hp_after': 1, 'defeated': False}", lines
    assert lines[1].startswith(
        "stored input: {'encoding': 'binary/encrypted', 'encryption-cipher': 'AES-GCM', "
        "'encryption-key-id': 'readme'} and "
    ), lines


def test_a_worker_refuses_a_client_whose_codec_a_later_plugin_dropped(
    client: Client, task_queue: str
) -> None:
    """A plugin after EncryptionPlugin that replaces the converter outright would send
    plaintext: the worker refuses to start instead."""
    from temporalio.converter import DataConverter
    from temporalio.plugin import SimplePlugin

    dropper = SimplePlugin("drops-the-codec", data_converter=DataConverter.default)
    both = Client(**{**client.config(), "plugins": [EncryptionPlugin(keyring("k1")), dropper]})
    assert not is_encrypting(both)
    with pytest.raises(KeyConfigError, match="lost its encryption codec"):
        Worker(both, task_queue=task_queue, workflows=[PlanWorkflow])


def test_a_cut_payload_is_a_decryption_error() -> None:
    codec = EncryptionCodec(keyring("k1"))
    (sealed,) = codec.encode_sync([Payload(data=b"secret")])
    sealed.data = sealed.data[:5]
    with pytest.raises(DecryptionError, match="shorter than a nonce and a tag"):
        codec.decode_sync([sealed])
