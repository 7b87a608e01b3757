"""caBundle injection: every webhook gets the CA; a 409 from a concurrent writer is retried, not overwritten."""

from __future__ import annotations

import base64
from types import SimpleNamespace
from typing import Any

import pytest
from kubernetes_asyncio.client.exceptions import ApiException

from certs.ca_bundle_injection import WebhookConfigurations, inject_ca_bundle
from certs.errors import CaBundleInjectionError


class FakeAdmissionApi:
    """Holds one mutating configuration; the first ``conflicts`` replaces fail with 409 as a racing writer's would."""

    def __init__(self, conflicts: int) -> None:
        self.conflicts = conflicts
        self.stored: Any = None
        self.replaces = 0

    async def read_mutating_webhook_configuration(self, name: str, **options: Any) -> Any:
        assert options["_request_timeout"] == 5
        del name
        return SimpleNamespace(
            webhooks=[SimpleNamespace(client_config=SimpleNamespace(ca_bundle=None)) for _ in range(2)]
        )

    async def replace_mutating_webhook_configuration(self, name: str, body: Any, **options: Any) -> Any:
        del name, options
        self.replaces += 1
        if self.conflicts:
            self.conflicts -= 1
            raise ApiException(status=409, reason="Conflict")
        self.stored = body
        return body


async def test_every_webhook_gets_the_ca_after_conflicts_are_retried() -> None:
    api = FakeAdmissionApi(conflicts=2)
    changed = await inject_ca_bundle(api, WebhookConfigurations(mutating=("kuota",)), b"PEM", request_timeout=5)
    assert changed == 1
    assert api.replaces == 3
    encoded = base64.b64encode(b"PEM").decode()
    assert [webhook.client_config.ca_bundle for webhook in api.stored.webhooks] == [encoded, encoded]


async def test_endless_conflicts_raise_a_named_error() -> None:
    api = FakeAdmissionApi(conflicts=100)
    with pytest.raises(CaBundleInjectionError, match="MutatingWebhookConfiguration kuota kept conflicting"):
        await inject_ca_bundle(api, WebhookConfigurations(mutating=("kuota",)), b"PEM", request_timeout=5, attempts=3)
