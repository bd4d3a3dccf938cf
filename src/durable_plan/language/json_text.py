"""Compact JSON text, by one encoder built once.

``json.dumps(value, separators=(",", ":"))`` builds a ``JSONEncoder`` on every call (any
argument but the value does), about a microsecond each: a plan step measured, encoded and
decoded its arguments and reply several times (issue 31). The text is ``json.dumps``'s
with those separators, byte for byte; the encoder holds no state between calls.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

compact_json: Callable[[Any], str] = json.JSONEncoder(separators=(",", ":")).encode
"""``json.dumps(value, separators=(",", ":"))``, without building an encoder per call."""
