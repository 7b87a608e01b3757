"""The integration tier: one real control plane for the whole test session, a fresh namespace per test."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest

from kuota.kube.client import KubeApi
from kuota.webhook.crds import crd_manifests
from tests.cluster import Cluster
from tests.waiting import wait_until


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    workdir = tmp_path_factory.mktemp("control-plane")
    started = Cluster.start(workdir)
    print(f"\ncontrol plane ready in {started.startup_seconds:.1f}s at {started.server} (logs: {workdir})")
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture
def make_namespace(cluster: Cluster) -> Iterator[Callable[[], str]]:
    """Creates fresh namespaces on demand; all are deleted after the test."""
    made: list[str] = []

    def make() -> str:
        name = f"t-{uuid.uuid4().hex[:10]}"
        cluster.kubectl("create", "namespace", name)
        made.append(name)
        return name

    try:
        yield make
    finally:
        for name in made:
            cluster.kubectl("delete", "namespace", name, "--wait=false", check=False)


@pytest.fixture
def namespace(make_namespace: Callable[[], str]) -> str:
    return make_namespace()


@pytest.fixture(scope="session")
def kuota_crds(cluster: Cluster) -> list[dict[str, Any]]:
    """kuota's CRDs installed and Established (idempotent: other areas' tests may install them too)."""
    manifests = crd_manifests()
    cluster.kubectl(
        "apply",
        "--server-side",
        "--force-conflicts",
        "-f",
        "-",
        input=json.dumps({"apiVersion": "v1", "kind": "List", "items": manifests}),
    )
    for manifest in manifests:
        name = manifest["metadata"]["name"]
        cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", f"crd/{name}")
    # Discovery of new resources lags Established by a moment; kubectl needs it to map kinds.
    wait_until(
        lambda: cluster.kubectl("get", "workloads.kueue.x-k8s.io", "-A", check=False).returncode == 0,
        "kueue.x-k8s.io discovery",
    )
    return manifests


@pytest.fixture
async def api_client(cluster: Cluster) -> AsyncIterator[KubeApi]:
    """kuota's own API client, as the admin of the test cluster."""
    async with KubeApi.from_kubeconfig(cluster.kubeconfig) as api:
        yield api
