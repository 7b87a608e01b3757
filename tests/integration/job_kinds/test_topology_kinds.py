"""Topology-aware scheduling for a JobSet with the real JobSet controller: its workers' pod set requires one rack,
its driver is placed by implied TAS (every flavor of the queue is a TAS flavor), and every pod is gated until kuota
sends it to its domain. The fake nodes are labelled into two racks (two nodes, one node)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.cluster import Cluster
from tests.cluster.job_controllers import UpstreamController
from tests.integration.job_kinds.manifests import jobset
from tests.integration.job_kinds.queueing import GPU_TOLERATION, admitted_workload, apply, create, running_pods

pytestmark = pytest.mark.integration

RACK = "example.com/rack"
API = "kueue.x-k8s.io/v1beta2"


@pytest.fixture
def tas_queue(cluster: Cluster, team: str) -> Iterator[tuple[str, dict[str, str]]]:
    """The nodes in racks r1 (two) and r2 (one), a Topology, a TAS flavor and a queue on it: its LocalQueue's
    name, and each node's rack."""
    first, second, third = cluster.node_names[:3]
    racks = {first: "r1", second: "r1", third: "r2"}
    for node, rack in racks.items():
        cluster.kubectl("label", "node", node, f"{RACK}={rack}", "--overwrite")
    levels = [{"nodeLabel": RACK}, {"nodeLabel": "kubernetes.io/hostname"}]
    quotas = [{"name": name, "nominalQuota": amount} for name, amount in (("cpu", "512"), ("memory", "4Ti"))]
    quotas.append({"name": "nvidia.com/gpu", "nominalQuota": "48"})
    apply(
        cluster,
        {"apiVersion": API, "kind": "Topology", "metadata": {"name": f"{team}-racks"}, "spec": {"levels": levels}},
        {
            "apiVersion": API,
            "kind": "ResourceFlavor",
            "metadata": {"name": f"{team}-tas"},
            "spec": {
                "nodeLabels": {"gpu-type": "h100"},
                "topologyName": f"{team}-racks",
                "tolerations": [GPU_TOLERATION],
            },
        },
        {
            "apiVersion": API,
            "kind": "ClusterQueue",
            "metadata": {"name": f"{team}-tas"},
            "spec": {
                "namespaceSelector": {},
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu", "memory", "nvidia.com/gpu"],
                        "flavors": [{"name": f"{team}-tas", "resources": quotas}],
                    }
                ],
            },
        },
        {
            "apiVersion": API,
            "kind": "LocalQueue",
            "metadata": {"name": "tas", "namespace": team},
            "spec": {"clusterQueue": f"{team}-tas"},
        },
    )
    try:
        yield "tas", racks
    finally:
        for node in racks:
            cluster.kubectl("label", "node", node, f"{RACK}-", check=False)
        for kind, name in (
            ("clusterqueue", f"{team}-tas"),
            ("resourceflavor", f"{team}-tas"),
            ("topology", f"{team}-racks"),
        ):
            cluster.kubectl("delete", kind, name, "--ignore-not-found", "--wait=false")


def _rack_jobset(team: str, name: str, queue: str) -> dict[str, Any]:
    manifest = jobset(team, name, workers=1, gpus=8)
    manifest["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = queue
    workers = manifest["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]
    workers["metadata"]["annotations"]["kueue.x-k8s.io/podset-required-topology"] = RACK
    return manifest


def test_a_jobsets_workers_land_in_one_rack_and_its_driver_is_placed_too(
    cluster: Cluster, jobset_controller: UpstreamController, team: str, tas_queue: tuple[str, dict[str, str]]
) -> None:
    del jobset_controller
    queue, racks = tas_queue
    created = create(cluster, _rack_jobset(team, "train", queue))
    workload = admitted_workload(cluster, team, created["metadata"]["uid"])
    assignments = {a["name"]: a for a in workload["status"]["admission"]["podSetAssignments"]}
    assert set(assignments) == {"driver", "workers"}
    assert all("topologyAssignment" in assignment for assignment in assignments.values())
    pods = running_pods(cluster, team, "jobset.sigs.k8s.io/jobset-name=train", 3)
    workers = [pod for pod in pods if pod["metadata"]["labels"].get("kueue.x-k8s.io/podset") == "workers"]
    assert len(workers) == 2
    assert {racks[pod["spec"]["nodeName"]] for pod in workers} == {"r1"}
    assert all(not pod["spec"].get("schedulingGates") for pod in pods)
