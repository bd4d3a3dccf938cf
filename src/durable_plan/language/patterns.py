"""Tool-name patterns, as in ``plannable=["*", "!delete_*"]``."""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence


def matches_patterns(name: str, patterns: Sequence[str]) -> bool:
    """Later patterns win; ``!`` excludes; ``*`` wildcards anywhere; ``[]`` matches nothing."""
    allowed = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        body = pattern[1:] if negate else pattern
        if fnmatch.fnmatchcase(name, body):
            allowed = not negate
    return allowed
