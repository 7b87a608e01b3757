"""caBundle injection into the CRDs' conversion webhook: set once, kept by a replace with the resourceVersion read,
and skipped for a CRD that converts without a webhook."""

from __future__ import annotations

import base64
import copy
import ssl
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from kuota.certs.ca_bundle_injection import WebhookConfigurations, inject_ca_bundle
from kuota.kube.client import KubeApi
from kuota.kube.credentials import ApiServerAccess
from kuota.webhook.crds import crd_manifests

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


class CrdApi:
    """Serves CRDs by name: GET, and PUT that must carry the resourceVersion last served."""

    def __init__(self, crds: list[dict[str, Any]]) -> None:
        self.stored = {crd["metadata"]["name"]: crd for crd in crds}
        self.replaces = 0

    async def read(self, request: web.Request) -> web.Response:
        return web.json_response(self.stored[request.match_info["name"]])

    async def replace(self, request: web.Request) -> web.Response:
        self.replaces += 1
        body = await request.json()
        name = request.match_info["name"]
        assert body["metadata"]["resourceVersion"] == self.stored[name]["metadata"]["resourceVersion"]
        body["metadata"]["resourceVersion"] = str(int(body["metadata"]["resourceVersion"]) + 1)
        self.stored[name] = body
        return web.json_response(body)


def _stored(manifest: dict[str, Any]) -> dict[str, Any]:
    crd = copy.deepcopy(manifest)
    crd["metadata"]["resourceVersion"] = "5"
    return crd


@pytest.fixture
async def served() -> AsyncIterator[tuple[CrdApi, KubeApi]]:
    manifests = [_stored(m) for m in crd_manifests()]
    without_webhook = _stored(manifests[0])
    without_webhook["metadata"]["name"] = "plain.example.com"
    without_webhook["spec"]["conversion"] = {"strategy": "None"}
    fake = CrdApi([*manifests, without_webhook])
    app = web.Application()
    app.router.add_get(CRDS + "/{name}", fake.read)
    app.router.add_put(CRDS + "/{name}", fake.replace)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    access = ApiServerAccess(str(server.make_url("")).rstrip("/"), ssl.create_default_context())
    async with KubeApi(access) as api:
        yield fake, api
    await server.close()


async def test_every_kuota_crd_gets_the_ca_in_its_conversion_webhook_once(served: tuple[CrdApi, KubeApi]) -> None:
    fake, api = served
    names = tuple(m["metadata"]["name"] for m in crd_manifests())
    configurations = WebhookConfigurations(conversion=names)
    assert await inject_ca_bundle(api, configurations, b"PEM", request_timeout=5) == len(names)
    for name in names:
        client_config = fake.stored[name]["spec"]["conversion"]["webhook"]["clientConfig"]
        assert client_config["caBundle"] == base64.b64encode(b"PEM").decode()
        assert client_config["service"]["path"] == "/convert", "the rest of the clientConfig is kept"
    assert await inject_ca_bundle(api, configurations, b"PEM", request_timeout=5) == 0
    assert fake.replaces == len(names)


async def test_a_crd_without_a_conversion_webhook_is_left_alone(served: tuple[CrdApi, KubeApi]) -> None:
    fake, api = served
    configurations = WebhookConfigurations(conversion=("plain.example.com",))
    assert await inject_ca_bundle(api, configurations, b"PEM", request_timeout=5) == 0
    assert fake.replaces == 0
    assert fake.stored["plain.example.com"]["spec"]["conversion"] == {"strategy": "None"}
