"""Keep the webhook's certificate bundle in one Secret so that every replica serves the same pair.

Replicas race only on first start: each generates a bundle and tries to create the Secret; the API server
accepts exactly one create, and the losers read and adopt the winner's bundle. Renewals replace the Secret
with its resourceVersion, so two replicas renewing at once again leave one winner.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from certs.authority import CertificateBundle
from certs.errors import CertificateStoreError

CONFLICT = 409
NOT_FOUND = 404
ALREADY_EXISTS = 409

_KEYS = {"ca.crt": "ca_cert_pem", "ca.key": "ca_key_pem", "tls.crt": "cert_pem", "tls.key": "key_pem"}


@dataclass(frozen=True)
class StoredBundle:
    bundle: CertificateBundle
    resource_version: str


@dataclass(frozen=True)
class SecretLocation:
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"Secret {self.namespace}/{self.name}"


def _decode(location: SecretLocation, secret: Any) -> StoredBundle:
    data: dict[str, str] = secret.data or {}
    missing = sorted(key for key in _KEYS if key not in data)
    if missing:
        raise CertificateStoreError(
            f"{location} lacks data keys {missing}: delete it so kuota can generate a fresh bundle"
        )
    try:
        fields = {attribute: base64.b64decode(data[key], validate=True) for key, attribute in _KEYS.items()}
    except ValueError as error:
        raise CertificateStoreError(f"{location} holds data that is not base64: {error}") from error
    return StoredBundle(bundle=CertificateBundle(**fields), resource_version=secret.metadata.resource_version)


def _encode(bundle: CertificateBundle) -> dict[str, str]:
    return {key: base64.b64encode(getattr(bundle, attribute)).decode() for key, attribute in _KEYS.items()}


def _secret_body(location: SecretLocation, bundle: CertificateBundle, resource_version: str | None) -> Any:
    return client.V1Secret(
        metadata=client.V1ObjectMeta(
            name=location.name,
            namespace=location.namespace,
            resource_version=resource_version,
            labels={"app.kubernetes.io/name": "kuota", "app.kubernetes.io/component": "webhook-certificates"},
        ),
        type="kubernetes.io/tls",
        data=_encode(bundle),
    )


async def read_bundle(core: Any, location: SecretLocation, request_timeout: float) -> StoredBundle | None:
    """The stored bundle, or None when the Secret does not exist."""
    try:
        secret = await core.read_namespaced_secret(location.name, location.namespace, _request_timeout=request_timeout)
    except ApiException as error:
        if error.status == NOT_FOUND:
            return None
        raise CertificateStoreError(f"cannot read {location}: HTTP {error.status} {error.reason}") from error
    return _decode(location, secret)


async def load_or_create(
    core: Any, location: SecretLocation, make_bundle: Callable[[], CertificateBundle], request_timeout: float
) -> StoredBundle:
    """The stored bundle; else ``make_bundle()``, stored; or the bundle a faster replica stored."""
    stored = await read_bundle(core, location, request_timeout)
    if stored is not None:
        return stored
    bundle = make_bundle()
    try:
        created = await core.create_namespaced_secret(
            location.namespace, _secret_body(location, bundle, None), _request_timeout=request_timeout
        )
    except ApiException as error:
        if error.status != ALREADY_EXISTS:
            raise CertificateStoreError(f"cannot create {location}: HTTP {error.status} {error.reason}") from error
        winner = await read_bundle(core, location, request_timeout)
        if winner is None:
            raise CertificateStoreError(
                f"{location} was reported as existing, then not found: is something deleting it?"
            ) from error
        return winner
    return StoredBundle(bundle=bundle, resource_version=created.metadata.resource_version)


async def replace_bundle(
    core: Any,
    location: SecretLocation,
    current: StoredBundle,
    renewed: CertificateBundle,
    request_timeout: float,
) -> StoredBundle:
    """Store ``renewed`` over ``current``; if another replica renewed first, adopt its bundle instead."""
    try:
        replaced = await core.replace_namespaced_secret(
            location.name,
            location.namespace,
            _secret_body(location, renewed, current.resource_version),
            _request_timeout=request_timeout,
        )
    except ApiException as error:
        if error.status == CONFLICT:
            winner = await read_bundle(core, location, request_timeout)
            if winner is not None:
                return winner
        raise CertificateStoreError(f"cannot replace {location}: HTTP {error.status} {error.reason}") from error
    return StoredBundle(bundle=renewed, resource_version=replaced.metadata.resource_version)
