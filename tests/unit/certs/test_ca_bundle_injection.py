"""caBundle injection: every webhook gets the CA; a 409 from a concurrent writer is retried, not overwritten."""

from __future__ import annotations

import base64
import ssl
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from kuota.certs.ca_bundle_injection import WebhookConfigurations, inject_ca_bundle
from kuota.certs.errors import CaBundleInjectionError
from kuota.kube.client import KubeApi
from kuota.kube.credentials import ApiServerAccess

PATH = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/kuota"


class AdmissionApi:
    """Serves one MutatingWebhookConfiguration; the first ``conflicts`` replaces get 409, as a racing writer's would."""

    def __init__(self, conflicts: int) -> None:
        self.conflicts = conflicts
        self.replaces = 0
        self.stored: dict[str, Any] = {
            "metadata": {"name": "kuota", "resourceVersion": "7", "labels": {"owner": "helm"}},
            "webhooks": [{"name": "a", "clientConfig": {"url": "https://a"}}, {"name": "b", "clientConfig": {}}],
        }

    async def read(self, request: web.Request) -> web.Response:
        del request
        return web.json_response(self.stored)

    async def replace(self, request: web.Request) -> web.Response:
        self.replaces += 1
        body = await request.json()
        if self.conflicts:
            self.conflicts -= 1
            return web.json_response(
                {"kind": "Status", "code": 409, "message": "the object has been modified"}, status=409
            )
        assert body["metadata"]["resourceVersion"] == self.stored["metadata"]["resourceVersion"]
        self.stored = body
        return web.json_response(body)


@pytest.fixture
async def served() -> AsyncIterator[tuple[AdmissionApi, KubeApi]]:
    fake = AdmissionApi(conflicts=0)
    app = web.Application()
    app.router.add_get(PATH, fake.read)
    app.router.add_put(PATH, fake.replace)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    access = ApiServerAccess(str(server.make_url("")).rstrip("/"), ssl.create_default_context())
    async with KubeApi(access) as api:
        yield fake, api
    await server.close()


async def test_every_webhook_gets_the_ca_after_conflicts_are_retried(served: tuple[AdmissionApi, KubeApi]) -> None:
    fake, api = served
    fake.conflicts = 2
    changed = await inject_ca_bundle(api, WebhookConfigurations(mutating=("kuota",)), b"PEM", request_timeout=5)
    assert changed == 1
    assert fake.replaces == 3
    encoded = base64.b64encode(b"PEM").decode()
    assert [webhook["clientConfig"].get("caBundle") for webhook in fake.stored["webhooks"]] == [encoded, encoded]
    # Fields kuota does not know survive the round trip.
    assert fake.stored["metadata"]["labels"] == {"owner": "helm"}
    assert fake.stored["webhooks"][0]["clientConfig"]["url"] == "https://a"


async def test_a_configuration_that_already_has_the_ca_is_not_written(served: tuple[AdmissionApi, KubeApi]) -> None:
    fake, api = served
    configurations = WebhookConfigurations(mutating=("kuota",))
    assert await inject_ca_bundle(api, configurations, b"PEM", request_timeout=5) == 1
    assert await inject_ca_bundle(api, configurations, b"PEM", request_timeout=5) == 0
    assert fake.replaces == 1


async def test_endless_conflicts_raise_a_named_error(served: tuple[AdmissionApi, KubeApi]) -> None:
    fake, api = served
    fake.conflicts = 100
    with pytest.raises(CaBundleInjectionError, match="MutatingWebhookConfiguration kuota kept conflicting"):
        await inject_ca_bundle(api, WebhookConfigurations(mutating=("kuota",)), b"PEM", request_timeout=5, attempts=3)


async def test_a_missing_configuration_says_to_create_it(served: tuple[AdmissionApi, KubeApi]) -> None:
    _, api = served
    with pytest.raises(
        CaBundleInjectionError, match=r"cannot read ValidatingWebhookConfiguration other: HTTP 404.*create it"
    ):
        await inject_ca_bundle(api, WebhookConfigurations(validating=("other",)), b"PEM", request_timeout=5)
