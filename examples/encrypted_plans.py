"""Encrypted history: the plan runs as before, the server stores only ciphertext.

export DURABLE_PLAN_KEYS="$(.venv/bin/durable-plan keygen)"
.venv/bin/durable-plan dev                      # terminal 1 (or TEMPORAL_ADDRESS=host:port)
.venv/bin/python examples/encrypted_plans.py
"""

from monster_tools import ATTACK_PLAN, TOOLS

from durable_plan import EncryptionPlugin, Keyring, connect, plan_worker, run_script, start_plan


async def main() -> None:
    keys = Keyring.from_env()  # $DURABLE_PLAN_KEYS: id:base64key,... newest last
    # Every client that starts plans or reads their results carries the keys...
    client = await connect(plugins=[EncryptionPlugin(keys)])
    # ...and so does every worker: `encryption=` on a plain client does the same.
    async with plan_worker(client, task_queue="examples", registry=TOOLS):
        handle = await start_plan(client, ATTACK_PLAN, task_queue="examples", registry=TOOLS)
        result = await handle.result()
        print("durable:", result.returned["damage"])

    # What the server holds: the same workflow read without the keys.
    plain = await connect()
    history = await plain.get_workflow_handle(handle.id).fetch_history()
    started = history.events[0].workflow_execution_started_event_attributes.input.payloads[0]
    metadata = {key: value.decode() for key, value in sorted(started.metadata.items())}
    print("stored input:", metadata, f"and {len(started.data)} bytes of ciphertext")


if __name__ == "__main__":
    run_script(main())  # asyncio.run, then exit without waiting on the SDK's threads
