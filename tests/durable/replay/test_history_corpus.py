"""Every corpus of histories replays on the current code, in this process and in another.

A corpus holds every kind of step and ending, conversations with and without the owner's
hooks, an encrypted plan (with a test key kept beside it), a worker killed mid-step
(``python -m scripts.record_histories``). The tests record this version's corpus in another
process under another hash seed (``tests/corpus/recorded.py``), and replay it here and
with ``durable-plan replay`` in a third process under a third seed: a workflow that derived
a command from process state (a set's order, a fact of the worker) diverges. Each published
release's corpus (``tests/histories/<version>/``, none yet) replays too: a plan of that
version may be in flight when a user upgrades. A failure names the workflow, the history
file and the first event that diverges.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory
from temporalio.strands_agents import StrandsPlugin

from durable_plan.protect.encryption import EncryptionPlugin, Keyring
from durable_plan.temporal.client.replay import replay
from tests.corpus.recorded import RECORD_SEED, ROOT, entries, record_corpus, released_corpora
from tests.corpus.workflows import CorpusConversation

USER_WORKFLOWS = ("--workflows", "tests.corpus.workflows")
REPLAY_SEED = "2"
assert REPLAY_SEED != RECORD_SEED


@pytest.fixture(scope="module")
def corpora(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return [record_corpus(tmp_path_factory.getbasetemp()), *released_corpora()]


async def test_every_history_of_the_corpus_replays(corpora: list[Path]) -> None:
    failures: list[str] = []
    for root in corpora:
        keys = Keyring.parse((root / "keys.txt").read_text().strip(), source="keys.txt")
        for sealed in (False, True):
            histories = [
                (f"{root.name}/{name}.json", _load(root, name, entry))
                for name, entry in sorted(entries(root).items())
                if bool(entry.get("encrypted")) is sealed
            ]
            plugins: list[object] = [StrandsPlugin(models={})]
            if sealed:
                plugins.append(EncryptionPlugin(keys))
            outcomes = await replay(histories, workflows=[CorpusConversation], plugins=plugins)
            failures += [outcome.line() for outcome in outcomes if not outcome.ok]
    assert not failures, "histories that no longer replay:\n" + "\n".join(failures)


def test_the_corpus_replays_in_another_process_under_another_hash_seed(
    corpora: list[Path],
) -> None:
    """``durable-plan replay``, as a user runs it before deploying, in a process whose
    ``PYTHONHASHSEED`` is neither the recorder's nor this one's."""
    for root in corpora:
        keys = (root / "keys.txt").read_text().strip()
        done = subprocess.run(
            [sys.executable, "-m", "durable_plan", "replay", str(root), *USER_WORKFLOWS],
            cwd=ROOT,
            env={**os.environ, "PYTHONHASHSEED": REPLAY_SEED, "DURABLE_PLAN_KEYS": keys},
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        lines = done.stdout.splitlines()
        assert len(lines) == len(entries(root)), done.stdout
        assert all(line.startswith("ok ") for line in lines), done.stdout


def test_the_corpus_has_every_kind_of_history(corpora: list[Path]) -> None:
    """What a corpus must hold (a new kind of step adds its own history)."""
    wanted = {
        "plan_chain", "plan_local", "plan_branch_join", "plan_map_reduce", "plan_exit",
        "plan_failed", "plan_stored", "plan_agent_step", "plan_approved", "plan_rejected",
        "plan_cancelled", "plan_mcp", "conversation_plain", "conversation_hooks",
        "conversation_reuse", "plan_encrypted", "plan_worker_killed",
    }  # fmt: skip
    for root in corpora:
        assert wanted <= set(entries(root)), (root.name, sorted(wanted - set(entries(root))))


def _load(root: Path, name: str, entry: dict[str, object]) -> WorkflowHistory:
    return WorkflowHistory.from_json(str(entry["workflow_id"]), (root / f"{name}.json").read_text())
