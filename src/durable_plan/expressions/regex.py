"""Regexes in expressions run on RE2: linear time, whatever the pattern or the text.

jsonata-python would compile a plan's ``/pattern/`` with Python's backtracking ``re``,
which holds the interpreter lock for as long as a match takes; every regex a plan
writes is compiled here instead, bounded in length and groups.
"""

from __future__ import annotations

from typing import Any

import re2
from jsonata.regex_engine import RegexFlags

from durable_plan.language.errors import StepError

MAX_REGEX_CHARS = 1_000
MAX_REGEX_GROUPS = 32


class _RegexRefused(ValueError):
    """A regex literal RE2 cannot run; raised while parsing, reported as a syntax error."""


def _re2_engine(pattern: str, flags: RegexFlags) -> Any:
    """JSONata regex literals on RE2: linear time, so no pattern can freeze a worker.

    Python's ``re`` backtracks while holding the GIL: one catastrophic pattern
    stops every thread of a worker, the workflow deadlock detector included.
    """
    prefix = ("i" if flags.case_insensitive else "") + ("m" if flags.multiline else "")
    options = re2.Options()
    options.log_errors = False  # the error is reported to the model, not to stderr
    if len(pattern) > MAX_REGEX_CHARS:
        raise _RegexRefused(
            f"regex /{pattern[:40]}.../ is {len(pattern)} characters; the limit is "
            f"{MAX_REGEX_CHARS}"
        )
    try:
        compiled = re2.compile(f"(?{prefix}){pattern}" if prefix else pattern, options)
    except re2.error as exc:
        reason = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else exc
        raise _RegexRefused(
            f"regex /{pattern}/ cannot be used ({reason}); plans run regexes on RE2, which has "
            "no backreferences or lookaround"
        ) from None
    if compiled.groups > MAX_REGEX_GROUPS:
        # RE2 stays linear, but each capture group multiplies the work per character.
        raise _RegexRefused(
            f"regex /{pattern[:40]}/ has {compiled.groups} capture groups; the limit is "
            f"{MAX_REGEX_GROUPS} (use (?:...) for groups you do not need)"
        )
    return compiled


def _refuse(name: str, reason: str) -> Any:
    def refuse(*_args: Any) -> Any:
        raise StepError(f"${name}() is not allowed in plans: {reason}")

    return refuse
