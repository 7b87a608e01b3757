"""Reaching a real API server as a real cluster's kubeconfig says: credentials from an exec plugin (a real script
printing real credentials: a ServiceAccount token from the TokenRequest API, the admin's client certificate),
KUBECONFIG's files merged with --context picking a context of the second, and a proxy-url through a real HTTP
CONNECT proxy."""

from __future__ import annotations

import base64
import contextlib
import io
import os
import socket
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from kuota.cli import main
from kuota.kube.client import KubeApi
from kuota.report.errors import KubernetesUnreachableError
from kuota.report.sources.api_listing import api_source, read_cluster
from tests.cluster import Cluster
from tests.connect_proxy import connect_proxy
from tests.fakes.exec_plugin import FakePlugin, credential
from tests.waiting import wait_until

pytestmark = pytest.mark.integration

V1 = "client.authentication.k8s.io/v1"
V1BETA1 = "client.authentication.k8s.io/v1beta1"
SELF_SUBJECT_REVIEWS = "/apis/authentication.k8s.io/v1/selfsubjectreviews"


def _cluster_entry(cluster: Cluster) -> dict[str, Any]:
    """The test cluster's own kubeconfig cluster entry (server and CA)."""
    entry: dict[str, Any] = yaml.safe_load(cluster.kubeconfig.read_text())["clusters"][0]["cluster"]
    return dict(entry)


def _kubeconfig(
    path: Path, clusters: dict[str, dict[str, Any]], users: dict[str, dict[str, Any]], contexts: dict[str, str]
) -> Path:
    """Contexts named NAME use cluster NAME and the user given; the first context is the current one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": name, "cluster": body} for name, body in clusters.items()],
                "users": [{"name": name, "user": body} for name, body in users.items()],
                "contexts": [
                    {"name": name, "context": {"cluster": name, "user": user}} for name, user in contexts.items()
                ],
                "current-context": next(iter(contexts)),
            }
        )
    )
    return path


def _service_account_token(cluster: Cluster, namespace: str) -> str:
    wait_until(
        lambda: cluster.kubectl("get", "serviceaccount", "default", "-n", namespace, check=False).returncode == 0,
        f"the default ServiceAccount of {namespace}",
        timeout=60,
    )
    return cluster.kubectl("create", "token", "default", "-n", namespace, "--duration=1h").stdout.strip()


async def _username(api: KubeApi) -> str:
    review = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    answer = (await api.request("POST", SELF_SUBJECT_REVIEWS, body=review)).object()
    username: str = answer["status"]["userInfo"]["username"]
    return username


async def test_a_v1_plugins_token_is_who_the_api_server_sees_renewed_only_once_it_is_about_to_expire(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    token = _service_account_token(cluster, namespace)
    plugin = FakePlugin.install(tmp_path / "plugin")
    # The first credential says it expires within the renewal margin: the next request runs the plugin again.
    plugin.answer(
        credential(V1, token=token, expires_at=time.time() + 2),
        credential(V1, token=token, expires_at=time.time() + 3600),
    )
    path = _kubeconfig(
        tmp_path / "config",
        {"sa": _cluster_entry(cluster)},
        {"sa": {"exec": plugin.exec_entry(V1)}},
        {"sa": "sa"},
    )
    async with KubeApi.from_kubeconfig(path) as api:
        assert await _username(api) == f"system:serviceaccount:{namespace}:default"
        assert len(plugin.calls()) == 1
        for _ in range(3):
            assert await _username(api) == f"system:serviceaccount:{namespace}:default"
    assert len(plugin.calls()) == 2


async def test_a_token_the_api_server_refuses_runs_the_plugin_again_and_the_request_succeeds(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    token = _service_account_token(cluster, namespace)
    plugin = FakePlugin.install(tmp_path / "plugin")
    plugin.answer(credential(V1, token="revoked-token"), credential(V1, token=token))
    path = _kubeconfig(
        tmp_path / "config", {"sa": _cluster_entry(cluster)}, {"sa": {"exec": plugin.exec_entry(V1)}}, {"sa": "sa"}
    )
    async with KubeApi.from_kubeconfig(path) as api:
        assert await _username(api) == f"system:serviceaccount:{namespace}:default"
    assert len(plugin.calls()) == 2


async def test_the_reports_listing_with_a_v1beta1_plugins_client_certificate_runs_it_once(
    cluster: Cluster, kuota_crds: list[dict[str, Any]], tmp_path: Path
) -> None:
    del kuota_crds
    plugin = FakePlugin.install(tmp_path / "plugin")
    pair = {"certificate": cluster.pki.admin_cert.read_text(), "key": cluster.pki.admin_key.read_text()}
    plugin.answer(credential(V1BETA1, **pair, expires_at=time.time() + 3600))
    exec_entry = plugin.exec_entry(V1BETA1, provideClusterInfo=True)
    path = _kubeconfig(
        tmp_path / "config", {"admin": _cluster_entry(cluster)}, {"admin": {"exec": exec_entry}}, {"admin": "admin"}
    )
    source = api_source(path)
    for _ in range(2):
        listed = await read_cluster(source, with_queues=True)
        assert listed.config_objects is not None
        assert any(obj["kind"] == "Namespace" and obj["metadata"]["name"] == "default" for obj in listed.config_objects)
    [call] = plugin.calls()
    assert call["exec_info"]["spec"]["cluster"]["server"] == cluster.server


def test_kuota_report_refuses_an_interactive_plugin_in_one_line_without_running_it(
    cluster: Cluster, tmp_path: Path
) -> None:
    plugin = FakePlugin.install(tmp_path / "plugin")
    plugin.answer(credential(V1, token="unused"))
    exec_entry = plugin.exec_entry(V1, interactiveMode="Always")
    path = _kubeconfig(
        tmp_path / "config", {"sso": _cluster_entry(cluster)}, {"sso": {"exec": exec_entry}}, {"sso": "sso"}
    )
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr):
        code = main(
            ["report", "--prometheus", "http://127.0.0.1:1", "--kubeconfig", str(path), "--out", str(tmp_path / "out")]
        )
    assert code == 2
    assert stderr.getvalue() == (
        f"kuota report: error: --kubeconfig {path} is not a usable kubeconfig: kubeconfig {path}: user 'sso' "
        f"exec plugin {plugin.command} needs a terminal (interactiveMode: Always) and kuota has none; sign in "
        "with the plugin in a terminal first and set interactiveMode: IfAvailable or Never, or give the user a "
        "token or client certificate\n"
    )
    assert plugin.calls() == []


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


async def test_kubeconfig_lists_two_files_and_context_picks_one_of_the_second(
    cluster: Cluster, kuota_crds: list[dict[str, Any]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    del kuota_crds
    admin = yaml.safe_load(cluster.kubeconfig.read_text())["users"][0]["user"]
    first = _kubeconfig(
        tmp_path / "first" / "config",
        {"elsewhere": {"server": f"https://127.0.0.1:{_closed_port()}", "insecure-skip-tls-verify": True}},
        {"elsewhere": {"token": "nobody"}},
        {"elsewhere": "elsewhere"},
    )
    second = _kubeconfig(
        tmp_path / "second" / "config", {"test": _cluster_entry(cluster)}, {"admin": admin}, {"test": "admin"}
    )
    monkeypatch.setenv("KUBECONFIG", os.pathsep.join([str(first), str(tmp_path / "absent"), str(second)]))
    chosen = api_source(None, "test")
    assert chosen.origin == f"KUBECONFIG {os.environ['KUBECONFIG']} --context test"
    listed = await read_cluster(chosen, with_queues=True)
    assert listed.config_objects is not None
    with pytest.raises(KubernetesUnreachableError, match=r"did not answer a list"):
        await read_cluster(api_source(None), with_queues=False)  # the current-context: the first file's


async def test_a_proxy_url_tunnels_every_request_through_the_proxy(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    admin = yaml.safe_load(cluster.kubeconfig.read_text())["users"][0]["user"]
    async with connect_proxy() as proxy:
        proxied = {**_cluster_entry(cluster), "proxy-url": f"http://kuota:s%40cret@127.0.0.1:{proxy.port}"}
        path = _kubeconfig(tmp_path / "config", {"proxied": proxied}, {"admin": admin}, {"proxied": "admin"})
        async with KubeApi.from_kubeconfig(path) as api:
            found = (await api.request("GET", f"/api/v1/namespaces/{namespace}")).object()
        assert found["metadata"]["name"] == namespace
        api_server = cluster.server.removeprefix("https://")
        assert proxy.tunnels, "the proxy saw no CONNECT"
        assert {tunnel.target for tunnel in proxy.tunnels} == {api_server}
        assert {tunnel.headers.get("proxy-authorization") for tunnel in proxy.tunnels} == {
            f"Basic {base64.b64encode(b'kuota:s@cret').decode()}"
        }
