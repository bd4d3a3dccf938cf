"""The keys that seal payloads: a keyring read from ``$DURABLE_PLAN_KEYS``, new keys, and the
errors every encryption module raises.

Apart from the codec so that checking, making and parsing keys (``durable-plan keygen``, the
``--encrypt`` option) needs neither ``cryptography`` nor Temporal: a key mistake is reported
before anything slow is imported. The key id travels in each sealed payload, so the rules on
ids (unique, never naming two keys) live here with the keyring that enforces them.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = [
    "KEYS_ENV",
    "KEY_SIZES",
    "MAX_KEYS",
    "EncryptionError",
    "KeyConfigError",
    "Keyring",
    "keyring_for",
    "new_key",
]

KEYS_ENV = "DURABLE_PLAN_KEYS"
"""``id:base64key`` entries separated by commas (or whitespace), newest last."""
KEY_SIZES = (16, 24, 32)
"""AES-128, -192 and -256; `new_key` makes 32-byte (AES-256) keys."""
MAX_KEYS = 64
_KEY_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


class EncryptionError(ValueError):
    """Base of the encryption errors; the message is one line with the fix."""


class KeyConfigError(EncryptionError):
    """The keys given (``$DURABLE_PLAN_KEYS``) cannot be used."""


@dataclass(frozen=True)
class Keyring:
    """Named AES keys, oldest first. The last one seals; every one opens its own payloads.

    ``repr`` shows the ids only, never key material.
    """

    keys: tuple[tuple[str, bytes], ...]

    def __post_init__(self) -> None:
        if not self.keys:
            raise KeyConfigError(f"no encryption keys: set {KEYS_ENV}=id:BASE64 (see keygen)")
        if len(self.keys) > MAX_KEYS:
            raise KeyConfigError(
                f"{len(self.keys)} encryption keys, at most {MAX_KEYS}: drop keys no kept "
                "history still needs"
            )
        seen: set[str] = set()
        for position, (key_id, key) in enumerate(self.keys, 1):
            if not _KEY_ID.fullmatch(key_id):
                # Not quoted: an entry written KEY:ID would print the key.
                raise KeyConfigError(
                    f"key {position}: a key id is 1-64 letters, digits, '.', '_' or '-', starting "
                    "with a letter or digit"
                )
            where = f"key {position} ({key_id!r})"
            if key_id in seen:
                raise KeyConfigError(
                    f"{where}: the id is listed twice; each key needs its own id, or old "
                    "payloads would be opened with the wrong key"
                )
            seen.add(key_id)
            if len(key) not in KEY_SIZES:
                raise KeyConfigError(
                    f"{where}: {len(key)} bytes, an AES key has 16, 24 or 32; make one with "
                    "`durable-plan keygen`"
                )

    def __repr__(self) -> str:
        return f"Keyring(ids={list(self.ids)!r})"

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(key_id for key_id, _ in self.keys)

    @property
    def newest(self) -> tuple[str, bytes]:
        """The key that seals new payloads: the last one listed."""
        return self.keys[-1]

    def key(self, key_id: str) -> bytes | None:
        for known, key in self.keys:
            if known == key_id:
                return key
        return None

    def with_key(self, key_id: str, key: bytes) -> Keyring:
        """This keyring with ``key`` appended as the newest."""
        return Keyring((*self.keys, (key_id, key)))

    @classmethod
    def parse(cls, text: str, *, source: str = KEYS_ENV) -> Keyring:
        """``id:base64key`` entries separated by commas or whitespace, newest last."""
        entries = [entry for entry in re.split(r"[,\s]+", text) if entry]
        keys: list[tuple[str, bytes]] = []
        for position, entry in enumerate(entries, 1):
            key_id, sep, encoded = entry.partition(":")
            if not sep or not key_id or not encoded:
                raise KeyConfigError(
                    f"{source}: entry {position} is not ID:BASE64KEY (entries are separated "
                    "by commas, newest last); make one with `durable-plan keygen`"
                )
            where = f"{source}: entry {position}" + (
                f" ({key_id!r})" if _KEY_ID.fullmatch(key_id) else ""
            )
            keys.append((key_id, _decode_key(encoded, where)))
        try:
            return cls(tuple(keys))
        except KeyConfigError as exc:
            raise KeyConfigError(f"{source}: {exc}") from None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Keyring:
        """The keys in ``$DURABLE_PLAN_KEYS``; `KeyConfigError` if it is unset or invalid."""
        text = (os.environ if environ is None else environ).get(KEYS_ENV, "")
        if not text.strip():
            raise KeyConfigError(
                f"encryption needs keys: set {KEYS_ENV}=ID:BASE64KEY (newest last); "
                f'`durable-plan keygen` makes one: export {KEYS_ENV}="$(durable-plan keygen)"'
            )
        return cls.parse(text)

    def to_text(self) -> str:
        """The ``$DURABLE_PLAN_KEYS`` value for this keyring."""
        return ",".join(f"{key_id}:{_encode_key(key)}" for key_id, key in self.keys)


def new_key(key_id: str) -> tuple[str, bytes]:
    """A fresh random AES-256 key under ``key_id`` (checked like any configured id)."""
    pair = (key_id, secrets.token_bytes(32))
    Keyring((pair,))
    return pair


def _encode_key(key: bytes) -> str:
    return base64.b64encode(key).decode("ascii")


def _decode_key(encoded: str, where: str) -> bytes:
    padded = encoded + "=" * (-len(encoded) % 4)
    try:
        standard = padded.translate(str.maketrans("-_", "+/"))  # URL-safe alphabet too
        return base64.b64decode(standard, validate=True)
    except (binascii.Error, ValueError):
        raise KeyConfigError(f"{where}: the key is not base64") from None


def keyring_for(encrypt: bool | None, environ: Mapping[str, str] | None = None) -> Keyring | None:
    """The keys an ``--encrypt`` / ``--no-encrypt`` option asks for: True needs
    ``$DURABLE_PLAN_KEYS`` (`KeyConfigError` without it), False none, and unset (None) the
    keys if the variable is set. Defaulting to on when keys are configured means a process
    that was given the keys cannot forget the flag and write plaintext; decoding passes
    plaintext through, so such a process still reads histories from before encryption."""
    if encrypt is False:
        return None
    text = (os.environ if environ is None else environ).get(KEYS_ENV, "")
    if encrypt is None and not text.strip():
        return None
    return Keyring.from_env(environ)
