"""kuota's CRDs on the real API server: the guide's YAML applies unchanged; invalid objects get clear errors."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from tests.cluster import Cluster
from tests.paths import GUIDE

pytestmark = pytest.mark.integration

GUIDE_OBJECTS = (
    "resourceflavor-h100-ondemand.yaml",
    "clusterqueue-research.yaml",
    "localqueue-research.yaml",
    "workloadpriorityclass-production-finetune.yaml",
)


@pytest.fixture
def research_namespace(cluster: Cluster) -> Iterator[str]:
    """The guide's LocalQueue names namespace ``research``; it is shared, so it is created only if missing."""
    if cluster.kubectl("get", "namespace", "research", check=False).returncode != 0:
        cluster.kubectl("create", "namespace", "research")
    yield "research"


def _apply(cluster: Cluster, document: dict[str, Any]) -> Any:
    return cluster.kubectl("apply", "-f", "-", check=False, input=json.dumps(document))


def test_the_guides_objects_apply_unchanged(
    cluster: Cluster, kuota_crds: list[dict[str, Any]], research_namespace: str
) -> None:
    del kuota_crds, research_namespace
    for name in GUIDE_OBJECTS:
        result = cluster.kubectl("apply", "-f", str(GUIDE / name), check=False)
        assert result.returncode == 0, f"{name}: {result.stderr}"
    queue = json.loads(cluster.kubectl("get", "clusterqueue", "research", "-o", "json").stdout)
    # Defaults the schema fills in, exactly as Kueue's CRD does.
    assert queue["spec"]["queueingStrategy"] == "BestEffortFIFO"
    assert queue["spec"]["flavorFungibility"] == {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor"}
    assert queue["spec"]["preemption"]["borrowWithinCohort"] == {"policy": "Never"}
    assert queue["spec"]["stopPolicy"] == "None"
    gpu = queue["spec"]["resourceGroups"][0]["flavors"][0]["resources"][2]
    assert gpu == {"name": "nvidia.com/gpu", "nominalQuota": 8, "borrowingLimit": 12}
    priority = json.loads(cluster.kubectl("get", "workloadpriorityclass", "production-finetune", "-o", "json").stdout)
    assert priority["value"] == 10000


def test_printer_columns_show_cohort_strategy_pending_and_admitted(
    cluster: Cluster, kuota_crds: list[dict[str, Any]], research_namespace: str
) -> None:
    del kuota_crds, research_namespace
    cluster.kubectl("apply", "-f", str(GUIDE / "clusterqueue-research.yaml"))
    wide = cluster.kubectl("get", "clusterqueue", "research", "-o", "wide").stdout.splitlines()
    assert wide[0].split() == ["NAME", "COHORT", "STRATEGY", "PENDING", "WORKLOADS", "ADMITTED", "WORKLOADS"]
    assert wide[1].split()[:3] == ["research", "gpu-pool", "BestEffortFIFO"]
    narrow = cluster.kubectl("get", "cq", "research").stdout.splitlines()[0]
    assert "STRATEGY" not in narrow


def test_workload_columns_show_queue_reserved_in_admitted_finished_age(
    cluster: Cluster, kuota_crds: list[dict[str, Any]], namespace: str
) -> None:
    del kuota_crds
    workload = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": "wl-1", "namespace": namespace},
        "spec": {
            "queueName": "research-queue",
            "podSets": [{"count": 2, "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}],
        },
    }
    result = _apply(cluster, workload)
    assert result.returncode == 0, result.stderr
    header = cluster.kubectl("get", "workloads", "-n", namespace).stdout.splitlines()[0].split()
    # Kueue's columns, with kuota's admission ETA before AGE
    assert header == ["NAME", "QUEUE", "RESERVED", "IN", "ADMITTED", "FINISHED", "ETA", "AGE"]
    for short_name in ("kwl", "kueueworkload", "kueueworkloads"):  # Kueue's short names
        listed = cluster.kubectl("get", short_name, "-n", namespace, "-o", "name").stdout.split()
        assert listed == ["workload.kueue.x-k8s.io/wl-1"], short_name
    stored = json.loads(cluster.kubectl("get", "kwl", "wl-1", "-n", namespace, "-o", "json").stdout)
    assert stored["spec"]["podSets"][0]["name"] == "main"
    assert stored["spec"]["active"] is True


def _rejection(cluster: Cluster, document: dict[str, Any]) -> str:
    result = _apply(cluster, document)
    assert result.returncode != 0, f"{document['kind']} was accepted"
    return str(result.stderr)


def _queue(spec: dict[str, Any], name: str = "invalid-queue") -> dict[str, Any]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def test_borrowing_limit_without_a_cohort_is_rejected_by_name(
    cluster: Cluster, kuota_crds: list[dict[str, Any]]
) -> None:
    del kuota_crds
    spec = yaml.safe_load((GUIDE / "clusterqueue-research.yaml").read_text())["spec"]
    del spec["cohortName"]
    assert "borrowingLimit must be nil when cohort is empty" in _rejection(cluster, _queue(spec))


def test_unknown_strategy_and_negative_quota_are_rejected_with_the_field(
    cluster: Cluster, kuota_crds: list[dict[str, Any]]
) -> None:
    del kuota_crds
    message = _rejection(cluster, _queue({"queueingStrategy": "Fastest"}))
    assert "spec.queueingStrategy" in message
    assert 'supported values: "StrictFIFO", "BestEffortFIFO"' in message
    group = {
        "coveredResources": ["cpu"],
        "flavors": [{"name": "f", "resources": [{"name": "cpu", "nominalQuota": "-4"}]}],
    }
    negative = _rejection(cluster, _queue({"resourceGroups": [group]}))
    assert 'spec.resourceGroups[0].flavors[0].resources[0].nominalQuota: Invalid value: "-4"' in negative


def test_every_flavor_must_list_every_covered_resource(cluster: Cluster, kuota_crds: list[dict[str, Any]]) -> None:
    del kuota_crds
    group = {
        "coveredResources": ["cpu", "memory"],
        "flavors": [{"name": "f", "resources": [{"name": "cpu", "nominalQuota": 4}]}],
    }
    message = _rejection(cluster, _queue({"resourceGroups": [group]}))
    assert "flavors must have the same number of resources as the coveredResources" in message


def test_a_local_queues_cluster_queue_is_immutable(
    cluster: Cluster, kuota_crds: list[dict[str, Any]], namespace: str
) -> None:
    del kuota_crds
    queue = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "LocalQueue",
        "metadata": {"name": "q", "namespace": namespace},
        "spec": {"clusterQueue": "a"},
    }
    assert _apply(cluster, queue).returncode == 0
    queue["spec"]["clusterQueue"] = "b"
    assert "field is immutable" in _rejection(cluster, queue)


def test_a_priority_class_needs_a_value(cluster: Cluster, kuota_crds: list[dict[str, Any]]) -> None:
    del kuota_crds
    document = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass", "metadata": {"name": "x"}}
    assert "value: Required value" in _rejection(cluster, document)


def test_a_flavor_with_too_many_node_labels_is_rejected(cluster: Cluster, kuota_crds: list[dict[str, Any]]) -> None:
    del kuota_crds
    flavor = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ResourceFlavor",
        "metadata": {"name": "too-many"},
        "spec": {"nodeLabels": {f"k{index}": "v" for index in range(9)}},
    }
    assert "spec.nodeLabels: Too many: 9: must have at most 8 items" in _rejection(cluster, flavor)
