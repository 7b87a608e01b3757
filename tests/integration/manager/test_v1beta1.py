"""YAML from Kueue 0.14 and older (``kueue.x-k8s.io/v1beta1``) on a real API server, converted by the manager's
webhook: applied with kubectl, read back in both versions with the fields renamed, and used by the controller."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
import yaml

from tests.cluster import Cluster
from tests.integration.manager.conftest import get_json
from tests.integration.manager.guide_objects import (
    FINETUNE_JOB,
    FLAVOR,
    PRIORITY_CLASS,
    RESEARCH_LOCAL_QUEUE,
    RESEARCH_QUEUE,
    guide,
)
from tests.integration.manager.test_guide import admitted_workload, create_job
from tests.manager_process import ManagerProcess
from tests.paths import GUIDE
from tests.waiting import wait_until

pytestmark = pytest.mark.integration

V1BETA1 = "kueue.x-k8s.io/v1beta1"


def _v1beta1(document: dict[str, Any]) -> dict[str, Any]:
    older = copy.deepcopy(document)
    older["apiVersion"] = V1BETA1
    return older


def v1beta1_guide() -> list[dict[str, Any]]:
    """The guide's objects as a Kueue 0.14 user wrote them: v1beta1, ``cohort``, the old fungibility default."""
    queue = _v1beta1(guide(RESEARCH_QUEUE))
    queue["spec"]["cohort"] = queue["spec"].pop("cohortName")
    queue["spec"]["flavorFungibility"] = {"whenCanBorrow": "Borrow", "whenCanPreempt": "TryNextFlavor"}
    cohorts = [
        {"apiVersion": V1BETA1, "kind": "Cohort", "metadata": {"name": "org"}, "spec": {}},
        {"apiVersion": V1BETA1, "kind": "Cohort", "metadata": {"name": "gpu-pool"}, "spec": {"parentName": "org"}},
    ]
    others = [_v1beta1(guide(name)) for name in (FLAVOR, RESEARCH_LOCAL_QUEUE, PRIORITY_CLASS)]
    return [*cohorts, others[0], queue, *others[1:]]


def _get(cluster: Cluster, resource: str, version: str, name: str, namespace: str | None = None) -> dict[str, Any]:
    scope = ["-n", namespace] if namespace else []
    found: dict[str, Any] = get_json(cluster, f"{resource}.{version}.kueue.x-k8s.io", name, *scope)
    return found


def _apply_v1beta1(cluster: Cluster) -> None:
    result = cluster.kubectl("apply", "-f", "-", check=False, input=yaml.safe_dump_all(v1beta1_guide()))
    assert result.returncode == 0, result.stderr


def test_v1beta1_yaml_applies_and_reads_back_in_both_versions(
    cluster: Cluster, manager: ManagerProcess, guide_namespaces: tuple[str, ...]
) -> None:
    del manager, guide_namespaces
    _apply_v1beta1(cluster)

    older = _get(cluster, "clusterqueues", "v1beta1", "research")
    newer = _get(cluster, "clusterqueues", "v1beta2", "research")
    assert (older["apiVersion"], older["spec"]["cohort"], "cohortName" in older["spec"]) == (V1BETA1, "gpu-pool", False)
    assert (newer["spec"]["cohortName"], "cohort" in newer["spec"]) == ("gpu-pool", False)
    # Kueue's deprecated alias is stored as the name it stands for.
    assert newer["spec"]["flavorFungibility"]["whenCanBorrow"] == "MayStopSearch"
    assert older["spec"]["resourceGroups"] == newer["spec"]["resourceGroups"]
    assert older["metadata"]["uid"] == newer["metadata"]["uid"]
    wide = cluster.kubectl("get", "clusterqueues.v1beta1.kueue.x-k8s.io", "research", "-o", "wide").stdout
    assert wide.splitlines()[1].split()[:3] == ["research", "gpu-pool", "BestEffortFIFO"]

    for version in ("v1beta1", "v1beta2"):
        assert _get(cluster, "cohorts", version, "gpu-pool")["spec"] == {"parentName": "org"}
        flavor = _get(cluster, "resourceflavors", version, "h100-ondemand")
        assert flavor["spec"]["nodeLabels"] == {"gpu-type": "h100", "capacity-type": "on-demand"}
        assert _get(cluster, "workloadpriorityclasses", version, "production-finetune")["value"] == 10000
        assert _get(cluster, "localqueues", version, "research-queue", "research")["spec"] == {
            "clusterQueue": "research",
            "stopPolicy": "None",
        }

    usage = [{"name": "h100-ondemand", "resources": [{"name": "nvidia.com/gpu", "total": "8"}]}]
    cluster.kubectl(
        "patch", "localqueues.v1beta2.kueue.x-k8s.io", "research-queue", "-n", "research", "--subresource=status",
        "--type=merge", "-p", json.dumps({"status": {"flavorsUsage": usage}}),
    )  # fmt: skip
    older_status = _get(cluster, "localqueues", "v1beta1", "research-queue", "research")["status"]
    assert (older_status["flavorUsage"], "flavorsUsage" in older_status) == (usage, False)


def test_a_v1beta1_cluster_queue_admits_a_job_whose_workload_reads_back_as_v1beta1(
    cluster: Cluster, manager: ManagerProcess, guide_namespaces: tuple[str, ...]
) -> None:
    del manager, guide_namespaces
    _apply_v1beta1(cluster)
    job = guide(FINETUNE_JOB)
    job["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = "production-finetune"
    created = create_job(cluster, job)

    admitted = admitted_workload(cluster, "research", created["metadata"]["uid"])
    assert admitted["status"]["admission"]["clusterQueue"] == "research"
    older = _get(cluster, "workloads", "v1beta1", admitted["metadata"]["name"], "research")
    assert older["apiVersion"] == V1BETA1
    assert older["spec"]["priorityClassName"] == "production-finetune"
    assert older["spec"]["priorityClassSource"] == "kueue.x-k8s.io/workloadpriorityclass"
    assert "priorityClassRef" not in older["spec"]
    assert older["status"]["admission"] == admitted["status"]["admission"]
    listed = get_json(cluster, "workloads.v1beta1.kueue.x-k8s.io", "-n", "research")["items"]
    assert [item["metadata"]["name"] for item in listed] == [admitted["metadata"]["name"]]
    wait_until(
        lambda: _get(cluster, "clusterqueues", "v1beta1", "research").get("status", {}).get("admittedWorkloads") == 1,
        "the v1beta1 ClusterQueue to count the admitted Workload",
    )


def test_v1beta1_rules_name_v1beta1_fields_and_the_guide_still_applies_as_v1beta2(
    cluster: Cluster, manager: ManagerProcess, guide_namespaces: tuple[str, ...]
) -> None:
    del manager, guide_namespaces
    queue = _v1beta1(guide(RESEARCH_QUEUE))
    queue["metadata"]["name"] = "no-cohort"
    del queue["spec"]["cohortName"]
    refused = cluster.kubectl("apply", "-f", "-", check=False, input=json.dumps(queue))
    assert refused.returncode != 0
    assert "borrowingLimit must be nil when cohort is empty" in refused.stderr

    _apply_v1beta1(cluster)
    for name in (FLAVOR, RESEARCH_QUEUE, RESEARCH_LOCAL_QUEUE, PRIORITY_CLASS):
        result = cluster.kubectl("apply", "-f", str(GUIDE / name), check=False)
        assert result.returncode == 0, f"{name}: {result.stderr}"
    assert _get(cluster, "clusterqueues", "v1beta2", "research")["spec"]["cohortName"] == "gpu-pool"
