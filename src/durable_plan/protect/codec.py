"""The payload codec: AES-GCM over each whole payload, under the keyring's newest key.

Kept apart from the converter and the plugin because the codec server (``codec_server.py``)
and the sealed result store use the codec alone, without a data converter or a client. What a sealed
payload looks like on the wire (its encoding, key id and cipher metadata) is defined here and
nowhere else, as is the one error for a payload these keys cannot open.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from temporalio.api.common.v1 import Payload
from temporalio.converter import PayloadCodec

from durable_plan.protect.keys import KEYS_ENV, EncryptionError, Keyring

__all__ = [
    "CIPHER",
    "CIPHER_KEY",
    "ENCODING",
    "KEY_ID_KEY",
    "NONCE_BYTES",
    "TAG_BYTES",
    "DecryptionError",
    "EncryptionCodec",
    "is_sealed",
    "missing_keys_message",
]

ENCODING = b"binary/encrypted"
"""The ``encoding`` metadata of a sealed payload (the name Temporal's samples use)."""
KEY_ID_KEY = "encryption-key-id"
CIPHER_KEY = "encryption-cipher"
CIPHER = b"AES-GCM"
TAG_BYTES = 16
"""AES-GCM's authentication tag, after the ciphertext."""
NONCE_BYTES = 12


class DecryptionError(EncryptionError):
    """A sealed payload cannot be opened with the keys this process has."""


class EncryptionCodec(PayloadCodec):
    """Seals each payload whole (metadata and data) with the keyring's newest key.

    The sealed payload's data is nonce + AES-GCM(serialized payload), with the key id as
    associated data, so a payload relabelled with another key id does not open. Payloads
    without the ``binary/encrypted`` encoding pass through on decode: histories written
    before encryption was turned on stay readable.
    """

    def __init__(self, keyring: Keyring) -> None:
        super().__init__()
        self.keyring = keyring
        self._ciphers = {key_id: AESGCM(key) for key_id, key in keyring.keys}

    def __repr__(self) -> str:
        return f"EncryptionCodec({self.keyring!r})"

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return self.encode_sync(payloads)

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return self.decode_sync(payloads)

    def encode_sync(self, payloads: Iterable[Payload]) -> list[Payload]:
        """`encode` without the event loop (the codec server's threads use it)."""
        key_id = self.keyring.newest[0]
        cipher = self._ciphers[key_id]
        aad = key_id.encode()
        sealed = []
        for payload in payloads:
            nonce = os.urandom(NONCE_BYTES)
            sealed.append(
                Payload(
                    metadata={"encoding": ENCODING, KEY_ID_KEY: aad, CIPHER_KEY: CIPHER},
                    data=nonce + cipher.encrypt(nonce, payload.SerializeToString(), aad),
                )
            )
        return sealed

    def decode_sync(self, payloads: Iterable[Payload]) -> list[Payload]:
        """`decode` without the event loop; `DecryptionError` for a payload it cannot open."""
        return [self._open(payload) if is_sealed(payload) else payload for payload in payloads]

    def _open(self, payload: Payload) -> Payload:
        key_id = payload.metadata.get(KEY_ID_KEY, b"").decode("utf-8", "replace")
        cipher = self._ciphers.get(key_id)
        held = ", ".join(self.keyring.ids)
        if cipher is None:
            raise DecryptionError(
                f"a payload is encrypted with key id {key_id!r}, which this process's "
                f"{KEYS_ENV} does not hold (it holds: {held}): add that key (keep old keys "
                "after a rotation, newest last)"
            )
        cipher_name = payload.metadata.get(CIPHER_KEY, CIPHER)
        if cipher_name != CIPHER:
            raise DecryptionError(
                f"a payload is encrypted with cipher {cipher_name.decode('utf-8', 'replace')!r}"
                f", this version of durable-plan opens only {CIPHER.decode()}"
            )
        data = payload.data
        if len(data) < NONCE_BYTES + TAG_BYTES:
            raise DecryptionError(
                f"a payload sealed with key id {key_id!r} is {len(data)} bytes, shorter than "
                "a nonce and a tag: it was cut or altered"
            )
        try:
            plain = cipher.decrypt(data[:NONCE_BYTES], data[NONCE_BYTES:], key_id.encode())
        except InvalidTag:
            raise DecryptionError(
                f"a payload encrypted with key id {key_id!r} does not decrypt with this "
                f"process's key of that id: {KEYS_ENV} holds a different key under the same "
                "id (each id must always name the same key), or the payload was altered"
            ) from None
        return Payload.FromString(plain)


def is_sealed(payload: Payload) -> bool:
    """Whether ``payload`` is one `EncryptionCodec` sealed (by its encoding metadata)."""
    return payload.metadata.get("encoding") == ENCODING


def missing_keys_message(exc: BaseException) -> str | None:
    """One line for an error that comes from reading sealed payloads without the keys
    (Temporal's converter says only "Unknown payload encoding binary/encrypted") or with the
    wrong ones (`DecryptionError`), found anywhere in ``exc``'s chain; None for other errors."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, DecryptionError):
            return str(current)
        if ENCODING.decode() in str(current) and "Unknown payload encoding" in str(current):
            return (
                "the workflow's payloads are encrypted and this process has no keys: set "
                f"{KEYS_ENV} to the keys its workers use (or pass --encrypt)"
            )
        current = current.__cause__ or current.__context__
    return None
