"""The data converter that seals: the codec added after any other, and failures encoded.

Apart from the codec because this is where Temporal's converter machinery is bent: the codec
chained after one already there (which keeps seeing its own payloads), failure messages moved
into sealed attributes (except the key errors, which must stay readable), and a converter
class that stays encrypting when another plugin rewrites it with ``dataclasses.replace``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from temporalio.api.common.v1 import Payload
from temporalio.api.failure.v1 import Failure
from temporalio.converter import (
    DataConverter,
    DefaultFailureConverter,
    FailureConverter,
    PayloadCodec,
    PayloadConverter,
)

from durable_plan.protect.codec import EncryptionCodec
from durable_plan.protect.keys import EncryptionError, Keyring

__all__ = ["EncryptedDataConverter", "codec_of", "encrypted_converter"]


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
