"""Topology-aware scheduling on the test control plane: the three fake 8-GPU nodes labelled into two racks (two
nodes, one node), a gang that requires one rack is admitted only where a rack holds it, its pods are gated until
kuota sends each to its domain, and kube-scheduler places them there; layers of slices reach the Workload and
place whole host slices."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.cluster import Cluster
from tests.integration.manager.conftest import apply, get_json, wait_for_event
from tests.integration.manager.guide_objects import gpu_job
from tests.integration.manager.test_guide import admitted_workload, create_job, running_pods, workload_of
from tests.manager_process import ManagerProcess
from tests.waiting import wait_until

pytestmark = pytest.mark.integration

RACK = "example.com/rack"
HOSTNAME = "kubernetes.io/hostname"
API = "kueue.x-k8s.io/v1beta2"


@pytest.fixture
def racks(cluster: Cluster) -> Iterator[dict[str, str]]:
    """The fake nodes in two racks: r1 holds the first two, r2 the third; each node's rack by name."""
    first, second, third = cluster.node_names[:3]
    by_node = {first: "r1", second: "r1", third: "r2"}
    for node, rack in by_node.items():
        cluster.kubectl("label", "node", node, f"{RACK}={rack}", "--overwrite")
    try:
        yield by_node
    finally:
        for node in by_node:
            cluster.kubectl("label", "node", node, f"{RACK}-", check=False)
        cluster.kubectl("delete", "topology", "racks", check=False)


def _tas_queue(namespace: str) -> list[dict[str, Any]]:
    """A Topology of racks and hosts, a TAS flavor on the fake H100 nodes, and a queue with quota for more GPUs
    than the nodes have: only the topology can refuse."""
    return [
        {
            "apiVersion": API,
            "kind": "Topology",
            "metadata": {"name": "racks"},
            "spec": {"levels": [{"nodeLabel": RACK}, {"nodeLabel": HOSTNAME}]},
        },
        {
            "apiVersion": API,
            "kind": "ResourceFlavor",
            "metadata": {"name": "h100-tas"},
            "spec": {
                "nodeLabels": {"gpu-type": "h100"},
                "topologyName": "racks",
                "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            },
        },
        {
            "apiVersion": API,
            "kind": "ClusterQueue",
            "metadata": {"name": "tas"},
            "spec": {
                "namespaceSelector": {},
                "resourceGroups": [
                    {
                        "coveredResources": ["nvidia.com/gpu"],
                        "flavors": [
                            {"name": "h100-tas", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 48}]}
                        ],
                    }
                ],
            },
        },
        {
            "apiVersion": API,
            "kind": "LocalQueue",
            "metadata": {"name": f"{namespace}-queue", "namespace": namespace},
            "spec": {"clusterQueue": "tas"},
        },
    ]


def _rack_job(name: str, namespace: str, pods: int) -> dict[str, Any]:
    job = gpu_job(name, namespace, pods=pods, gpus_per_pod=8)
    template = job["spec"]["template"]
    template.setdefault("metadata", {})["annotations"] = {"kueue.x-k8s.io/podset-required-topology": RACK}
    template["spec"]["containers"][0]["resources"] = {
        "requests": {"nvidia.com/gpu": 8},
        "limits": {"nvidia.com/gpu": 8},
    }
    return job


def _pending_message(cluster: Cluster, namespace: str, uid: str) -> str | None:
    workload = workload_of(cluster, namespace, uid)
    for condition in (workload or {}).get("status", {}).get("conditions") or []:
        if condition["type"] == "QuotaReserved" and condition["status"] == "False":
            return str(condition["message"])
    return None


def test_a_rack_gang_lands_in_one_rack_the_next_waits_for_a_rack_and_a_single_pod_takes_the_other(
    cluster: Cluster, manager: ManagerProcess, guide_namespaces: tuple[str, ...], racks: dict[str, str]
) -> None:
    namespace = "research"
    apply(cluster, *_tas_queue(namespace))
    first = create_job(cluster, _rack_job("rack-a", namespace, pods=2))
    workload = admitted_workload(cluster, namespace, first["metadata"]["uid"])
    assignment = workload["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"]
    assert assignment["levels"] == [HOSTNAME]
    assert sum(piece["domainCount"] for piece in assignment["slices"]) == 2
    pods = running_pods(cluster, namespace, "rack-a", 2)
    assert {racks[pod["spec"]["nodeName"]] for pod in pods} == {"r1"}
    assert len({pod["spec"]["nodeName"] for pod in pods}) == 2
    assert all(not pod["spec"].get("schedulingGates") for pod in pods)

    second = create_job(cluster, _rack_job("rack-b", namespace, pods=2))
    message = wait_until(
        lambda: _pending_message(cluster, namespace, second["metadata"]["uid"]),
        "the second rack gang to wait with a reason",
        timeout=60,
    )
    assert 'topology "racks" allows to fit only 1 out of 2 pod(s)' in message
    pending = workload_of(cluster, namespace, second["metadata"]["uid"])
    assert pending is not None
    event = wait_for_event(
        cluster, namespace, "Workload", pending["metadata"]["name"], ("Warning", "TopologyPlacementFailed")
    )
    assert "allows to fit only 1 out of 2 pod(s)" in event

    third = create_job(cluster, _rack_job("rack-c", namespace, pods=1))
    admitted_workload(cluster, namespace, third["metadata"]["uid"])
    (pod,) = running_pods(cluster, namespace, "rack-c", 1)
    assert racks[pod["spec"]["nodeName"]] == "r2"
    still = workload_of(cluster, namespace, second["metadata"]["uid"])
    assert still is not None and "admission" not in still.get("status", {})
    assert get_json(cluster, "topology", "racks")["spec"]["levels"][0]["nodeLabel"] == RACK


def _holder_pod(name: str, node: str, gpus: int) -> dict[str, Any]:
    """A pod outside any queue, bound to ``node`` by its spec (no scheduler), holding ``gpus`` of its GPUs."""
    template = _rack_job(name, "default", pods=1)["spec"]["template"]
    spec = {**template["spec"], "nodeName": node, "restartPolicy": "Never"}
    holding = {"requests": {"nvidia.com/gpu": gpus}, "limits": {"nvidia.com/gpu": gpus}}
    spec["containers"] = [{**spec["containers"][0], "resources": holding}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}, "spec": spec}


def test_a_pod_outside_tas_on_the_single_node_rack_sends_a_rack_gang_to_the_other_rack(
    cluster: Cluster, manager: ManagerProcess, guide_namespaces: tuple[str, ...], racks: dict[str, str]
) -> None:
    # Kueue's non-TAS pod cache: a bound pod that is not a TAS pod takes its node's GPUs. A 1-pod rack gang
    # goes by BestFit to the fullest rack that holds it, r2; with 4 of r2's 8 GPUs held outside TAS, to r1; once
    # the holder and that gang are gone, r2 again.
    namespace = "research"
    (r2_node,) = [node for node, rack in racks.items() if rack == "r2"]
    apply(cluster, *_tas_queue(namespace))
    apply(cluster, _holder_pod("gpu-holder", r2_node, gpus=4))
    try:
        wait_until(
            lambda: get_json(cluster, "pod", "-n", "default", "gpu-holder")["status"].get("phase") == "Running",
            "the holder pod to run",
            timeout=60,
        )
        beside = create_job(cluster, _rack_job("beside-holder", namespace, pods=1))
        admitted_workload(cluster, namespace, beside["metadata"]["uid"])
        (pod,) = running_pods(cluster, namespace, "beside-holder", 1)
        assert racks[pod["spec"]["nodeName"]] == "r1"
    finally:
        cluster.kubectl("delete", "pod", "-n", "default", "gpu-holder", "--wait=true", check=False)
    cluster.kubectl("delete", "job", "-n", namespace, "beside-holder", "--wait=true")
    wait_until(
        lambda: workload_of(cluster, namespace, beside["metadata"]["uid"]) is None,
        "the first gang's Workload to go, freeing r1",
        timeout=60,
    )
    after = create_job(cluster, _rack_job("after-holder", namespace, pods=1))
    admitted_workload(cluster, namespace, after["metadata"]["uid"])
    (pod,) = running_pods(cluster, namespace, "after-holder", 1)
    assert racks[pod["spec"]["nodeName"]] == "r2"


def _layered_job(name: str, namespace: str, pods: int, gpus: int, layers: list[tuple[str, int]]) -> dict[str, Any]:
    job = _rack_job(name, namespace, pods)
    template = job["spec"]["template"]
    resources = {"requests": {"nvidia.com/gpu": gpus}, "limits": {"nvidia.com/gpu": gpus}}
    template["spec"]["containers"][0]["resources"] = resources
    constraints = json.dumps([{"topology": level, "size": size} for level, size in layers])
    template["metadata"]["annotations"]["kueue.x-k8s.io/podset-slice-required-topology-constraints"] = constraints
    return job


def test_layers_of_slices_reach_the_workload_and_place_whole_host_slices_in_one_rack(
    cluster: Cluster, manager: ManagerProcess, guide_namespaces: tuple[str, ...], racks: dict[str, str]
) -> None:
    # Kueue's TASMultiLayerTopology (on by default since v0.19): 4 pods of 4 GPUs in rack slices of 4 made of host
    # slices of 2 fill r1's two nodes two by two; 2 pods of 8 GPUs cannot make a host slice of 2 anywhere.
    namespace = "research"
    apply(cluster, *_tas_queue(namespace))
    layered = create_job(cluster, _layered_job("layered", namespace, 4, 4, [(RACK, 4), (HOSTNAME, 2)]))
    workload = admitted_workload(cluster, namespace, layered["metadata"]["uid"])
    (pod_set,) = workload["spec"]["podSets"]
    assert pod_set["topologyRequest"]["podsetSliceRequiredTopologyConstraints"] == [
        {"topology": RACK, "size": 4},
        {"topology": HOSTNAME, "size": 2},
    ]
    pods = running_pods(cluster, namespace, "layered", 4)
    per_node: dict[str, int] = {}
    for pod in pods:
        per_node[pod["spec"]["nodeName"]] = per_node.get(pod["spec"]["nodeName"], 0) + 1
    assert sorted(per_node.values()) == [2, 2]
    assert {racks[node] for node in per_node} == {"r1"}

    unfit = create_job(cluster, _layered_job("unfit", namespace, 2, 8, [(RACK, 2), (HOSTNAME, 2)]))
    message = wait_until(
        lambda: _pending_message(cluster, namespace, unfit["metadata"]["uid"]),
        "the job that makes no host slice to wait with a reason",
        timeout=60,
    )
    assert "doesn't allow to fit; 0/1 slice(s) fit on level example.com/rack; 0/1 slice(s) fit on level" in message
