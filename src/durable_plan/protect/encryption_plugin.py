"""Encryption on a Temporal client: the plugin, and the checks that a client really seals.

Apart from the converter because this part knows about clients and workers (Temporal's
plugin interface), which the codec server and the stores never load.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from temporalio.converter import DataConverter
from temporalio.plugin import SimplePlugin

from durable_plan.protect.converter import codec_of, encrypted_converter
from durable_plan.protect.keys import KeyConfigError, Keyring

if TYPE_CHECKING:
    from temporalio.client import Client
    from temporalio.worker import WorkerConfig

__all__ = ["EncryptionPlugin", "encrypted_client", "is_encrypting"]


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
