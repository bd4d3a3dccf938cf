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

The parts live in their own modules, one job each: ``keys`` (the keyring), ``codec`` (the
payload codec), ``converter`` (the data converter) and ``encryption_plugin`` (the client
plugin). This module is the import path the rest of durable-plan, the README and users have
always used.
"""

from durable_plan.protect.codec import CIPHER as CIPHER
from durable_plan.protect.codec import CIPHER_KEY as CIPHER_KEY
from durable_plan.protect.codec import (
    ENCODING,
    KEY_ID_KEY,
    DecryptionError,
    EncryptionCodec,
    is_sealed,
    missing_keys_message,
)
from durable_plan.protect.codec import NONCE_BYTES as NONCE_BYTES
from durable_plan.protect.codec import TAG_BYTES as TAG_BYTES
from durable_plan.protect.converter import EncryptedDataConverter, codec_of, encrypted_converter
from durable_plan.protect.encryption_plugin import EncryptionPlugin, encrypted_client, is_encrypting
from durable_plan.protect.keys import KEY_SIZES as KEY_SIZES
from durable_plan.protect.keys import (
    KEYS_ENV,
    KeyConfigError,
    Keyring,
    keyring_for,
    new_key,
)
from durable_plan.protect.keys import MAX_KEYS as MAX_KEYS
from durable_plan.protect.keys import EncryptionError as EncryptionError

# The names imported ``as`` themselves are importable from here as before, but stay out of
# ``__all__`` (so ``import *`` is unchanged).
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
