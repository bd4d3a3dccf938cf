"""A tool whose TypedDict names a type only imported for type checking (an unresolvable
forward reference at run time), for tests/unit/check/test_return_shapes.py."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypedDict

if TYPE_CHECKING:
    from decimal import Decimal


class Row(TypedDict):
    price: Decimal


def get_row() -> Row:
    """Read a row."""
    return {"price": 1}  # type: ignore[typeddict-item]
