"""Every release's corpus of histories replays on the current code.

``tests/histories/<version>/`` holds what a released version recorded
(``python -m scripts.record_histories`` in a checkout of it): every kind of step and
ending, conversations with and without the owner's hooks, an encrypted plan (with a test
key kept beside it), a worker killed mid-step. A plan of that version may be in flight
when a user upgrades; if its history does not replay here, the upgrade would fail it
with a nondeterminism error. A failure names the workflow, the history file and the
first event that diverges.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory
from temporalio.strands_agents import StrandsPlugin

from durable_plan.protect.encryption import EncryptionPlugin, Keyring
from durable_plan.temporal.replay import replay
from tests.corpus.workflows import CorpusConversation

CORPORA = Path(__file__).parent / "histories"
VERSIONS = sorted(p.name for p in CORPORA.iterdir() if (p / "manifest.json").is_file())


def corpus(version: str) -> tuple[dict[str, dict[str, object]], Path]:
    root = CORPORA / version
    manifest = json.loads((root / "manifest.json").read_text())
    return manifest["histories"], root


@pytest.mark.parametrize("version", VERSIONS)
async def test_every_history_of_the_corpus_replays(version: str) -> None:
    entries, root = corpus(version)
    keys = Keyring.parse((root / "keys.txt").read_text().strip(), source="keys.txt")
    failures: list[str] = []
    for sealed in (False, True):
        histories = [
            (f"{version}/{name}.json", _load(root, name, entry))
            for name, entry in sorted(entries.items())
            if bool(entry.get("encrypted")) is sealed
        ]
        plugins: list[object] = [StrandsPlugin(models={})]
        if sealed:
            plugins.append(EncryptionPlugin(keys))
        for outcome in await replay(histories, workflows=[CorpusConversation], plugins=plugins):
            if not outcome.ok:
                failures.append(outcome.line())
    assert not failures, "histories that no longer replay:\n" + "\n".join(failures)


def test_the_corpus_has_every_kind_of_history() -> None:
    """What a release must record (a new kind of step adds its own history)."""
    wanted = {
        "plan_chain", "plan_local", "plan_branch_join", "plan_map_reduce", "plan_exit",
        "plan_failed", "plan_stored", "plan_agent_step", "plan_approved", "plan_rejected",
        "plan_cancelled", "plan_mcp", "conversation_plain", "conversation_hooks",
        "conversation_reuse", "plan_encrypted", "plan_worker_killed",
    }  # fmt: skip
    for version in VERSIONS:
        entries, _ = corpus(version)
        assert wanted <= set(entries), (version, sorted(wanted - set(entries)))


def _load(root: Path, name: str, entry: dict[str, object]) -> WorkflowHistory:
    return WorkflowHistory.from_json(str(entry["workflow_id"]), (root / f"{name}.json").read_text())
