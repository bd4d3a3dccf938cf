"""Counting the tokens a model is sent, offline.

Claude's tokenizer is not public and ``tiktoken`` downloads its BPE files on first
use (no network here), so the counter of choice is ``bpe-openai`` (the ``bench``
extra): a real BPE tokenizer whose wheel bundles its vocabularies, used with
``o200k_base`` (GPT-4o's encoding). Without it the count falls back to characters / 4.
Either is an estimate for another provider's model; a live run also reports the
provider's own count. Every table says which counter it used.
"""

from __future__ import annotations

import importlib
import importlib.metadata
from dataclasses import dataclass
from typing import Any, Literal, Protocol

TokenizerChoice = Literal["auto", "o200k", "chars"]


class TokenCounter(Protocol):
    """Counts the tokens of a text; ``name`` says how, for the table."""

    @property
    def name(self) -> str: ...

    def count(self, text: str) -> int: ...


@dataclass(frozen=True)
class CharsOver4:
    """No tokenizer: characters / 4, rounded up (the usual rule of thumb for English)."""

    @property
    def name(self) -> str:
        return "characters / 4 (no tokenizer installed: pip install -e '.[bench]')"

    def count(self, text: str) -> int:
        return (len(text) + 3) // 4


class O200k:
    """``o200k_base`` from ``bpe-openai``; its vocabulary ships in the wheel."""

    def __init__(self, module: Any) -> None:
        self._encoding = module.get_encoding("o200k_base")
        self._version = importlib.metadata.version("bpe-openai")

    @property
    def name(self) -> str:
        return (
            f"o200k_base tokens (bpe-openai {self._version}, GPT-4o's encoding; "
            "Claude's tokenizer is not public)"
        )

    def count(self, text: str) -> int:
        # encode_ordinary: text that happens to look like a special token is plain text here.
        return len(self._encoding.encode_ordinary(text))


def token_counter(choice: TokenizerChoice = "auto") -> TokenCounter:
    """The counter for ``choice``; ``auto`` is o200k when installed, else characters / 4."""
    if choice == "chars":
        return CharsOver4()
    try:
        module = importlib.import_module("bpe_openai")
    except ImportError:
        if choice == "o200k":
            raise SystemExit(
                "--tokens o200k needs the bpe-openai package: pip install -e '.[bench]'"
            ) from None
        return CharsOver4()
    return O200k(module)
