"""A result store whose objects are sealed with the payload keys.

With encryption on, history holds ciphertext only; a large result passed by reference must
not then sit in the store in plaintext. ``SealedResultStore`` wraps any ``ResultStore`` and
seals each object the way ``EncryptionCodec`` seals a payload (AES-GCM, the newest key, its
id recorded), so rotation works the same way and a wrong key is the same clear error.
Objects written before encryption was turned on (no seal marker) are read as they are.
"""

from __future__ import annotations

from google.protobuf.message import DecodeError
from temporalio.api.common.v1 import Payload

from durable_plan.protect.encryption import DecryptionError, EncryptionCodec, Keyring, is_sealed
from durable_plan.protect.result_store import ResultStore, StoredResultUnreadable

__all__ = ["SEAL_MARKER", "SealedResultStore"]

SEAL_MARKER = b"durable-plan sealed v1\n"
"""Starts every sealed object: tells a sealed object from a plaintext one written earlier."""


class SealedResultStore:
    """``store`` with every object sealed on ``put`` and opened on ``get``."""

    def __init__(self, store: ResultStore, keyring: Keyring) -> None:
        self.inner = store
        self._codec = EncryptionCodec(keyring)

    def __repr__(self) -> str:
        return f"SealedResultStore({self.inner!r}, {self._codec.keyring!r})"

    def put(self, key: str, data: bytes) -> None:
        (sealed,) = self._codec.encode_sync([Payload(data=data)])
        self.inner.put(key, SEAL_MARKER + sealed.SerializeToString())

    def get(self, key: str) -> bytes:
        """The object's plaintext; ``StoredResultUnreadable`` if these keys do not open it."""
        raw = self.inner.get(key)
        if not raw.startswith(SEAL_MARKER):
            return raw
        try:
            sealed = Payload.FromString(raw[len(SEAL_MARKER) :])
        except DecodeError:
            return raw  # damaged: the reader's size and sha256 check reports it
        if not is_sealed(sealed):
            return raw
        try:
            (opened,) = self._codec.decode_sync([sealed])
        except DecryptionError as exc:
            raise StoredResultUnreadable(f"{self.inner.where(key)}: {exc}") from None
        return bytes(opened.data)

    def delete_prefix(self, prefix: str) -> int:
        return self.inner.delete_prefix(prefix)

    def where(self, key: str) -> str:
        return self.inner.where(key)
