"""Requestheader authentication and RBAC for the visibility API, over the manager's real TLS serving: who gets
refused at the handshake, 401, 403, or the summary, and what the API server is asked. The real API server's
front proxy: tests/integration/manager/test_visibility.py."""

from __future__ import annotations

import json
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

import aiohttp
import pytest
from cryptography import x509
from multidict import CIMultiDict, CIMultiDictProxy

from kuota.certs.authority import ServingIdentity, issue_bundle
from kuota.certs.serving_context import ReloadableServerContext
from kuota.http_serving import serve
from kuota.kube.client import ApiResponse, KubeApi
from kuota.kube.errors import ApiUnreachableError
from kuota.webhook.access_reviews import SUBJECT_ACCESS_REVIEWS
from kuota.webhook.admission.server import AdmissionRoutes, build_app
from kuota.webhook.visibility.errors import FrontProxyConfigError, Unauthenticated
from kuota.webhook.visibility.front_proxy import FrontProxy, authenticate, parse_request_header_config
from kuota.webhook.visibility.routes import VisibilityAccess, VisibleState, add_visibility_routes
from tests.cluster.pki import FRONT_PROXY_CLIENT, ControlPlanePki, write_client_identity, write_pki
from tests.unit.engine.builders import engine_with, gpu_queue, workload

PENDING = "/apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues/research/pendingworkloads"
LOCAL_PENDING = "/apis/visibility.kueue.x-k8s.io/v1beta1/namespaces/research/localqueues/q/pendingworkloads"
ALICE = {"X-Remote-User": "alice", "X-Remote-Group": "researchers"}


def _configmap_data(pki: ControlPlanePki, allowed: list[str]) -> dict[str, str]:
    return {
        "requestheader-client-ca-file": pki.front_proxy_ca_cert.read_text(),
        "requestheader-allowed-names": json.dumps(allowed),
        "requestheader-username-headers": '["X-Remote-User"]',
        "requestheader-uid-headers": '["X-Remote-Uid"]',
        "requestheader-group-headers": '["X-Remote-Group"]',
        "requestheader-extra-headers-prefix": '["X-Remote-Extra-"]',
    }


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> ControlPlanePki:
    return write_pki(tmp_path_factory.mktemp("pki"))


def _der(path: Path) -> bytes:
    from cryptography.hazmat.primitives.serialization import Encoding

    return x509.load_pem_x509_certificate(path.read_bytes()).public_bytes(Encoding.DER)


def _headers(**values: str | list[str]) -> CIMultiDictProxy[str]:
    found: CIMultiDict[str] = CIMultiDict()
    for name, value in values.items():
        for one in [value] if isinstance(value, str) else value:
            found.add(name.replace("_", "-"), one)
    return CIMultiDictProxy(found)


def test_the_front_proxys_user_groups_uid_and_extras_are_read(pki: ControlPlanePki) -> None:
    config = parse_request_header_config(_configmap_data(pki, [FRONT_PROXY_CLIENT]))
    headers = _headers(
        X_Remote_User="alice",
        X_Remote_Uid="u-7",
        X_Remote_Group=["researchers", "system:authenticated"],
        **{"X-Remote-Extra-Scopes": ["a", "b"], "X-Remote-Extra-Acme.com%2Fproject": "p1"},
    )
    user = authenticate(config, _der(pki.proxy_client_cert), headers)
    assert (user.name, user.uid, user.groups) == ("alice", "u-7", ("researchers", "system:authenticated"))
    assert user.extra == (("acme.com/project", ("p1",)), ("scopes", ("a", "b")))


def test_no_certificate_another_ca_a_wrong_name_an_expired_one_or_no_user_are_refused(
    pki: ControlPlanePki, tmp_path: Path
) -> None:
    config = parse_request_header_config(_configmap_data(pki, [FRONT_PROXY_CLIENT]))
    user = _headers(X_Remote_User="alice")
    with pytest.raises(Unauthenticated, match="no client certificate"):
        authenticate(config, None, user)
    with pytest.raises(Unauthenticated, match="not issued by the requestheader client CA"):
        authenticate(config, _der(pki.admin_cert), user)  # the cluster CA's, not the front proxy's
    write_client_identity(
        pki, "someone-else", (), tmp_path / "c.crt", tmp_path / "c.key",
        signed_by=(pki.front_proxy_ca_cert, pki.front_proxy_ca_key),
    )  # fmt: skip
    with pytest.raises(Unauthenticated, match="common name someone-else is not among the requestheader allowed"):
        authenticate(config, _der(tmp_path / "c.crt"), user)
    any_name = parse_request_header_config(_configmap_data(pki, []))  # no allowed names: any the CA issued
    assert authenticate(any_name, _der(tmp_path / "c.crt"), user).name == "alice"
    later = datetime.now(UTC) + timedelta(days=30)
    with pytest.raises(Unauthenticated, match="expired"):
        authenticate(config, _der(pki.proxy_client_cert), user, now=later)
    with pytest.raises(Unauthenticated, match="named no user"):
        authenticate(config, _der(pki.proxy_client_cert), _headers(X_Remote_Group="researchers"))
    with pytest.raises(Unauthenticated, match="not loaded yet"):
        authenticate(None, _der(pki.proxy_client_cert), user)


def test_an_unusable_configmap_is_named(pki: ControlPlanePki) -> None:
    with pytest.raises(FrontProxyConfigError, match="requestheader-client-ca-file is missing"):
        parse_request_header_config({})
    broken = {**_configmap_data(pki, []), "requestheader-allowed-names": "front-proxy-client"}
    with pytest.raises(FrontProxyConfigError, match="requestheader-allowed-names is not a JSON list"):
        parse_request_header_config(broken)
    with pytest.raises(FrontProxyConfigError, match="username-headers is empty"):
        parse_request_header_config({**_configmap_data(pki, []), "requestheader-username-headers": "[]"})


class _ApiServer:
    """Answers SubjectAccessReviews: alice may see the ClusterQueue research, bob nothing."""

    def __init__(self) -> None:
        self.reviews: list[dict[str, Any]] = []
        self.down = False

    async def request(self, method: str, path: str, *, body: dict[str, Any], **_: Any) -> ApiResponse:
        assert (method, path) == ("POST", SUBJECT_ACCESS_REVIEWS)
        if self.down:
            raise ApiUnreachableError(f"POST {path}: no answer (connection refused)", "connection refused")
        self.reviews.append(body["spec"])
        allowed = body["spec"]["user"] == "alice"
        return ApiResponse(method, path, 201, json.dumps({**body, "status": {"allowed": allowed}}).encode())


@dataclass
class _Served:
    port: int
    ca_pem: bytes
    api: _ApiServer


@pytest.fixture
async def served(pki: ControlPlanePki) -> AsyncIterator[_Served]:
    context = ReloadableServerContext()
    bundle = issue_bundle(ServingIdentity(dns_names=("localhost",), ip_addresses=("127.0.0.1",)), datetime.now(UTC))
    context.load(bundle.cert_pem, bundle.key_pem)
    api = _ApiServer()
    front_proxy = FrontProxy(cast(KubeApi, api), context.context)
    front_proxy.load(parse_request_header_config(_configmap_data(pki, [FRONT_PROXY_CLIENT])))
    engine = engine_with(gpu_queue("research", 1, cohort=None))
    engine.submit(workload("research", "waiting", at=1.0))
    state = VisibleState(engine, lambda key: None, lambda key: None)
    app = build_app(AdmissionRoutes({}))
    add_visibility_routes(app, lambda: state, VisibilityAccess(cast(KubeApi, api), front_proxy))
    server = await serve(app, "127.0.0.1", 0, ssl_context=context.context)
    try:
        yield _Served(server.port, bundle.ca_cert_pem, api)
    finally:
        await server.runner.cleanup()


def _client(served: _Served, cert: Path | None = None, key: Path | None = None) -> ssl.SSLContext:
    client = ssl.create_default_context(cadata=served.ca_pem.decode())
    if cert is not None and key is not None:
        client.load_cert_chain(cert, key)
    return client


async def _get(served: _Served, path: str, client: ssl.SSLContext, headers: dict[str, str]) -> tuple[int, Any]:
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"https://127.0.0.1:{served.port}{path}", ssl=client, headers=headers) as reply,
    ):
        return reply.status, await reply.json()


async def test_only_the_front_proxy_is_believed_and_rbac_decides_what_its_user_sees(
    served: _Served, pki: ControlPlanePki, tmp_path: Path
) -> None:
    proxy = _client(served, pki.proxy_client_cert, pki.proxy_client_key)
    code, body = await _get(served, PENDING, proxy, ALICE)
    assert code == 200 and [item["metadata"]["name"] for item in body["items"]] == ["waiting"]
    assert served.api.reviews == [
        {
            "user": "alice",
            "uid": "",
            "groups": ["researchers"],
            "extra": {},
            "resourceAttributes": {
                "verb": "get",
                "group": "visibility.kueue.x-k8s.io",
                "version": "v1beta2",
                "resource": "clusterqueues",
                "subresource": "pendingworkloads",
                "name": "research",
            },
        }
    ]
    await _get(served, PENDING, proxy, ALICE)
    assert len(served.api.reviews) == 1  # the decision is reused

    code, body = await _get(served, LOCAL_PENDING, proxy, {"X-Remote-User": "bob"})
    assert (code, body["reason"]) == (403, "Forbidden")
    assert 'User "bob" cannot get resource "localqueues/pendingworkloads"' in body["message"]
    assert served.api.reviews[-1]["resourceAttributes"]["namespace"] == "research"

    # Discovery needs the front proxy's user, not RBAC: the aggregator asks as system:kube-aggregator.
    code, body = await _get(
        served, "/apis/visibility.kueue.x-k8s.io", proxy, {"X-Remote-User": "system:kube-aggregator"}
    )
    assert code == 200 and body["preferredVersion"]["version"] == "v1beta2"

    for client, headers, reason in (
        (_client(served), ALICE, "no client certificate"),
        (proxy, {"X-Remote-Group": "researchers"}, "named no user"),
    ):
        code, body = await _get(served, PENDING, client, headers)
        assert (code, body["reason"]) == (401, "Unauthorized") and reason in body["message"]

    write_client_identity(
        pki, "not-the-proxy", (), tmp_path / "n.crt", tmp_path / "n.key",
        signed_by=(pki.front_proxy_ca_cert, pki.front_proxy_ca_key),
    )  # fmt: skip
    code, body = await _get(served, PENDING, _client(served, tmp_path / "n.crt", tmp_path / "n.key"), ALICE)
    assert code == 401 and "not-the-proxy is not among the requestheader allowed names" in body["message"]

    # A certificate from a CA the server does not trust fails the handshake itself.
    with pytest.raises(aiohttp.ClientError):
        await _get(served, PENDING, _client(served, pki.admin_cert, pki.admin_key), ALICE)
    assert len(served.api.reviews) == 2  # no refused request reached RBAC


async def test_bad_windows_and_unknown_queues_get_kueues_status_objects(served: _Served, pki: ControlPlanePki) -> None:
    proxy = _client(served, pki.proxy_client_cert, pki.proxy_client_key)
    code, body = await _get(served, PENDING + "?limit=ten", proxy, ALICE)
    assert (code, body["reason"]) == (400, "BadRequest") and "limit='ten' is not an integer" in body["message"]
    missing = PENDING.replace("research", "missing")
    code, body = await _get(served, missing, proxy, {"X-Remote-User": "alice"})
    # alice's RBAC is checked first (allowed for any name here), then the ClusterQueue is looked up.
    assert (code, body["reason"]) == (404, "NotFound")
    assert body["message"] == 'clusterqueue.visibility.kueue.x-k8s.io "missing" not found'
    code, body = await _get(served, "/apis/visibility.kueue.x-k8s.io/v1", proxy, ALICE)
    assert code == 404
    code, body = await _get(served, "/apis/visibility.kueue.x-k8s.io/v1beta1", proxy, ALICE)
    assert code == 200 and [r["name"] for r in body["resources"]] == [
        "clusterqueues",
        "clusterqueues/pendingworkloads",
        "localqueues",
        "localqueues/pendingworkloads",
    ]


async def test_an_unreachable_api_server_is_a_503_to_retry(served: _Served, pki: ControlPlanePki) -> None:
    served.api.down = True
    proxy = _client(served, pki.proxy_client_cert, pki.proxy_client_key)
    code, body = await _get(served, PENDING, proxy, ALICE)
    assert (code, body["reason"]) == (503, "ServiceUnavailable") and "retry" in body["message"]
