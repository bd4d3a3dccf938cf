"""External Storage's S3 driver: the SDK's ``S3StorageDriver`` over boto3, under a prefix.

Apart from the configuration (``payload_storage.py``) because it is one driver among
others (``payload_file_driver.py``), and the only code here that reaches boto: a payload
that is gone or altered becomes a ``MissingStoredPayload`` (the workflow fails, naming it)
while the network's and the credentials' errors stay retryable.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from temporalio.api.common.v1 import Payload
from temporalio.contrib.aws.s3driver import S3StorageDriver, S3StorageDriverClient
from temporalio.converter import StorageDriver, StorageDriverClaim, StorageDriverRetrieveContext

from durable_plan.protect.payload_errors import SAME_STORE_FIX, MissingStoredPayload


class Boto3S3Client(S3StorageDriverClient):
    """The SDK S3 driver's client over boto3 (no aioboto3 dependency): each call in a
    thread."""

    def __init__(self, client: Any = None) -> None:
        import boto3  # type: ignore[import-untyped]

        self._client = client if client is not None else boto3.client("s3")

    async def put_object(self, *, bucket: str, key: str, data: bytes) -> None:
        await asyncio.to_thread(self._client.put_object, Bucket=bucket, Key=key, Body=data)

    async def object_exists(self, *, bucket: str, key: str) -> bool:
        """Always False, so the driver writes the object again even when it is there: a
        plan started again with the same id and input reuses its key, and a lifecycle rule
        expires by the object's last write. Skipped, the rule could expire the new run's
        input the day after it started."""
        return False

    async def get_object(self, *, bucket: str, key: str) -> bytes:
        from botocore.exceptions import ClientError  # type: ignore[import-untyped]

        try:
            response = await asyncio.to_thread(self._client.get_object, Bucket=bucket, Key=key)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
                raise NoSuchObject(f"s3://{bucket}/{key}") from None
            raise
        body: bytes = await asyncio.to_thread(response["Body"].read)
        return body

    def describe(self) -> Mapping[str, str]:
        region = getattr(getattr(self._client, "meta", None), "region_name", None)
        return {"region": region} if region else {}


class NoSuchObject(LookupError):
    """The bucket has no object under the key (`Boto3S3Client.get_object`)."""


class _S3Driver(S3StorageDriver):
    """The SDK's driver, with an object that is gone or altered a `MissingStoredPayload`
    (the workflow fails, naming it), not a ``RuntimeError`` that fails the workflow task
    again and again. Other errors (the network, credentials) stay retryable."""

    async def retrieve(
        self, context: StorageDriverRetrieveContext, claims: Sequence[StorageDriverClaim]
    ) -> list[Payload]:
        try:
            return await super().retrieve(context, claims)
        except RuntimeError as exc:
            if not isinstance(exc.__cause__, NoSuchObject):
                raise
            raise MissingStoredPayload(
                f"the stored payload {exc.__cause__} is not there (expired by a lifecycle rule "
                f"or deleted, or this worker uses another store): {SAME_STORE_FIX}, and start "
                "the plan again"
            ) from None
        except ValueError as exc:  # the driver's integrity checks
            raise MissingStoredPayload(f"{exc}: start the plan again") from None


def s3_driver(bucket: str, prefix: str = "", client: Any = None) -> StorageDriver:
    """The SDK's ``S3StorageDriver`` over boto3; ``prefix`` is put before its keys."""
    inner: S3StorageDriverClient = Boto3S3Client(client)
    if prefix:
        inner = _Prefixed(inner, prefix.strip("/") + "/")
    return _S3Driver(inner, bucket)


class _Prefixed(S3StorageDriverClient):
    """Keys under a prefix of the bucket (``s3://bucket/prefix``)."""

    def __init__(self, inner: S3StorageDriverClient, prefix: str) -> None:
        self._inner = inner
        self._prefix = prefix

    async def put_object(self, *, bucket: str, key: str, data: bytes) -> None:
        await self._inner.put_object(bucket=bucket, key=self._prefix + key, data=data)

    async def object_exists(self, *, bucket: str, key: str) -> bool:
        return await self._inner.object_exists(bucket=bucket, key=self._prefix + key)

    async def get_object(self, *, bucket: str, key: str) -> bytes:
        return await self._inner.get_object(bucket=bucket, key=self._prefix + key)

    def describe(self) -> Mapping[str, str]:
        return dict(self._inner.describe())
