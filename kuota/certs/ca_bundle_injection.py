"""Put the CA into the ``caBundle`` of every webhook in kuota's Mutating/ValidatingWebhookConfigurations, of
the conversion webhook of kuota's CustomResourceDefinitions, and of kuota's APIServices (the visibility API).

A read-modify-replace with the object's resourceVersion: a concurrent writer (another replica, Helm) makes
the replace fail with 409, and the loop re-reads and tries again instead of overwriting their change.
"""

from __future__ import annotations

import asyncio
import base64
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kuota.certs.errors import CaBundleInjectionError
from kuota.kube.client import ApiResponse, KubeApi
from kuota.kube.errors import ApiResponseError, ApiUnreachableError, ConflictError

_API = "/apis/admissionregistration.k8s.io/v1"
_CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
_API_SERVICES = "/apis/apiregistration.k8s.io/v1/apiservices"


@dataclass(frozen=True)
class WebhookConfigurations:
    """Names of the cluster-scoped webhook configurations kuota owns, of the CRDs its webhook converts, and of the
    APIServices it serves."""

    mutating: tuple[str, ...] = ()
    validating: tuple[str, ...] = ()
    conversion: tuple[str, ...] = ()
    api_services: tuple[str, ...] = ()


async def inject_ca_bundle(
    api: KubeApi,
    configurations: WebhookConfigurations,
    ca_bundle_pem: bytes,
    request_timeout: float,
    attempts: int = 8,
) -> int:
    """Set ``caBundle`` on every webhook of every named configuration, on the conversion webhook of every
    named CRD (one without a conversion webhook has none to set) and on every named APIService's spec; returns
    how many objects changed."""
    encoded = base64.b64encode(ca_bundle_pem).decode()
    targets = [
        _Target(api, f"{kind}WebhookConfiguration {name}", f"{_API}/{kind.lower()}webhookconfigurations/{name}", _hooks)
        for kind, names in (("Mutating", configurations.mutating), ("Validating", configurations.validating))
        for name in names
    ]
    targets += [
        _Target(api, f"CustomResourceDefinition {name}", f"{_CRDS}/{name}", _conversion_hook)
        for name in configurations.conversion
    ]
    targets += [
        _Target(api, f"APIService {name}", f"{_API_SERVICES}/{name}", _api_service)
        for name in configurations.api_services
    ]
    changed = 0
    for target in targets:
        changed += await target.inject(encoded, attempts, request_timeout)
    return changed


ClientConfigs = Callable[[dict[str, Any]], list[dict[str, Any]]]


def _hooks(configuration: dict[str, Any]) -> list[dict[str, Any]]:
    return [webhook.setdefault("clientConfig", {}) for webhook in configuration.get("webhooks") or []]


def _conversion_hook(crd: dict[str, Any]) -> list[dict[str, Any]]:
    conversion = (crd.get("spec") or {}).get("conversion") or {}
    if conversion.get("strategy") != "Webhook":
        return []
    return [conversion.setdefault("webhook", {}).setdefault("clientConfig", {})]


def _api_service(api_service: dict[str, Any]) -> list[dict[str, Any]]:
    return [api_service.setdefault("spec", {})]


@dataclass(frozen=True)
class _Target:
    api: KubeApi
    what: str
    path: str
    client_configs: ClientConfigs

    async def inject(self, encoded: str, attempts: int, request_timeout: float) -> int:
        for attempt in range(attempts):
            read = await self._send("GET", request_timeout)
            if not read.ok:
                raise CaBundleInjectionError(
                    f"cannot read {self.what}: HTTP {read.status}: {read.message()}; create it (the Helm chart "
                    "does) or remove it from the manager's webhook configuration list"
                )
            configuration = self._object(read)
            client_configs = self.client_configs(configuration)
            if all(client_config.get("caBundle") == encoded for client_config in client_configs):
                return 0
            for client_config in client_configs:
                client_config["caBundle"] = encoded
            # The body keeps the resourceVersion just read: a concurrent writer's change makes this a 409.
            replaced = await self._send("PUT", request_timeout, configuration)
            if replaced.ok:
                return 1
            if not isinstance(replaced.error(), ConflictError):
                raise CaBundleInjectionError(
                    f"cannot update caBundle of {self.what}: HTTP {replaced.status}: {replaced.message()}"
                )
            # Spread retries so replicas that collided do not collide again in lockstep.
            await asyncio.sleep(random.uniform(0, 0.05 * 2**attempt))
        raise CaBundleInjectionError(
            f"caBundle of {self.what} kept conflicting after {attempts} attempts; retrying later"
        )

    async def _send(self, method: str, request_timeout: float, body: Any = None) -> ApiResponse:
        try:
            return await self.api.request(method, self.path, body=body, client_timeout=request_timeout)
        except ApiUnreachableError as error:
            raise CaBundleInjectionError(f"cannot update caBundle of {self.what}: {error}") from error

    def _object(self, response: ApiResponse) -> dict[str, Any]:
        try:
            return response.object()
        except ApiResponseError as error:
            raise CaBundleInjectionError(f"cannot read {self.what}: {error}") from error
