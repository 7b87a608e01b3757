"""KubeApi against a small stand-in API server: what it sends, what it returns, and how it fails."""

from __future__ import annotations

import asyncio
import json
import re
import socket
import ssl
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

import kuota.kube.client
from kuota import __version__
from kuota.kube.client import KubeApi
from kuota.kube.credentials import ApiServerAccess
from kuota.kube.errors import ApiResponseError, ApiUnreachableError
from kuota.kube.kubeconfig import from_kubeconfig
from tests.cluster.pki import ControlPlanePki, write_pki
from tests.unit.kube.conftest import ServerFactory, b64, server_context, write_kubeconfig


def _api(url: str, **headers: str) -> KubeApi:
    return KubeApi(ApiServerAccess(url, ssl.create_default_context(), headers))


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


async def test_a_request_sends_json_with_the_credentials_and_returns_status_and_body(serve: ServerFactory) -> None:
    async def create(request: web.Request) -> web.Response:
        assert request.headers["Authorization"] == "Bearer t"
        assert request.headers["Content-Type"] == "application/json"
        assert request.headers["Accept"] == "application/json"
        assert request.headers["User-Agent"] == f"kuota/{__version__}"
        assert request.query_string == "dryRun=All&fieldManager=kuota"
        return web.json_response({"echo": await request.json()}, status=201)

    url = await serve({("POST", "/api/v1/namespaces/a/configmaps"): create})
    async with _api(url, Authorization="Bearer t") as api:
        response = await api.request(
            "POST",
            "/api/v1/namespaces/a/configmaps",
            query=[("dryRun", "All"), ("fieldManager", "kuota")],
            body={"data": {"k": "v"}},
        )
    assert (response.status, response.ok) == (201, True)
    assert response.object() == {"echo": {"data": {"k": "v"}}}


async def test_a_bytes_body_goes_as_is_with_its_content_type(serve: ServerFactory) -> None:
    async def patch(request: web.Request) -> web.Response:
        return web.json_response({"type": request.content_type, "body": (await request.read()).decode()})

    url = await serve({("PATCH", "/apis/batch/v1/namespaces/a/jobs/j"): patch})
    async with _api(url) as api:
        response = await api.request(
            "PATCH",
            "/apis/batch/v1/namespaces/a/jobs/j",
            body=b'{"spec":{}}',
            content_type="application/merge-patch+json",
        )
    assert response.object() == {"type": "application/merge-patch+json", "body": '{"spec":{}}'}


async def test_an_error_status_is_returned_and_raise_for_status_quotes_the_status_message(
    serve: ServerFactory,
) -> None:
    async def conflict(request: web.Request) -> web.Response:
        del request
        status = {"kind": "Status", "status": "Failure", "code": 409, "message": 'jobs "j" already exists'}
        return web.json_response(status, status=409)

    url = await serve({("POST", "/apis/batch/v1/namespaces/a/jobs"): conflict})
    async with _api(url) as api:
        response = await api.request("POST", "/apis/batch/v1/namespaces/a/jobs", body={})
    assert (response.status, response.ok, response.message()) == (409, False, 'jobs "j" already exists')
    with pytest.raises(ApiResponseError, match=re.escape('POST /apis/batch/v1/namespaces/a/jobs: HTTP 409: jobs "j"')):
        response.object()


async def test_a_body_that_is_not_json_is_a_response_error_quoting_it(serve: ServerFactory) -> None:
    async def html(request: web.Request) -> web.Response:
        del request
        return web.Response(text="<html>proxy says hi</html>")

    url = await serve({("GET", "/version"): html})
    async with _api(url) as api:
        response = await api.request("GET", "/version")
    assert response.message() == "<html>proxy says hi</html>"
    with pytest.raises(ApiResponseError, match=r"GET /version: HTTP 200 with a body that is not JSON .*proxy says hi"):
        response.object()


async def test_a_json_answer_that_is_not_an_object_is_a_response_error(serve: ServerFactory) -> None:
    async def array(request: web.Request) -> web.Response:
        del request
        return web.json_response([1, 2])

    url = await serve({("GET", "/apis"): array})
    async with _api(url) as api:
        response = await api.request("GET", "/apis")
    with pytest.raises(ApiResponseError, match="with a JSON list, not an object"):
        response.object()


async def test_a_server_that_never_answers_times_out_with_the_calls_own_timeout(serve: ServerFactory) -> None:
    async def hang(request: web.Request) -> web.Response:
        del request
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    url = await serve({("GET", "/api/v1/pods"): hang})
    async with _api(url) as api:
        with pytest.raises(ApiUnreachableError, match=re.escape(f"GET /api/v1/pods at {url}: no answer (timed out)")):
            await api.request("GET", "/api/v1/pods", client_timeout=0.2)


async def test_a_closed_port_is_unreachable_naming_the_server() -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    async with _api(url) as api:
        with pytest.raises(ApiUnreachableError, match=re.escape(f"GET /healthz at {url}: no answer (Client")) as raised:
            await api.request("GET", "/healthz", client_timeout=5)
    assert raised.value.reason.startswith("ClientConnectorError")


async def test_connections_are_kept_alive_and_reused(serve: ServerFactory) -> None:
    peers: set[object] = set()

    async def healthz(request: web.Request) -> web.Response:
        assert request.transport is not None
        peers.add(request.transport.get_extra_info("peername"))
        return web.json_response({})

    url = await serve({("GET", "/healthz"): healthz})
    async with _api(url) as api:
        for _ in range(5):
            assert (await api.request("GET", "/healthz")).ok
    assert len(peers) == 1


async def test_a_pool_of_its_own_has_its_own_connections_credentials_and_lifetime(serve: ServerFactory) -> None:
    peers: list[tuple[object, str]] = []

    async def healthz(request: web.Request) -> web.Response:
        assert request.transport is not None
        peers.append((request.transport.get_extra_info("peername"), request.headers["Authorization"]))
        return web.json_response({})

    url = await serve({("GET", "/healthz"): healthz})
    async with _api(url, Authorization="Bearer t") as api:
        assert (await api.request("GET", "/healthz")).ok
        async with api.with_own_pool(connections=2) as pool:
            assert (await pool.request("GET", "/healthz")).ok
        # The pool is closed; the client it came from still answers, over its first connection.
        assert (await api.request("GET", "/healthz")).ok
    assert [auth for _, auth in peers] == ["Bearer t"] * 3
    assert peers[0][0] != peers[1][0]
    assert peers[0][0] == peers[2][0]


async def test_proxy_variables_and_netrc_are_ignored(
    serve: ServerFactory, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    async def healthz(request: web.Request) -> web.Response:
        return web.json_response({"authorization": request.headers.get("Authorization")})

    url = await serve({("GET", "/healthz"): healthz})
    (tmp_path / "netrc").write_text("machine 127.0.0.1 login someone password from-netrc\n")
    monkeypatch.setenv("NETRC", str(tmp_path / "netrc"))
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{_closed_port()}")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    async with _api(url) as api:
        response = await api.request("GET", "/healthz", client_timeout=5)
    assert response.object() == {"authorization": None}


async def test_a_token_file_is_read_again_once_its_refresh_period_passes(
    serve: ServerFactory, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    async def whoami(request: web.Request) -> web.Response:
        return web.json_response({"authorization": request.headers["Authorization"]})

    url = await serve({("GET", "/whoami"): whoami})
    token = tmp_path / "token"
    token.write_text("first")
    kubeconfig = write_kubeconfig(tmp_path / "config", {"server": url}, {"tokenFile": "token"})
    async with KubeApi.from_kubeconfig(kubeconfig) as api:
        assert (await api.request("GET", "/whoami")).object() == {"authorization": "Bearer first"}
        token.write_text("rotated")
        assert (await api.request("GET", "/whoami")).object() == {"authorization": "Bearer first"}
        monkeypatch.setattr(kuota.kube.client, "TOKEN_REFRESH_SECONDS", 0.0)
        assert (await api.request("GET", "/whoami")).object() == {"authorization": "Bearer rotated"}
        token.unlink()  # mid-rotation: the previous token is kept, the request still goes out
        assert (await api.request("GET", "/whoami")).object() == {"authorization": "Bearer rotated"}


async def test_a_stream_yields_each_line_as_it_comes_whatever_its_length(serve: ServerFactory) -> None:
    long_line = json.dumps({"type": "ADDED", "object": {"data": "x" * 300_000}}).encode()

    async def watch(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        await response.prepare(request)
        await response.write(b'{"type":"BOOKMARK"}\n\n' + long_line[:1000])
        await response.write(long_line[1000:] + b"\n")
        await response.write(b'{"type":"unterminated"}')
        await response.write_eof()
        return response

    url = await serve({("GET", "/api/v1/configmaps"): watch})
    timeout = aiohttp.ClientTimeout(total=None, sock_read=5)
    async with (
        _api(url) as api,
        api.stream("GET", "/api/v1/configmaps", query={"watch": "true"}, client_timeout=timeout) as stream,
    ):
        assert stream.status == 200
        lines = [line async for line in stream.lines()]
    assert lines == [b'{"type":"BOOKMARK"}', long_line, b'{"type":"unterminated"}']


async def test_a_stream_refused_reads_the_status_body(serve: ServerFactory) -> None:
    async def gone(request: web.Request) -> web.Response:
        del request
        return web.json_response({"kind": "Status", "code": 410, "message": "too old resource version"}, status=410)

    url = await serve({("GET", "/api/v1/pods"): gone})
    async with _api(url) as api, api.stream("GET", "/api/v1/pods") as stream:
        answer = await stream.read()
    assert (answer.status, answer.message()) == (410, "too old resource version")


async def test_a_stream_cut_mid_body_is_unreachable(serve: ServerFactory) -> None:
    async def cut(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        response.content_length = 1000
        await response.prepare(request)
        await response.write(b'{"type":"ADDED"}\n')
        assert request.transport is not None
        request.transport.close()
        return response

    url = await serve({("GET", "/api/v1/pods"): cut})
    async with _api(url) as api, api.stream("GET", "/api/v1/pods") as stream:
        seen = []
        with pytest.raises(ApiUnreachableError, match=r"GET /api/v1/pods at .*: no answer"):
            async for line in stream.lines():
                seen.append(line)
    assert seen == [b'{"type":"ADDED"}']


async def test_the_ca_and_client_certificate_of_a_kubeconfig_authenticate_over_tls(
    serve: ServerFactory, pki: ControlPlanePki, tmp_path: Path
) -> None:
    async def whoami(request: web.Request) -> web.Response:
        assert request.transport is not None
        peer = request.transport.get_extra_info("peercert")
        subject = dict(entry[0] for entry in peer["subject"])
        return web.json_response({"user": subject["commonName"]})

    url = await serve({("GET", "/whoami"): whoami}, ssl_context=server_context(pki, client_ca=pki.ca_cert))
    inline = {"client-certificate-data": b64(pki.admin_cert), "client-key-data": b64(pki.admin_key)}
    (tmp_path / "pki").symlink_to(pki.ca_cert.parent)
    files = {"client-certificate": "pki/admin.crt", "client-key": "pki/admin.key"}
    for cluster, user in (
        ({"server": url, "certificate-authority-data": b64(pki.ca_cert)}, inline),
        ({"server": url, "certificate-authority": "pki/ca.crt"}, files),
    ):
        async with KubeApi.from_kubeconfig(write_kubeconfig(tmp_path / "config", cluster, user)) as api:
            assert (await api.request("GET", "/whoami")).object() == {"user": "kuota-test-admin"}


async def test_a_server_the_ca_did_not_sign_is_refused_unless_verification_is_skipped(
    serve: ServerFactory, pki: ControlPlanePki, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    async def healthz(request: web.Request) -> web.Response:
        del request
        return web.json_response({})

    url = await serve({("GET", "/healthz"): healthz}, ssl_context=server_context(pki))
    other = write_pki(tmp_path_factory.mktemp("other-pki"))
    trusting_other = {"server": url, "certificate-authority-data": b64(other.ca_cert)}
    async with KubeApi.from_kubeconfig(write_kubeconfig(tmp_path / "config", trusting_other, {})) as api:
        with pytest.raises(ApiUnreachableError, match="certificate verify failed"):
            await api.request("GET", "/healthz", client_timeout=5)
    skipping = {"server": url, "insecure-skip-tls-verify": True}
    async with KubeApi.from_kubeconfig(write_kubeconfig(tmp_path / "config", skipping, {})) as api:
        assert (await api.request("GET", "/healthz", client_timeout=5)).ok


async def test_tls_server_name_is_the_name_the_certificate_must_carry(
    serve: ServerFactory, pki: ControlPlanePki, tmp_path: Path
) -> None:
    async def healthz(request: web.Request) -> web.Response:
        del request
        return web.json_response({})

    url = await serve({("GET", "/healthz"): healthz}, ssl_context=server_context(pki))
    for name, accepted in (("kubernetes.default.svc", True), ("elsewhere.example", False)):
        cluster = {"server": url, "certificate-authority-data": b64(pki.ca_cert), "tls-server-name": name}
        async with KubeApi(from_kubeconfig(write_kubeconfig(tmp_path / "config", cluster, {}))) as api:
            if accepted:
                assert (await api.request("GET", "/healthz", client_timeout=5)).ok
            else:
                with pytest.raises(ApiUnreachableError, match=re.escape("elsewhere.example")):
                    await api.request("GET", "/healthz", client_timeout=5)
