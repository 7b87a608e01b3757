"""Put the CA into the ``caBundle`` of every webhook in kuota's Mutating/ValidatingWebhookConfigurations.

A read-modify-replace with the object's resourceVersion: a concurrent writer (another replica, Helm) makes
the replace fail with 409, and the loop re-reads and tries again instead of overwriting their change.
"""

from __future__ import annotations

import asyncio
import base64
import random
from dataclasses import dataclass
from typing import Any

from kuota.certs.errors import CaBundleInjectionError
from kuota.kube.client import ApiResponse, KubeApi
from kuota.kube.errors import ApiResponseError, ApiUnreachableError, ConflictError

_API = "/apis/admissionregistration.k8s.io/v1"


@dataclass(frozen=True)
class WebhookConfigurations:
    """Names of the cluster-scoped webhook configurations kuota owns."""

    mutating: tuple[str, ...] = ()
    validating: tuple[str, ...] = ()


async def inject_ca_bundle(
    api: KubeApi,
    configurations: WebhookConfigurations,
    ca_bundle_pem: bytes,
    request_timeout: float,
    attempts: int = 8,
) -> int:
    """Set ``caBundle`` on every webhook of every named configuration; returns how many objects changed."""
    encoded = base64.b64encode(ca_bundle_pem).decode()
    targets = [("Mutating", name) for name in configurations.mutating]
    targets += [("Validating", name) for name in configurations.validating]
    changed = 0
    for kind, name in targets:
        target = _Target(
            api, f"{kind}WebhookConfiguration {name}", f"{_API}/{kind.lower()}webhookconfigurations/{name}"
        )
        changed += await target.inject(encoded, attempts, request_timeout)
    return changed


@dataclass(frozen=True)
class _Target:
    api: KubeApi
    what: str
    path: str

    async def inject(self, encoded: str, attempts: int, request_timeout: float) -> int:
        for attempt in range(attempts):
            read = await self._send("GET", request_timeout)
            if not read.ok:
                raise CaBundleInjectionError(
                    f"cannot read {self.what}: HTTP {read.status}: {read.message()}; create it (the Helm chart "
                    "does) or remove it from the manager's webhook configuration list"
                )
            configuration = self._object(read)
            webhooks = configuration.get("webhooks") or []
            if all((webhook.get("clientConfig") or {}).get("caBundle") == encoded for webhook in webhooks):
                return 0
            for webhook in webhooks:
                webhook.setdefault("clientConfig", {})["caBundle"] = encoded
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
