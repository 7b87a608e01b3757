"""The chart's objects on the test control plane, minus the workloads: their containers run here as podman
containers from the built images (``make ci-images``), through the stand-in kubelet ``tests.cluster.pod_container``."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.cluster import Cluster
from tests.cluster.pod_container import PodIdentity, host_address, image_present, service_account_folder
from tests.fakes.nvml.build import build
from tests.manager_process import restore_crd_conversion
from tests.unit.chart.rendering import NAMESPACE, Rendered, pod_spec, render
from tests.waiting import wait_until

# The report on, as a user turns it on; emptyDir: this control plane runs no pvc-protection controller.
VALUES: dict[str, Any] = {
    "report": {"enabled": True, "prometheusUrl": "http://127.0.0.1:9090", "storage": {"type": "emptyDir"}}
}
WORKLOAD_KINDS = {"Deployment", "DaemonSet", "CronJob"}


def rbac_denials(log: str) -> list[str]:
    """The lines of a container's log that report a refusal by the API server's RBAC (kuota logs the HTTP 403)."""
    return [line for line in log.splitlines() if " 403" in line or "Forbidden" in line]


def as_list(objects: list[dict[str, Any]]) -> str:
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": objects})


@pytest.fixture(scope="module")
def chart(cluster: Cluster) -> Iterator[Rendered]:
    """``helm template``'s objects applied, except the Deployment, DaemonSet and CronJob, whose containers the
    tests run; every rendered image must have been built."""
    rendered = render(VALUES)
    images = {
        c["image"] for kind in WORKLOAD_KINDS for obj in rendered.of_kind(kind) for c in pod_spec(obj)["containers"]
    }
    missing = sorted(image for image in images if not image_present(image))
    assert not missing, f"images {missing} are not in podman's store: run `make ci-images` first"
    applied = [obj for obj in rendered.objects if obj["kind"] not in WORKLOAD_KINDS]
    cluster.kubectl("create", "namespace", NAMESPACE, check=False)
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", input=as_list(applied))
    try:
        yield rendered
    finally:
        # The namespace takes its own objects along; the CRDs stay, as the chart keeps them.
        elsewhere = [
            obj
            for obj in applied
            if obj["metadata"].get("namespace") != NAMESPACE and obj["kind"] != "CustomResourceDefinition"
        ]
        cluster.kubectl("delete", "--ignore-not-found", "--wait=false", "-f", "-", input=as_list(elsewhere))
        restore_crd_conversion(cluster)
        cluster.kubectl("delete", "namespace", NAMESPACE, "--ignore-not-found", "--wait=false")
        wait_until(
            lambda: cluster.kubectl("get", "namespace", NAMESPACE, check=False).returncode != 0,
            f"namespace {NAMESPACE} to be deleted",
            timeout=90,
        )


@pytest.fixture(scope="module")
def fake_nvml(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fake libnvidia-ml.so.1, built with this machine's gcc for the image's glibc (both Debian's)."""
    return build(tmp_path_factory.mktemp("fake-nvml"))


def route_services_to_host(
    cluster: Cluster,
    rendered: Rendered,
    component: str,
    container: dict[str, Any],
    addresses: Sequence[str] | None = None,
) -> None:
    """What the EndpointSlice controller writes for ready pods of ``component`` at ``addresses``; by default one
    pod at the host's address (a container on the host's network, the one replica the leader the visibility
    Service selects)."""
    ports = {port["name"]: port["containerPort"] for port in container["ports"]}
    slices = []
    for service in rendered.of_kind("Service"):
        selector = service["spec"].get("selector", {})
        if selector.get("app.kubernetes.io/component") != component:
            continue
        slices.append(
            {
                "apiVersion": "discovery.k8s.io/v1",
                "kind": "EndpointSlice",
                "metadata": {
                    "name": f"{service['metadata']['name']}-image-test",
                    "namespace": NAMESPACE,
                    "labels": {"kubernetes.io/service-name": service["metadata"]["name"]},
                },
                "addressType": "IPv4",
                "endpoints": [
                    {"addresses": [address], "conditions": {"ready": True}} for address in addresses or [host_address()]
                ],
                "ports": [
                    {"name": port["name"], "port": ports[port["targetPort"]], "protocol": "TCP"}
                    for port in service["spec"]["ports"]
                ],
            }
        )
    cluster.kubectl("apply", "-f", "-", input=as_list(slices))


def identity(cluster: Cluster, name: str) -> PodIdentity:
    host, port = cluster.server.removeprefix("https://").rsplit(":", 1)
    return PodIdentity(
        name=name,
        namespace=NAMESPACE,
        node_name=cluster.node_names[0],
        api_server_host=host,
        api_server_port=int(port),
    )


def service_account(cluster: Cluster, name: str, folder: Path) -> Path:
    """A TokenRequest's token for the chart's ServiceAccount ``name`` and the cluster CA, as a kubelet mounts them."""
    token = cluster.kubectl("create", "token", name, "-n", NAMESPACE, "--duration=1h").stdout.strip()
    return service_account_folder(folder, token, cluster.pki.ca_cert, NAMESPACE)


def config_map_folder(rendered: Rendered, name: str, folder: Path) -> Path:
    """A ConfigMap's data as the files the kubelet writes for its volume."""
    folder.mkdir(parents=True)
    for key, value in rendered.one("ConfigMap", name)["data"].items():
        (folder / key).write_text(value)
        (folder / key).chmod(0o644)
    folder.chmod(0o755)
    return folder
