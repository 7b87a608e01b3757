"""The manager's secure /metrics against the real API server: HTTPS with the serving certificate, and the caller's
token reviewed (TokenReview) and checked for get on /metrics (SubjectAccessReview), as Kueue serves it."""

from __future__ import annotations

import base64
import json
import ssl
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from tests.cluster import Cluster
from tests.integration.manager.conftest import ensure_namespace, get_json
from tests.manager_process import ManagerProcess
from tests.unit.chart.rendering import VALUES_SETS, render

pytestmark = pytest.mark.integration

NAMESPACE = "kuota-metrics-auth"
READER_ROLE = "kuota-metrics-reader-under-test"  # the chart's rules, under a name no release uses


@pytest.fixture(scope="module")
def secured(cluster: Cluster, kuota_crds: list[dict[str, Any]]) -> Iterator[ManagerProcess]:
    del kuota_crds
    ensure_namespace(cluster, NAMESPACE, managed=False)
    role = render(VALUES_SETS["monitoring"]).one("ClusterRole", "kuota-metrics-reader")
    role["metadata"] = {"name": READER_ROLE}
    cluster.kubectl("apply", "-f", "-", input=json.dumps(role))
    for account in ("prometheus", "stranger"):
        cluster.kubectl("create", "serviceaccount", account, "-n", NAMESPACE, check=False)
    cluster.kubectl(
        "create", "clusterrolebinding", READER_ROLE, f"--clusterrole={READER_ROLE}",
        f"--serviceaccount={NAMESPACE}:prometheus", check=False,
    )  # fmt: skip
    manager = ManagerProcess(cluster, NAMESPACE, identity="metrics-auth", secure_metrics=True)
    manager.start()
    try:
        yield manager
    finally:
        manager.stop()
        manager.unregister()
        cluster.kubectl("delete", "clusterrolebinding,clusterrole", READER_ROLE, "--ignore-not-found")


def _token(cluster: Cluster, account: str) -> str:
    return cluster.kubectl("create", "token", account, "-n", NAMESPACE, "--duration=10m").stdout.strip()


def _scrape(cluster: Cluster, manager: ManagerProcess, token: str | None) -> tuple[int, str]:
    """GET /metrics over HTTPS, verifying the manager's certificate against the CA in its Secret."""
    secret = get_json(cluster, "secret", "kuota-webhook-tls", "-n", NAMESPACE)
    context = ssl.create_default_context(cadata=base64.b64decode(secret["data"]["ca.crt"]).decode())
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    request = urllib.request.Request(f"https://127.0.0.1:{manager.metrics_port}/metrics", headers=headers)
    try:
        with urllib.request.urlopen(request, context=context, timeout=30) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def test_a_metrics_reader_gets_the_metrics(cluster: Cluster, secured: ManagerProcess) -> None:
    status, body = _scrape(cluster, secured, _token(cluster, "prometheus"))
    assert status == 200, body
    assert "kueue_build_info{" in body


def test_a_service_account_without_the_role_is_forbidden(cluster: Cluster, secured: ManagerProcess) -> None:
    status, body = _scrape(cluster, secured, _token(cluster, "stranger"))
    assert status == 403, body
    assert f"system:serviceaccount:{NAMESPACE}:stranger" in body
    assert "kueue_" not in body


def test_no_token_or_a_forged_one_is_unauthorized(cluster: Cluster, secured: ManagerProcess) -> None:
    assert _scrape(cluster, secured, None)[0] == 401
    forged = _token(cluster, "prometheus")[:-8] + "AAAAAAAA"
    assert _scrape(cluster, secured, forged)[0] == 401


def test_plain_http_is_not_served(secured: ManagerProcess) -> None:
    with pytest.raises((urllib.error.URLError, ConnectionError)):
        urllib.request.urlopen(f"http://127.0.0.1:{secured.metrics_port}/metrics", timeout=10)
