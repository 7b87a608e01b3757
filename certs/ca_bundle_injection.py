"""Put the CA into the ``caBundle`` of every webhook in kuota's Mutating/ValidatingWebhookConfigurations.

A read-modify-replace with the object's resourceVersion: a concurrent writer (another replica, Helm) makes
the replace fail with 409, and the loop re-reads and tries again instead of overwriting their change.
"""

from __future__ import annotations

import asyncio
import base64
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from kubernetes_asyncio.client.exceptions import ApiException

from certs.errors import CaBundleInjectionError

CONFLICT = 409


@dataclass(frozen=True)
class WebhookConfigurations:
    """Names of the cluster-scoped webhook configurations kuota owns."""

    mutating: tuple[str, ...] = ()
    validating: tuple[str, ...] = ()


async def inject_ca_bundle(
    admission_api: Any,
    configurations: WebhookConfigurations,
    ca_bundle_pem: bytes,
    request_timeout: float,
    attempts: int = 8,
) -> int:
    """Set ``caBundle`` on every webhook of every named configuration; returns how many objects changed."""
    encoded = base64.b64encode(ca_bundle_pem).decode()
    targets = [("mutating", name) for name in configurations.mutating]
    targets += [("validating", name) for name in configurations.validating]
    changed = 0
    for kind, name in targets:
        changed += await _inject_one(
            f"{kind.capitalize()}WebhookConfiguration {name}",
            read=partial(getattr(admission_api, f"read_{kind}_webhook_configuration"), name),
            replace=partial(getattr(admission_api, f"replace_{kind}_webhook_configuration"), name),
            encoded=encoded,
            attempts=attempts,
            request_timeout=request_timeout,
        )
    return changed


async def _inject_one(
    what: str,
    *,
    read: Callable[..., Awaitable[Any]],
    replace: Callable[..., Awaitable[Any]],
    encoded: str,
    attempts: int,
    request_timeout: float,
) -> int:
    for attempt in range(attempts):
        try:
            configuration = await read(_request_timeout=request_timeout)
        except ApiException as error:
            raise CaBundleInjectionError(
                f"cannot read {what}: HTTP {error.status} {error.reason}; create it (the Helm chart does) "
                "or remove it from the manager's webhook configuration list"
            ) from error
        webhooks = configuration.webhooks or []
        if all(webhook.client_config.ca_bundle == encoded for webhook in webhooks):
            return 0
        for webhook in webhooks:
            webhook.client_config.ca_bundle = encoded
        try:
            await replace(configuration, _request_timeout=request_timeout)
        except ApiException as error:
            if error.status != CONFLICT:
                raise CaBundleInjectionError(
                    f"cannot update caBundle of {what}: HTTP {error.status} {error.reason}"
                ) from error
            # Spread retries so replicas that collided do not collide again in lockstep.
            await asyncio.sleep(random.uniform(0, 0.05 * 2**attempt))
            continue
        return 1
    raise CaBundleInjectionError(f"caBundle of {what} kept conflicting after {attempts} attempts; retrying later")
