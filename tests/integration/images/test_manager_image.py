"""The manager image run as the chart's Deployment runs it: its args, env, probes and securityContext (non-root,
read-only root, every capability dropped) from ``helm template``, the chart's ServiceAccount token and the cluster
CA where a pod has them, and the chart's RBAC as its only rights. The API server reaches its webhook and its
visibility API through the chart's Services, and the guide's Job is admitted."""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from tests.cluster import Cluster
from tests.cluster.pod_container import PodContainer, image_user
from tests.integration.images.conftest import (
    config_map_folder,
    identity,
    rbac_denials,
    route_services_to_host,
    service_account,
)
from tests.integration.manager.conftest import ensure_namespace
from tests.integration.manager.guide_objects import FINETUNE_JOB, VERBATIM
from tests.integration.manager.test_guide import admitted_workload, running_pods
from tests.paths import GUIDE
from tests.unit.chart.rendering import NAMESPACE, Rendered, pod_spec
from tests.waiting import wait_until

pytestmark = pytest.mark.integration

POD = "kuota-manager-image-0"


def deployment_pod(chart: Rendered) -> dict[str, Any]:
    return pod_spec(chart.one("Deployment"))


def start_manager(cluster: Cluster, chart: Rendered, workdir: Path, account: Path | None) -> PodContainer:
    spec = deployment_pod(chart)
    volumes = {"config": config_map_folder(chart, spec["volumes"][0]["configMap"]["name"], workdir / "config")}
    return PodContainer.start(
        spec, "manager", identity=identity(cluster, POD), workdir=workdir, volumes=volumes, service_account=account
    )


@pytest.fixture(scope="module")
def manager(cluster: Cluster, chart: Rendered, tmp_path_factory: pytest.TempPathFactory) -> Iterator[PodContainer]:
    workdir = tmp_path_factory.mktemp("manager-image")
    # The Pod the replica's identity names: the leader labels it for the visibility Service.
    stand_in = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": POD, "namespace": NAMESPACE},
        "spec": {
            "nodeSelector": {"kuota.test/no-such-node": "true"},
            "containers": [{"name": "manager", "image": deployment_pod(chart)["containers"][0]["image"]}],
        },
    }
    cluster.kubectl("apply", "-f", "-", input=json.dumps(stand_in))
    route_services_to_host(cluster, chart, "manager", deployment_pod(chart)["containers"][0])
    container = start_manager(cluster, chart, workdir, service_account(cluster, "kuota-manager", workdir / "account"))
    try:
        wait_until(lambda: container.ready() or container.exited(), "the manager container's readiness", timeout=120)
        assert container.ready(), container.logs()
        yield container
    finally:
        (workdir / "manager.log").write_text(container.logs())
        container.stop()


def _available(cluster: Cluster, api_service: str) -> bool:
    found = json.loads(cluster.kubectl("get", "apiservice", api_service, "-o", "json").stdout)
    return any(c["type"] == "Available" and c["status"] == "True" for c in found["status"].get("conditions", []))


def test_the_image_runs_as_the_non_root_user_the_chart_names(chart: Rendered) -> None:
    """Someone running the image without the chart gets the same user the chart asks for."""
    spec = deployment_pod(chart)
    image = spec["containers"][0]["image"]
    security = spec["securityContext"]
    assert image_user(image) == f"{security['runAsUser']}:{security['runAsGroup']}"


def _admits_the_guides_job(cluster: Cluster, chart: Rendered) -> None:
    for name in VERBATIM:
        cluster.kubectl("apply", "-f", str(GUIDE / name))
    created = json.loads(cluster.kubectl("create", "-f", str(GUIDE / FINETUNE_JOB), "-o", "json").stdout)
    assert created["spec"]["suspend"] is True, "the chart's Service did not bring the Job to the webhook"
    workload = admitted_workload(cluster, "research", created["metadata"]["uid"])
    assert workload["status"]["admission"]["podSetAssignments"][0]["flavors"]["nvidia.com/gpu"] == "h100-ondemand"
    running_pods(cluster, "research", created["metadata"]["name"], 2)
    for api_service in chart.of_kind("APIService"):
        name = api_service["metadata"]["name"]
        wait_until(partial(_available, cluster, name), f"APIService {name} Available", timeout=60)
    pending = cluster.kubectl(
        "get", "--raw", "/apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues/research/pendingworkloads"
    )
    assert json.loads(pending.stdout)["kind"] == "PendingWorkloadsSummary"


def test_the_manager_image_admits_the_guides_job_with_nothing_but_the_charts_rights(
    cluster: Cluster, chart: Rendered, manager: PodContainer
) -> None:
    ensure_namespace(cluster, "research")
    try:
        _admits_the_guides_job(cluster, chart)
    except AssertionError as failure:
        denied = "\n".join(rbac_denials(manager.logs())) or "none"
        raise AssertionError(f"{failure}\nthe manager's RBAC denials:\n{denied}") from failure
    finally:
        cluster.kubectl("delete", "jobs", "--all", "-n", "research", "--wait=false")
        wait_until(
            lambda: not json.loads(cluster.kubectl("get", "workloads", "-n", "research", "-o", "json").stdout)["items"],
            "the guide's Workload to be released by the manager",
        )
        cluster.kubectl("delete", "clusterqueues,localqueues,resourceflavors,workloadpriorityclasses", "--all", "-A")
    assert not rbac_denials(manager.logs())
