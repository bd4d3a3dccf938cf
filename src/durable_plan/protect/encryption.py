"""Encrypt what lands in Temporal's history: a payload codec (AES-GCM) with rotating keys.

Everything a plan touches is a Temporal payload: the plan, every argument, every result, the
summaries the web UI shows, the memory a repair plan reads. Without a codec the server stores
them in plaintext. With `EncryptionCodec` on the client's data converter every payload is
sealed with AES-GCM before it leaves the process and opened when it comes back, so the
server (and whoever reads its database or backups) sees only ciphertext, a key id and the
names Temporal itself needs (workflow and activity types, ids, task queues).

Keys come from the environment, ``DURABLE_PLAN_KEYS="id1:BASE64,id2:BASE64"`` with the
newest last: the newest key seals new payloads, every listed key still opens the payloads
sealed with it, so a key rotates by appending a new one (``durable-plan keygen --rotate``)
and is dropped only once no history still holding it is kept. Each sealed payload names
its key id in its metadata; a payload sealed under an id the keyring lacks, or that does
not authenticate under the key of that id, raises `DecryptionError` saying which id and
what to do. It is never passed on as garbage: AES-GCM authenticates every payload.

Failures are covered too: with the codec the failure converter moves each failure's
message and stack trace into its encoded attributes (Temporal's
``encode_common_attributes``), which the codec seals, because an error message often
quotes the argument that caused it. Search attributes are never encoded by Temporal (the
server indexes them); durable-plan sets none.

Wiring it is one thing everywhere: `EncryptionPlugin(keyring)` on ``Client.connect`` (or
``Replayer``), ``plan_worker(..., encryption=keyring)``, ``--encrypt`` on the command line
and the demo scripts. The converter it installs stays encrypting when another plugin (such
as Strands' ``StrandsPlugin``) later rewrites the converter with ``dataclasses.replace``.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import os
import re
import secrets
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from temporalio.api.common.v1 import Payload
from temporalio.api.failure.v1 import Failure
from temporalio.converter import (
    DataConverter,
    DefaultFailureConverter,
    FailureConverter,
    PayloadCodec,
    PayloadConverter,
)
from temporalio.plugin import SimplePlugin

if TYPE_CHECKING:
    from temporalio.client import Client
    from temporalio.worker import WorkerConfig

__all__ = [
    "ENCODING",
    "KEYS_ENV",
    "KEY_ID_KEY",
    "DecryptionError",
    "EncryptedDataConverter",
    "EncryptionCodec",
    "EncryptionPlugin",
    "KeyConfigError",
    "Keyring",
    "codec_of",
    "encrypted_client",
    "encrypted_converter",
    "is_encrypting",
    "is_sealed",
    "keyring_for",
    "missing_keys_message",
    "new_key",
]

KEYS_ENV = "DURABLE_PLAN_KEYS"
"""``id:base64key`` entries separated by commas (or whitespace), newest last."""
ENCODING = b"binary/encrypted"
"""The ``encoding`` metadata of a sealed payload (the name Temporal's samples use)."""
KEY_ID_KEY = "encryption-key-id"
CIPHER_KEY = "encryption-cipher"
CIPHER = b"AES-GCM"
TAG_BYTES = 16
"""AES-GCM's authentication tag, after the ciphertext."""
NONCE_BYTES = 12
KEY_SIZES = (16, 24, 32)
"""AES-128, -192 and -256; `new_key` makes 32-byte (AES-256) keys."""
MAX_KEYS = 64
_KEY_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


class EncryptionError(ValueError):
    """Base of the encryption errors; the message is one line with the fix."""


class KeyConfigError(EncryptionError):
    """The keys given (``$DURABLE_PLAN_KEYS``) cannot be used."""


class DecryptionError(EncryptionError):
    """A sealed payload cannot be opened with the keys this process has."""


# --- keys ----------------------------------------------------------------------------------


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


# --- the codec -----------------------------------------------------------------------------


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


class _Chain(PayloadCodec):
    """Another codec (compression, say) first, then encryption: encrypted bytes do not
    compress, and the other codec keeps seeing the payloads it wrote."""

    def __init__(self, inner: PayloadCodec, encryption: EncryptionCodec) -> None:
        super().__init__()
        self.inner = inner
        self.encryption = encryption

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return await self.encryption.encode(await self.inner.encode(payloads))

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return await self.inner.decode(await self.encryption.decode(payloads))


def _with_encryption(existing: PayloadCodec | None, codec: EncryptionCodec) -> PayloadCodec:
    if existing is None or isinstance(existing, EncryptionCodec):
        return codec
    if isinstance(existing, _Chain):
        return _Chain(existing.inner, codec)
    return _Chain(existing, codec)


def codec_of(converter: DataConverter) -> EncryptionCodec | None:
    """The `EncryptionCodec` in ``converter``, if it has one."""
    codec = converter.payload_codec
    if isinstance(codec, _Chain):
        codec = codec.encryption
    return codec if isinstance(codec, EncryptionCodec) else None


# --- the converter -------------------------------------------------------------------------


class _EncodingFailureConverter(DefaultFailureConverter):
    """Temporal's failure converter with ``encode_common_attributes`` on: a failure's message
    and stack trace move into a payload the codec seals, since an error message often quotes
    the argument that caused it.

    Except for durable-plan's own key errors and the SDK's wrappers of them ("Failed decoding
    arguments"): a worker whose keys are wrong would report its `DecryptionError` sealed with
    those wrong keys, which nobody with the right ones could read, and the worker that reads
    the failure would fail in turn, blaming its own keys. These messages hold key ids and
    setting names only, so they stay readable.
    """

    def __init__(self) -> None:
        super().__init__(encode_common_attributes=True)

    def to_failure(
        self, exception: BaseException, payload_converter: PayloadConverter, failure: Failure
    ) -> None:
        super().to_failure(exception, payload_converter, failure)
        if isinstance(exception, EncryptionError):
            failure.ClearField("encoded_attributes")
            failure.message = str(exception)
        elif isinstance(exception.__cause__, EncryptionError) and (
            str(exception) in _SDK_DECODE_WRAPPERS
        ):
            # The plan's step shows only this top message: say why, not just "Failed ...".
            failure.ClearField("encoded_attributes")
            failure.message = f"{exception}: {exception.__cause__}"


_SDK_DECODE_WRAPPERS = frozenset({"Failed decoding arguments", "Failed decoding heartbeat details"})


_ENCODING_FAILURE_CLASSES: dict[type[FailureConverter], type[FailureConverter]] = {}


def _encoding_attributes(cls: type[FailureConverter]) -> type[FailureConverter]:
    """``cls`` with `_EncodingFailureConverter`'s behaviour mixed in. A converter not derived
    from Temporal's default, or with a constructor of its own, is kept as it is: it decides
    itself what a failure's plaintext holds."""
    if issubclass(cls, _EncodingFailureConverter) or not issubclass(cls, DefaultFailureConverter):
        return cls
    if cls is DefaultFailureConverter:
        return _EncodingFailureConverter
    if cls.__init__ is not DefaultFailureConverter.__init__:
        return cls
    made = _ENCODING_FAILURE_CLASSES.get(cls)
    if made is None:
        made = type(
            f"{cls.__name__}WithEncodedAttributes",
            (_EncodingFailureConverter, cls),
            {"__module__": __name__},
        )
        _ENCODING_FAILURE_CLASSES[cls] = made
    return made


@dataclass(frozen=True)
class EncryptedDataConverter(DataConverter):
    """A `DataConverter` that stays encrypting when rewritten with ``dataclasses.replace``.

    Plugins adjust the client's converter by replacing fields (Strands' ``StrandsPlugin``
    swaps in its payload and failure converters); ``replace`` keeps this class, so this
    ``__post_init__`` runs again and turns the new failure converter's encoded attributes
    on as well. The codec field survives a ``replace`` by itself.
    """

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "failure_converter_class", _encoding_attributes(self.failure_converter_class)
        )
        super().__post_init__()


def encrypted_converter(
    keyring: Keyring, converter: DataConverter | None = None
) -> EncryptedDataConverter:
    """``converter`` (default: Temporal's default) with the keyring's codec added after any
    codec it has, and failure messages encoded."""
    base = converter or DataConverter.default
    fields = {f.name: getattr(base, f.name) for f in dataclasses.fields(DataConverter) if f.init}
    fields["payload_codec"] = _with_encryption(base.payload_codec, EncryptionCodec(keyring))
    return EncryptedDataConverter(**fields)


def is_encrypting(client: Client) -> bool:
    """Whether ``client`` (after its plugins ran) seals payloads with an `EncryptionCodec`."""
    converter = client.config(active_config=True)["data_converter"]
    return codec_of(converter) is not None


class EncryptionPlugin(SimplePlugin):
    """Adds encryption to a client's (or a replayer's) data converter.

    ``Client.connect(..., plugins=[StrandsPlugin(...), EncryptionPlugin(keyring)])``; the
    order does not matter. A worker built on such a client checks that no later plugin
    replaced the converter with an unencrypted one, and refuses to start if one did.
    """

    def __init__(self, keyring: Keyring) -> None:
        self.keyring = keyring
        super().__init__("durable_plan.EncryptionPlugin", data_converter=self._converter)

    def _converter(self, existing: DataConverter | None) -> DataConverter:
        return encrypted_converter(self.keyring, existing)

    def configure_worker(self, config: WorkerConfig) -> WorkerConfig:
        config = super().configure_worker(config)
        client = config.get("client")
        if client is not None and not is_encrypting(client):
            raise KeyConfigError(
                "the client's data converter lost its encryption codec after "
                "EncryptionPlugin (another plugin replaced the converter): list "
                "EncryptionPlugin last in Client.connect(plugins=...)"
            )
        return config


def encrypted_client(client: Client, keyring: Keyring) -> Client:
    """``client`` sealing with ``keyring``: itself if it already does, else a new client on
    the same connection with `EncryptionPlugin` added after its plugins."""
    from temporalio.client import Client

    current = codec_of(client.config(active_config=True)["data_converter"])
    if current is not None and current.keyring == keyring:
        return client
    config = client.config()
    plugins = [p for p in config["plugins"] if not isinstance(p, EncryptionPlugin)]
    config["plugins"] = [*plugins, EncryptionPlugin(keyring)]
    return Client(**config)


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
