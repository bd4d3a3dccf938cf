"""Compact JSON text, by encoders built once.

``json.dumps(value, separators=(",", ":"))`` builds a ``JSONEncoder`` on every call, and
even a ``JSONEncoder`` kept for reuse builds its C encoder again on every ``encode``
(``iterencode`` makes one per call, with a fresh dict for its circular-reference check):
a plan step encodes its arguments, its request, its reply and two or three events, and
those constructions were a third of what each encoding cost (issue 31). The encoders
here are CPython's C encoder, made once with the settings ``json.dumps`` passes it; the
text is ``json.dumps``'s, byte for byte. They keep no state between calls.

What they leave out is the circular-reference check: every value encoded here is a JSON
tree (decoded JSON, results made plain by ``as_json``, the package's own messages), and a
cycle would still fail, as ``RecursionError`` instead of ``ValueError``. Where the C
encoder is missing (another Python implementation), ``json.JSONEncoder.encode`` is used.
"""

from __future__ import annotations

import json
import json.encoder
from collections.abc import Callable
from typing import Any


def _encoder(*, sort_keys: bool, default: Callable[[Any], Any] | None) -> Callable[[Any], str]:
    reference = json.JSONEncoder(separators=(",", ":"), sort_keys=sort_keys, default=default)
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return reference.encode
    # The arguments JSONEncoder.iterencode passes (markers None: no circular check).
    encode_c = make(
        None,
        reference.default,
        json.encoder.encode_basestring_ascii,
        None,
        reference.key_separator,
        reference.item_separator,
        sort_keys,
        False,
        True,
    )

    def encode(value: Any) -> str:
        return "".join(encode_c(value, 0))

    return encode


compact_json: Callable[[Any], str] = _encoder(sort_keys=False, default=None)
"""``json.dumps(value, separators=(",", ":"))``."""

sorted_json: Callable[[Any], str] = _encoder(sort_keys=True, default=str)
"""``json.dumps(value, separators=(",", ":"), sort_keys=True, default=str)``: one text per
value whatever its keys' order (a cache key; the workflow stream's events, the JSON
converter's form), and anything not JSON written as its ``str`` rather than refused."""
