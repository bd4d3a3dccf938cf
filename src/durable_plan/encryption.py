"""Moved to ``durable_plan.protect.encryption``; this import path keeps working (the README and
``examples/`` use it)."""

from durable_plan.protect.encryption import (
    ENCODING as ENCODING,
)
from durable_plan.protect.encryption import (
    KEY_ID_KEY as KEY_ID_KEY,
)
from durable_plan.protect.encryption import (
    KEYS_ENV as KEYS_ENV,
)
from durable_plan.protect.encryption import (
    DecryptionError as DecryptionError,
)
from durable_plan.protect.encryption import (
    EncryptedDataConverter as EncryptedDataConverter,
)
from durable_plan.protect.encryption import (
    EncryptionCodec as EncryptionCodec,
)
from durable_plan.protect.encryption import (
    EncryptionPlugin as EncryptionPlugin,
)
from durable_plan.protect.encryption import (
    KeyConfigError as KeyConfigError,
)
from durable_plan.protect.encryption import (
    Keyring as Keyring,
)
from durable_plan.protect.encryption import (
    codec_of as codec_of,
)
from durable_plan.protect.encryption import (
    encrypted_client as encrypted_client,
)
from durable_plan.protect.encryption import (
    encrypted_converter as encrypted_converter,
)
from durable_plan.protect.encryption import (
    is_encrypting as is_encrypting,
)
from durable_plan.protect.encryption import (
    is_sealed as is_sealed,
)
from durable_plan.protect.encryption import (
    keyring_for as keyring_for,
)
from durable_plan.protect.encryption import (
    missing_keys_message as missing_keys_message,
)
from durable_plan.protect.encryption import (
    new_key as new_key,
)
