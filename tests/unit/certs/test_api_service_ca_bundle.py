"""caBundle injection into the visibility API's APIServices: set once on the spec, everything else kept, and a
missing APIService named."""

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

API_SERVICES = "/apis/apiregistration.k8s.io/v1/apiservices"
NAMES = ("v1beta2.visibility.kueue.x-k8s.io", "v1beta1.visibility.kueue.x-k8s.io")


class ApiServiceApi:
    """Serves APIServices by name: GET, and PUT that must carry the resourceVersion last served."""

    def __init__(self) -> None:
        self.stored: dict[str, dict[str, Any]] = {
            name: {
                "apiVersion": "apiregistration.k8s.io/v1",
                "kind": "APIService",
                "metadata": {"name": name, "resourceVersion": "3"},
                "spec": {
                    "group": "visibility.kueue.x-k8s.io",
                    "version": name.split(".")[0],
                    "service": {"name": "kuota-webhook-visibility", "namespace": "kuota-system", "port": 443},
                    "groupPriorityMinimum": 100,
                    "versionPriority": 100,
                },
            }
            for name in NAMES
        }
        self.replaces = 0

    async def read(self, request: web.Request) -> web.Response:
        found = self.stored.get(request.match_info["name"])
        if found is None:
            return web.json_response({"kind": "Status", "code": 404, "message": "not found"}, status=404)
        return web.json_response(found)

    async def replace(self, request: web.Request) -> web.Response:
        self.replaces += 1
        body = await request.json()
        name = request.match_info["name"]
        assert body["metadata"]["resourceVersion"] == self.stored[name]["metadata"]["resourceVersion"]
        body["metadata"]["resourceVersion"] = str(int(body["metadata"]["resourceVersion"]) + 1)
        self.stored[name] = body
        return web.json_response(body)


@pytest.fixture
async def served() -> AsyncIterator[tuple[ApiServiceApi, KubeApi]]:
    fake = ApiServiceApi()
    app = web.Application()
    app.router.add_get(API_SERVICES + "/{name}", fake.read)
    app.router.add_put(API_SERVICES + "/{name}", fake.replace)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    access = ApiServerAccess(str(server.make_url("")).rstrip("/"), ssl.create_default_context())
    async with KubeApi(access) as api:
        yield fake, api
    await server.close()


async def test_each_api_service_gets_the_ca_once_and_keeps_its_spec(served: tuple[ApiServiceApi, KubeApi]) -> None:
    fake, api = served
    configurations = WebhookConfigurations(api_services=NAMES)
    assert await inject_ca_bundle(api, configurations, b"PEM", request_timeout=5) == 2
    assert await inject_ca_bundle(api, configurations, b"PEM", request_timeout=5) == 0
    assert fake.replaces == 2
    for name in NAMES:
        spec = fake.stored[name]["spec"]
        assert spec["caBundle"] == base64.b64encode(b"PEM").decode()
        assert spec["service"]["name"] == "kuota-webhook-visibility" and spec["versionPriority"] == 100


async def test_a_missing_api_service_is_named(served: tuple[ApiServiceApi, KubeApi]) -> None:
    _, api = served
    configurations = WebhookConfigurations(api_services=("v1.visibility.kueue.x-k8s.io",))
    with pytest.raises(CaBundleInjectionError, match=r"cannot read APIService v1\.visibility\.kueue\.x-k8s\.io"):
        await inject_ca_bundle(api, configurations, b"PEM", request_timeout=5)
