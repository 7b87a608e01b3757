"""Keep the webhook's certificate bundle in one Secret so that every replica serves the same pair.

Replicas race only on first start: each generates a bundle and tries to create the Secret; the API server
accepts exactly one create, and the losers read and adopt the winner's bundle. Renewals replace the Secret
with its resourceVersion, so two replicas renewing at once again leave one winner.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kuota.certs.authority import CertificateBundle
from kuota.certs.errors import CertificateStoreError
from kuota.kube.client import ApiResponse, KubeApi
from kuota.kube.errors import AlreadyExistsError, ApiResponseError, ApiUnreachableError, ConflictError, NotFoundError

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

    @property
    def collection_path(self) -> str:
        return f"/api/v1/namespaces/{self.namespace}/secrets"

    @property
    def path(self) -> str:
        return f"{self.collection_path}/{self.name}"


def _decode(location: SecretLocation, secret: Mapping[str, Any]) -> StoredBundle:
    data = secret.get("data") or {}
    missing = sorted(key for key in _KEYS if key not in data)
    if missing:
        raise CertificateStoreError(
            f"{location} lacks data keys {missing}: delete it so kuota can generate a fresh bundle"
        )
    try:
        fields = {attribute: base64.b64decode(data[key], validate=True) for key, attribute in _KEYS.items()}
    except (ValueError, TypeError) as error:
        raise CertificateStoreError(f"{location} holds data that is not base64: {error}") from error
    return StoredBundle(bundle=CertificateBundle(**fields), resource_version=_resource_version(location, secret))


def _resource_version(location: SecretLocation, secret: Mapping[str, Any]) -> str:
    version = (secret.get("metadata") or {}).get("resourceVersion")
    if not isinstance(version, str) or not version:
        raise CertificateStoreError(f"the API server returned {location} without metadata.resourceVersion")
    return version


def _encode(bundle: CertificateBundle) -> dict[str, str]:
    return {key: base64.b64encode(getattr(bundle, attribute)).decode() for key, attribute in _KEYS.items()}


def _secret_body(location: SecretLocation, bundle: CertificateBundle, resource_version: str | None) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "name": location.name,
        "namespace": location.namespace,
        "labels": {"app.kubernetes.io/name": "kuota", "app.kubernetes.io/component": "webhook-certificates"},
    }
    if resource_version is not None:
        metadata["resourceVersion"] = resource_version
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": metadata,
        "type": "kubernetes.io/tls",
        "data": _encode(bundle),
    }


_DOING = {"GET": "read", "POST": "create", "PUT": "replace"}


async def _send(
    api: KubeApi, location: SecretLocation, method: str, *, request_timeout: float, body: Any = None
) -> ApiResponse:
    path = location.collection_path if method == "POST" else location.path
    try:
        return await api.request(method, path, body=body, client_timeout=request_timeout)
    except ApiUnreachableError as error:
        raise CertificateStoreError(f"cannot {_DOING[method]} {location}: {error}") from error


def _secret(location: SecretLocation, response: ApiResponse) -> dict[str, Any]:
    try:
        return response.object()
    except ApiResponseError as error:
        raise CertificateStoreError(f"cannot {_DOING[response.method]} {location}: {error}") from error


def _failure(location: SecretLocation, method: str, refusal: ApiResponseError) -> CertificateStoreError:
    return CertificateStoreError(f"cannot {_DOING[method]} {location}: HTTP {refusal.status}: {refusal.detail}")


async def read_bundle(api: KubeApi, location: SecretLocation, request_timeout: float) -> StoredBundle | None:
    """The stored bundle, or None when the Secret does not exist."""
    response = await _send(api, location, "GET", request_timeout=request_timeout)
    if not response.ok:
        refusal = response.error()
        if isinstance(refusal, NotFoundError):
            return None
        raise _failure(location, "GET", refusal)
    return _decode(location, _secret(location, response))


async def load_or_create(
    api: KubeApi, location: SecretLocation, make_bundle: Callable[[], CertificateBundle], request_timeout: float
) -> StoredBundle:
    """The stored bundle; else ``make_bundle()``, stored; or the bundle a faster replica stored."""
    stored = await read_bundle(api, location, request_timeout)
    if stored is not None:
        return stored
    bundle = make_bundle()
    body = _secret_body(location, bundle, None)
    response = await _send(api, location, "POST", request_timeout=request_timeout, body=body)
    if not response.ok:
        refusal = response.error()
        if not isinstance(refusal, AlreadyExistsError):
            raise _failure(location, "POST", refusal)
        winner = await read_bundle(api, location, request_timeout)
        if winner is None:
            raise CertificateStoreError(
                f"{location} was reported as existing, then not found: is something deleting it?"
            )
        return winner
    return StoredBundle(bundle=bundle, resource_version=_resource_version(location, _secret(location, response)))


async def replace_bundle(
    api: KubeApi,
    location: SecretLocation,
    current: StoredBundle,
    renewed: CertificateBundle,
    request_timeout: float,
) -> StoredBundle:
    """Store ``renewed`` over ``current``; if another replica renewed first, adopt its bundle instead."""
    body = _secret_body(location, renewed, current.resource_version)
    response = await _send(api, location, "PUT", request_timeout=request_timeout, body=body)
    if not response.ok:
        refusal = response.error()
        winner = await read_bundle(api, location, request_timeout) if isinstance(refusal, ConflictError) else None
        if winner is None:
            raise _failure(location, "PUT", refusal)
        return winner
    return StoredBundle(bundle=renewed, resource_version=_resource_version(location, _secret(location, response)))
